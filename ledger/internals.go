package ledger

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Internals reach into the engine for the domain's tests (package repo):
// the outbox's, rollback's, idempotency's and the index's tests stop the
// write protocol at a named point (Hook) or drive one protocol on a store
// that would choose another. The engine's own protocol tests (crash, fault,
// group commit, recovery) are in this package and use its fields directly.
// The service never calls Engine.Internals.
type Internals struct {
	// Hook, when set, runs after each step of the write protocol; an error
	// from it stops the protocol there as a crash would (ErrCrashed), or
	// fails the store's step when it wraps ErrInjected.
	Hook         *func(point string) error
	SerialWrites *bool
	Caps         *Capabilities
	Exclusive    *bool
	e            *Engine
}

// Internals returns the engine's protocol state, for tests.
func (s *Engine) Internals() Internals {
	return Internals{Hook: &s.hook, SerialWrites: &s.serialWrites, Caps: &s.caps, Exclusive: &s.exclusive, e: s}
}

// Protocol errors and limits, for tests.
var (
	// ErrCrashed is what a write returns when Hook stopped it as a crash would.
	ErrCrashed = errCrashed
	// ErrInjected marks a store failure Hook injects.
	ErrInjected = errInjected
	// PlanChunkBytes is the size of a stored plan's chunks.
	PlanChunkBytes = &planChunkBytes
)

// PlanApplied is the state of a plan whose group landed whole.
const PlanApplied = planApplied

// Plan is a stored plan's header, for tests.
type Plan = plan

// CloneM copies a document one level deep.
func CloneM(m bson.M) bson.M { return cloneM(m) }

// PutIdempotency stores an idempotency claim as the engine does.
func (in Internals) PutIdempotency(ctx context.Context, filter bson.M, claim *Idempotency) (bool, error) {
	return in.e.putIdempotency(ctx, filter, claim)
}

// IndexKept reports whether the engine keeps its own index as it writes
// (the exclusive embedded store); an index that follows the change log (a
// server, Options.ServerIndex) is IndexFollows.
func (in Internals) IndexKept() bool { return in.e.written() }

// IndexFollows reports whether the engine's own index follows the change
// log (a server with Options.ServerIndex).
func (in Internals) IndexFollows() bool { return in.e.mirror != nil && in.e.mirror.follow != nil }

// IndexStale reports whether the index is being rebuilt.
func (in Internals) IndexStale() bool { return in.e.mirror.stale.Load() }

// IndexIDs answers a find from the index alone (ok false: it cannot).
func (in Internals) IndexIDs(coll string, filter bson.M, sort bson.D, skip, limit int64) ([]string, int64, bool) {
	return in.e.mirror.ids(mirrorQuery{coll: coll, filter: filter, sort: sort, skip: skip, limit: limit})
}

// StoreIDs answers the same find from the store alone.
func (in Internals) StoreIDs(ctx context.Context, coll string, filter bson.M, sort bson.D, skip, limit int64) ([]string, int64, error) {
	return in.e.storeIDs(ctx, mirrorQuery{coll: coll, filter: filter, sort: sort, skip: skip, limit: limit})
}

// Covered returns the records of ids with projection from the index, when
// it covers the projection.
func (in Internals) Covered(coll string, ids []string, projection bson.M) ([]bson.Raw, bool) {
	return in.e.covered(coll, ids, projection)
}

// IndexLost marks coll's index lost (a write's outcome unknown): it is rebuilt.
func (in Internals) IndexLost(coll string, err error) { in.e.mirrorLost(coll, err) }

// DecodeRaw decodes one stored record as the engine's reads do.
func DecodeRaw(raw bson.Raw, into any) error { return decodeRaw(raw, into) }
