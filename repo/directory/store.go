// Package directory is the domain's area of the media directory: outlets,
// their channels, contacts and their affiliations with outlets, and the
// imports of contacts and outlets. It sits at the bottom of the areas: it
// imports the core alone, and the areas that read the directory's records
// (the pipeline's guards, pitches, the dossiers, reports) sit above it. It
// registers with the core at init the rollback rules of its kinds.
package directory

import "outreach/repo"

// Store is the core's store seen from this area: the area's methods on top
// of everything the core offers (see docs/architecture.md, "Areas").
type Store struct{ *repo.Store }

// Of returns the area's face of s.
func Of(s *repo.Store) *Store { return &Store{Store: s} }
