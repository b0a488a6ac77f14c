// Package dossiers is the domain's area of reading a record with what
// surrounds it: a contact's and an outlet's dossier, where an opportunity
// stands, and a member's agenda. It only reads, across the areas below it.
package dossiers

import "outreach/repo"

// Store is the core's store seen from this area: the area's methods on top
// of everything the core offers (see docs/architecture.md, "Areas").
type Store struct{ *repo.Store }

// Of returns the area's face of s.
func Of(s *repo.Store) *Store { return &Store{Store: s} }
