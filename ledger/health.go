package ledger

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
)

// Health is what the engine can tell an operator of its own state, for
// readiness and metrics. Reading it takes no lock a write holds for long
// and asks nothing of the store.
type Health struct {
	// Recovering: a recovery pass is settling writes left in doubt (at
	// start, or after one of this process's own writes failed half-way on
	// a store it alone writes). Writes to the records concerned wait.
	Recovering bool
	// IndexKept: the engine keeps its own index (the exclusive embedded
	// store); the fields below say nothing otherwise.
	IndexKept bool
	// IndexBuilding: the index is being built (its first build, or a
	// rebuild after a write whose outcome was unknown); queries read the
	// store meanwhile, correct but slower.
	IndexBuilding bool
	// IndexRecords is how many records the built index holds (0 while the
	// first build runs).
	IndexRecords int
	// IndexFollowing: the index follows the change log (a server with the
	// service's own index, ledger/mirror_follow.go). IndexPosition is the
	// seq it has followed up to, IndexCounter the store's counter it last
	// read; IndexBehind: it has been below that counter for over two
	// seconds (a write in flight, or a seq taken and not yet resolved):
	// reads wait a moment, then read the store, correct but slower.
	// IndexStoreReads counts the reads that did so, IndexReads those the
	// index was current for.
	IndexFollowing  bool
	IndexBehind     bool
	IndexPosition   int64
	IndexCounter    int64
	IndexStoreReads int64
	IndexReads      int64
	// Commits counts the writes (a mutation or a group) that landed since
	// the process started; Conflicts those refused as a lost race or a
	// record locked by a group in progress; Recovered the writes in doubt
	// recovery settled (applied or aborted).
	Commits, Conflicts, Recovered int64
}

// Health reports the engine's state (see Health).
func (s *Engine) Health() Health {
	h := Health{Recovering: s.recovering.Load() > 0, Commits: s.committed.Load(), Conflicts: s.conflicts.Load(), Recovered: s.recovered.Load()}
	mi := s.mirror
	if mi == nil {
		return h
	}
	h.IndexKept = true
	h.IndexBuilding = mi.stale.Load()
	if mi.follow != nil {
		s.followStatus(&h)
	}
	mi.mu.RLock()
	for _, c := range mi.colls {
		h.IndexRecords += c.Len()
	}
	mi.mu.RUnlock()
	return h
}

// counted counts a write's outcome for Health.
func (s *Engine) counted(entries []audit.Entry, err error) ([]audit.Entry, error) {
	switch {
	case err == nil:
		s.committed.Add(1)
	case isConflict(err):
		s.conflicts.Add(1)
	}
	return entries, err
}

// PendingIntents counts the write intents not yet marked done: writes in
// flight, or left in doubt for recovery. On the serial protocol the
// process's own last intent stays pending while it runs (one store write
// less per change), so 1 there is the resting state.
func (s *Engine) PendingIntents(ctx context.Context) (int64, error) {
	return s.coll(collIntents).CountDocuments(ctx, bson.M{"state": "pending"})
}
