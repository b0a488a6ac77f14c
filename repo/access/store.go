// Package access is the domain's area of who may come in by OAuth: the
// authorization server's grants, clients, authorization requests and
// sign-ins (package oauth serves them). Agent keys and users stay in the
// core (package repo), which every area's guards read.
package access

import "outreach/repo"

// Store is the core's store seen from this area: the area's methods on top
// of everything the core offers (see docs/architecture.md, "Areas").
type Store struct{ *repo.Store }

// Of returns the area's face of s.
func Of(s *repo.Store) *Store { return &Store{Store: s} }
