// Package pitches is the domain's area of pitches sent from the team
// mailbox: the drafts, their approval (also from Slack), the guards at
// sending, the delivery worker's claims, replies and bounces, and the
// suppression list. It registers with the core at init the rollback rule of
// pitches and the reaction to a stored email (a reply to a pitch), without
// which the core's Open refuses to start.
package pitches

import (
	"context"

	"outreach/repo"
)

// Store is the core's store seen from this area: the area's methods on top
// of everything the core offers (see docs/architecture.md, "Areas").
type Store struct{ *repo.Store }

// Of returns the area's face of s.
func Of(s *repo.Store) *Store { return &Store{Store: s} }

func init() {
	repo.OnEmailStored(func(ctx context.Context, s *repo.Store, in repo.IncomingEmail, res repo.IngestResult) {
		Of(s).pitchReply(ctx, in, res)
	})
}
