package ledger

// The domain derives some answers from the change log and the session
// bindings alone (a key's implicit session: its last applied change, its
// newest bound session). Where this process is the store's only writer and
// its index is live, every change that can alter such an answer passes
// through the engine: a change entry it lands (mirrorPut), a write whose
// outcome was lost (mirrorLost), a session bound or opened. Each moves a
// generation; an answer read under one generation may be reused until the
// next.

// bumpSessionGen is called after a change that may alter what is derived
// from the change log or the session bindings.
func (s *Engine) bumpSessionGen() { s.sessionGen.Add(1) }

// SessionGeneration returns the current generation, and whether answers
// derived from the change log and the session bindings may be cached at
// all: only where this process is the store's only writer and its index is
// live (elsewhere another process may write, and every call reads).
func (s *Engine) SessionGeneration() (gen uint64, cacheable bool) {
	gen = s.sessionGen.Load()
	return gen, s.mirror != nil && s.serialWrites && !s.mirror.stale.Load()
}
