// Package reports is the domain's area of the coverage report: reach,
// share of voice, weekly trend, advertising value and the pitches' answer
// rates over a period, computed from coverage, opportunities, pitches and
// mail. It only reads them; it keeps the organisation settings it weighs
// by (settings.go), a singleton it registers with the core at init so that
// a rollback restores their defaults.
package reports

import "outreach/repo"

// Store is the core's store seen from this area: the area's methods on top
// of everything the core offers (see docs/architecture.md, "Areas").
type Store struct{ *repo.Store }

// Of returns the area's face of s.
func Of(s *repo.Store) *Store { return &Store{Store: s} }
