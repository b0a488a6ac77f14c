// Package inbox is the domain's area of the team's mail: email threads
// and their messages as the mailbox sync stores them (threading, contacts
// by address, links to opportunities), the messages held back and why, a
// mailbox's sync mark, and the email searches. It registers the rollback
// rule of threads and the sync mark's defaults with the core at init. What
// a stored message makes happen above it (a reply to a pitch) is
// registered with this area by the area concerned (OnEmailStored,
// incoming.go), never imported from here; Open checks it (RegisterNeed).
package inbox

import "outreach/repo"

// Store is the core's store seen from this area: the area's methods on top
// of everything the core offers (see docs/architecture.md, "Areas").
type Store struct{ *repo.Store }

// Of returns the area's face of s.
func Of(s *repo.Store) *Store { return &Store{Store: s} }
