package ledger

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
}

// Health reports the engine's state (see Health).
func (s *Engine) Health() Health {
	h := Health{Recovering: s.recovering.Load() > 0}
	mi := s.mirror
	if mi == nil {
		return h
	}
	h.IndexKept = true
	h.IndexBuilding = mi.stale.Load()
	mi.mu.RLock()
	for _, c := range mi.colls {
		h.IndexRecords += c.Len()
	}
	mi.mu.RUnlock()
	return h
}
