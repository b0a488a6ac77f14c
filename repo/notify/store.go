// Package notify is the domain's area of the outbox past its writing:
// subscriptions to opportunities, the notifications a member lists and
// marks read, the delivery workers' claims and attempts, and the messages
// sent to Slack (questions and their answers, approval requests). The
// notifications themselves are written by the outbox (repo/outbox), in the
// same unit as the change that caused them, so both land or neither does.
package notify

import "outreach/repo"

// Store is the core's store seen from this area: the area's methods on top
// of everything the core offers (see docs/architecture.md, "Areas").
type Store struct{ *repo.Store }

// Of returns the area's face of s.
func Of(s *repo.Store) *Store { return &Store{Store: s} }
