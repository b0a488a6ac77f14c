package tools

import (
	"slices"

	"outreach/repo"
)

// All is every tool of the service, in the order tools/list shows them.
func All(s *repo.Store, opts ...Option) []Tool {
	return slices.Concat(
		Outlets(s),
		Contacts(s),
		Channels(s),
		Campaigns(s),
		Opportunities(s),
		Coverage(s),
		Notes(s),
		Search(s),
		Audit(s),
		Keys(s),
		Media(s),
		Emails(s, opts...),
	)
}
