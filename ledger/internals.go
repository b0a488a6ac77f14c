package ledger

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger/index"
)

// Internals reach into the engine's protocol for tests: the crash, fault,
// group-commit and recovery tests stop the protocol at a named point (Hook),
// drive one protocol on a store that would choose another, or hold the
// serial lock while writers queue. The service never calls Engine.Internals.
type Internals struct {
	// Hook, when set, runs after each step of the write protocol; an error
	// from it stops the protocol there as a crash would (ErrCrashed), or
	// fails the store's step when it wraps ErrInjected.
	Hook         *func(point string) error
	SerialWrites *bool
	Caps         *Capabilities
	Lease        *time.Duration
	Exclusive    *bool
	WriteMu      *sync.Mutex
	Locks        *map[string]string
	e            *Engine
}

// Internals returns the engine's protocol state, for tests.
func (s *Engine) Internals() Internals {
	return Internals{Hook: &s.hook, SerialWrites: &s.serialWrites, Caps: &s.caps, Lease: &s.lease,
		Exclusive: &s.exclusive, WriteMu: &s.writeMu, Locks: &s.locks, e: s}
}

// Protocol errors and limits, for tests.
var (
	// ErrCrashed is what a write returns when Hook stopped it as a crash would.
	ErrCrashed = errCrashed
	// ErrInjected marks a store failure Hook injects.
	ErrInjected = errInjected
	// MaxCommitBatch is the group commit's largest batch.
	MaxCommitBatch = &maxCommitBatch
	// PlanChunkBytes is the size of a stored plan's chunks.
	PlanChunkBytes = &planChunkBytes
)

// PlanApplied is the state of a plan whose group landed whole.
const PlanApplied = planApplied

// Plan is a stored plan's header, for tests.
type Plan = plan

// CloneM copies a document one level deep.
func CloneM(m bson.M) bson.M { return cloneM(m) }

// TxOptions are the options every transaction of the write path runs with.
func TxOptions() *options.TransactionOptionsBuilder { return txOptions() }

// Queued counts the writers waiting in the group commit queue.
func (in Internals) Queued() int {
	in.e.commits.mu.Lock()
	defer in.e.commits.mu.Unlock()
	return len(in.e.commits.waiting)
}

// NewEntry builds m's change entry as the write path does.
func (in Internals) NewEntry(actor audit.Actor, m Mutation, planID string) audit.Entry {
	return in.e.newEntry(actor, m, planID)
}

// NextSeq reserves the next change sequence number.
func (in Internals) NextSeq(ctx context.Context) (int64, error) { return in.e.nextSeq(ctx) }

// WriteRecord writes m's record alone (no entry), as a writer that stopped
// between its steps left it.
func (in Internals) WriteRecord(ctx context.Context, m Mutation, entryID, planID string, keepLock bool) error {
	return in.e.writeRecord(ctx, m, entryID, planID, keepLock)
}

// MirrorRefresh has the engine's index read a record again from the store.
func (in Internals) MirrorRefresh(ctx context.Context, coll, id string) {
	in.e.mirrorRefresh(ctx, coll, id)
}

// PutIdempotency stores an idempotency claim as the engine does.
func (in Internals) PutIdempotency(ctx context.Context, filter bson.M, claim *Idempotency) (bool, error) {
	return in.e.putIdempotency(ctx, filter, claim)
}

// OtherProcess is a second engine on the same database, as another process
// (or its recovery timer) would hold: it shares nothing in memory.
func (in Internals) OtherProcess() *Engine {
	s := in.e
	return &Engine{client: s.client, db: s.db, caps: s.caps, lease: s.lease, log: s.log, schema: s.schema}
}

// IndexKept reports whether the engine keeps its own index (the exclusive
// embedded store).
func (in Internals) IndexKept() bool { return in.e.mirror != nil }

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

// IndexOnly is an engine holding nothing but an index of colls, for the
// index's benchmarks.
func IndexOnly(colls map[string]*index.Coll) Internals {
	return Internals{e: &Engine{mirror: &mirror{colls: colls}}}
}

// DecodeRaw decodes one stored record as the engine's reads do.
func DecodeRaw(raw bson.Raw, into any) error { return decodeRaw(raw, into) }
