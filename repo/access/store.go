// Package access is the domain's area of who may come in by OAuth: the
// authorization server's grants, clients, authorization requests and
// sign-ins (package oauth serves them), and the team's users and agent keys:
// creating, listing and revoking keys, and the authentication look-up. The
// records of users and keys stay in the core (package repo), whose outbox,
// rollback and cache of verified keys read them.
package access

import "outreach/repo"

// Store is the core's store seen from this area: the area's methods on top
// of everything the core offers (see docs/architecture.md, "Areas").
type Store struct{ *repo.Store }

// Of returns the area's face of s.
func Of(s *repo.Store) *Store { return &Store{Store: s} }
