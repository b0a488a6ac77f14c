package tools

import (
	"slices"

	"outreach/repo"
	"outreach/slackmsg"
)

// Option configures what All's tools reach outside the store.
type Option func(*deps)

type deps struct{ slack *slackmsg.Client }

// WithSlack gives the Messaging tools their Slack client.
func WithSlack(c *slackmsg.Client) Option { return func(d *deps) { d.slack = c } }

// All is every tool of the service, in the order tools/list shows them.
func All(s *repo.Store, opts ...Option) []Tool {
	var d deps
	for _, o := range opts {
		o(&d)
	}
	return slices.Concat(
		Outlets(s),
		Contacts(s),
		Channels(s),
		Campaigns(s),
		Opportunities(s),
		Coverage(s),
		Notes(s),
		Audit(s),
		Keys(s),
		Media(s),
		Notifications(s),
		Messaging(s, d.slack),
	)
}
