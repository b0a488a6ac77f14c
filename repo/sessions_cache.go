package repo

import (
	"context"
	"strings"
	"sync"

	"outreach/ledger"
)

// The implicit session of a call that names none is looked up on every
// such call: two reads of the store (the key's last applied change, its
// newest bound session), a third of a small read's time. Where this
// process is the store's only writer (the embedded store, with its own
// indexes live), every change that can alter the answer passes through
// the engine, which moves a generation (ledger.Engine.SessionGeneration);
// an answer read under one generation is reused until the next, or, when
// the next is a change entry landing, carried over with that entry folded
// in (advance), so that writes do not send every next call to the store.
// The facts it caches do not depend on the clock, which ImplicitSession
// applies to them on every call. Elsewhere (other processes may write)
// every call reads the store.

// implicitCache holds implicitFacts per key prefix, as of generation gen.
type implicitCache struct {
	mu    sync.Mutex
	gen   uint64
	facts map[string]implicitFacts
}

// maxImplicitCached bounds the cache: one entry per key that calls.
const maxImplicitCached = 4096

// get returns the facts kept for prefix if they were read under gen.
func (c *implicitCache) get(prefix string, gen uint64) (implicitFacts, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return implicitFacts{}, false
	}
	f, ok := c.facts[prefix]
	return f, ok
}

// put keeps facts read under generation gen, unless a change came since
// (now is the generation after the read).
func (c *implicitCache) put(prefix string, f implicitFacts, gen, now uint64) {
	if gen != now {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.facts == nil || len(c.facts) >= maxImplicitCached {
		c.gen, c.facts = gen, map[string]implicitFacts{}
	}
	c.facts[prefix] = f
}

// advance carries the facts held for generation gen-1 over to gen, the
// generation a change entry's landing moved to (ledger.OnChangeLanded),
// folding that entry in: the last applied change of a prefix is the one
// with the highest seq, so an applied entry of a session under a prefix
// whose seq is higher becomes its last, and nothing else about the facts
// moves. Facts of any other generation are left to be dropped (something
// else moved it: a session bound, a write's outcome lost).
func (c *implicitCache) advance(gen uint64, ch ledger.LandedChange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.facts == nil || c.gen != gen-1 {
		return
	}
	c.gen = gen
	if !ch.Applied {
		return
	}
	for prefix, f := range c.facts {
		// The same test as the query's anchored regular expression.
		if strings.HasPrefix(ch.SessionID, prefix) && (!f.HasLast || ch.Seq > f.LastSeq) {
			f.LastID, f.LastAt, f.LastSeq, f.HasLast = ch.SessionID, ch.At, ch.Seq, true
			c.facts[prefix] = f
		}
	}
}

// implicitFacts reads the facts of a key's implicit session, from the
// cache where this process is the only writer and its indexes are live.
func (s *Store) implicitFacts(ctx context.Context, prefix string) (implicitFacts, error) {
	gen, cacheable := s.SessionGeneration()
	if !cacheable {
		return s.readImplicitFacts(ctx, prefix)
	}
	if f, ok := s.implicit.get(prefix, gen); ok {
		return f, nil
	}
	f, err := s.readImplicitFacts(ctx, prefix)
	if err != nil {
		return f, err
	}
	now, _ := s.SessionGeneration()
	s.implicit.put(prefix, f, gen, now)
	return f, nil
}
