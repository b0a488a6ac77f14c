// Package notes is the domain's area of notes: meeting recaps, phone
// calls, research findings, each linked to contacts, outlets,
// opportunities or channels, with its links' rule. It imports the core and
// the outbox alone (a create_note's path is notes, the core, the outbox,
// ledger and audit: repo/direction_test.go holds it): an opportunity a note
// links is read as the core's record, and the note's event is written by the
// outbox (repo/outbox) in the note's unit. It
// registers with the core at init the rollback rule of notes and the note
// a stage change writes with it (RegisterStageNote).
package notes

import "outreach/repo"

// Store is the core's store seen from this area: the area's methods on top
// of everything the core offers (see docs/architecture.md, "Areas").
type Store struct{ *repo.Store }

// Of returns the area's face of s.
func Of(s *repo.Store) *Store { return &Store{Store: s} }
