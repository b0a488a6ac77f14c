// Package search is the domain's area of search across the kinds of
// record: the query, the hits read from the store or decided by the
// service's word index, their ranking, titles and snippets. What the word
// index holds of each searched kind (SearchKinds, the folding of texts)
// is the core's, since the core registers the index with the engine and
// the lists' free-text filters read it too.
package search

import "outreach/repo"

// Store is the core's store seen from this area: the area's methods on top
// of everything the core offers (see docs/architecture.md, "Areas").
type Store struct{ *repo.Store }

// Of returns the area's face of s.
func Of(s *repo.Store) *Store { return &Store{Store: s} }
