package repo

import (
	"context"
	"sync"
)

// The implicit session of a call that names none is looked up on every
// such call: two reads of the store (the key's last applied change, its
// newest bound session), a third of a small read's time. Where this
// process is the store's only writer (the embedded store, with its own
// indexes live), every change that can alter the answer passes through
// it: a change entry the write path lands (mirrorPut), a write whose
// outcome was lost (mirrorLost), a session bound or opened. Each of them
// moves a generation, and an answer read under one generation is reused
// until the next: the facts it caches do not depend on the clock, which
// ImplicitSession applies to them on every call. Elsewhere (other
// processes may write) every call reads the store.

// implicitCache holds implicitFacts per key prefix, as of generation gen.
type implicitCache struct {
	mu    sync.Mutex
	gen   uint64
	facts map[string]implicitFacts
}

// maxImplicitCached bounds the cache: one entry per key that calls.
const maxImplicitCached = 4096

// invalidate is called after a change that may alter an implicit session.
func (c *implicitCache) invalidate() {
	c.mu.Lock()
	c.gen++
	clear(c.facts)
	c.mu.Unlock()
}

func (c *implicitCache) get(prefix string) (implicitFacts, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.facts[prefix]
	return f, c.gen, ok
}

// put keeps facts read under generation gen, unless a change came since.
func (c *implicitCache) put(prefix string, f implicitFacts, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.facts == nil || len(c.facts) >= maxImplicitCached {
		c.facts = map[string]implicitFacts{}
	}
	c.facts[prefix] = f
}

// implicitFacts reads the facts of a key's implicit session, from the
// cache where this process is the only writer and its indexes are live.
func (s *Store) implicitFacts(ctx context.Context, prefix string) (implicitFacts, error) {
	if s.mirror == nil || !s.serialWrites || s.mirror.stale.Load() {
		return s.readImplicitFacts(ctx, prefix)
	}
	if f, _, ok := s.implicit.get(prefix); ok {
		return f, nil
	}
	_, gen, _ := s.implicit.get(prefix)
	f, err := s.readImplicitFacts(ctx, prefix)
	if err != nil {
		return f, err
	}
	s.implicit.put(prefix, f, gen)
	return f, nil
}
