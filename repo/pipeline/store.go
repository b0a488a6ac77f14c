// Package pipeline is the domain's area of the pipeline: campaigns,
// opportunities and their stages, coverage, media and the pitch guards
// (the double pitch, the embargo). It imports the core and the areas below
// it; the areas that read opportunities (notify, the inbox, pitches,
// dossiers, reports) sit above it. It registers with the core at init the
// rollback rules of its kinds.
package pipeline

import "outreach/repo"

// Store is the core's store seen from this area: the area's methods on top
// of everything the core offers (see docs/architecture.md, "Areas").
type Store struct{ *repo.Store }

// Of returns the area's face of s.
func Of(s *repo.Store) *Store { return &Store{Store: s} }
