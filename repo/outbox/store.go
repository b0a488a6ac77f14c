// Package outbox is the outbox's writing, at the bottom of the domain's
// areas: the notifications an event on a subscribed opportunity (or a
// service event for the admins) becomes, written by a mutation of the same
// group as the change that caused them, so both land or neither does. It
// imports the core alone, so notes and the pipeline write through it
// (InsertWithEvents, EventMutations); subscribing, listing, marking read
// and delivering are the notify area's (repo/notify).
package outbox

import (
	"context"
	"sync/atomic"

	"outreach/repo"
)

// Store is the core's store seen from this area: the area's methods on top
// of everything the core offers (see docs/architecture.md, "Areas").
type Store struct{ *repo.Store }

// Of returns the area's face of s.
func Of(s *repo.Store) *Store { return &Store{Store: s} }

// state is what the area keeps per store: the delivery targets of new
// notifications, set at start.
type state struct {
	targets atomic.Pointer[[]string]
}

type stateKey struct{}

func (s *Store) state() *state {
	return s.AreaState(stateKey{}, func() any { return new(state) }).(*state)
}

func init() {
	// A rollback of an opportunity's stage notifies its subscribers of the
	// move back, in the rollback's unit.
	repo.RegisterRollbackEvents(func(ctx context.Context, s *repo.Store, muts []repo.Mutation) ([]repo.Mutation, error) {
		return Of(s).rollbackEvents(ctx, muts)
	})
}
