package tools

import (
	"slices"

	"outreach/repo"
	"outreach/slackmsg"
)

// WithSlack gives the Messaging tools their Slack client.
func WithSlack(c *slackmsg.Client) Option { return func(o *options) { o.slack = c } }

// All is every tool of the service, in the order tools/list shows them.
func All(s *repo.Store, opts ...Option) []Tool {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return slices.Concat(
		Outlets(s),
		Contacts(s),
		Channels(s),
		Campaigns(s),
		Opportunities(s),
		Coverage(s),
		Reports(s),
		Imports(s),
		Notes(s),
		Search(s),
		Audit(s),
		Keys(s),
		Media(s),
		Emails(s, opts...),
		Notifications(s),
		Messaging(s, o.slack),
	)
}
