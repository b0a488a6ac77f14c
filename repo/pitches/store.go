// Package pitches is the domain's area of pitches sent from the team
// mailbox: the drafts, their approval (also from Slack), the guards at
// sending, the delivery worker's claims, replies and bounces, and the
// suppression list. It registers at init the rollback rule of pitches with
// the core and the reaction to a stored email (a reply to a pitch) with the
// inbox, without either of which the core's Open refuses to start.
package pitches

import (
	"context"

	"outreach/repo"
	"outreach/repo/inbox"
)

// Store is the core's store seen from this area: the area's methods on top
// of everything the core offers (see docs/architecture.md, "Areas").
type Store struct{ *repo.Store }

// Of returns the area's face of s.
func Of(s *repo.Store) *Store { return &Store{Store: s} }

func init() {
	inbox.OnEmailStored(func(ctx context.Context, s *repo.Store, in inbox.IncomingEmail, res inbox.IngestResult) {
		Of(s).pitchReply(ctx, in, res)
	})
}
