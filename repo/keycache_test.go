package repo

import (
	"testing"
	"time"
)

// TestKeyCacheNeverKeepsARaceLostToARevocation: a look-up that read the key
// before a change to it landed must not cache what it read; a fresh one
// does, until the TTL.
func TestKeyCacheNeverKeepsARaceLostToARevocation(t *testing.T) {
	var c keyCache
	t0 := time.Now()
	_, gen, ok := c.get("h", t0)
	if ok {
		t.Fatal("an empty cache answered")
	}
	c.invalidate() // a revocation lands while the look-up reads the store
	c.put("h", AgentKey{Name: "stale"}, gen, t0)
	if _, _, ok := c.get("h", t0); ok {
		t.Fatal("a look-up that raced a change to a key was cached")
	}
	_, gen, _ = c.get("h", t0)
	c.put("h", AgentKey{Name: "fresh"}, gen, t0)
	if k, _, ok := c.get("h", t0.Add(keyCacheTTL-time.Millisecond)); !ok || k.Name != "fresh" {
		t.Fatalf("fresh look-up not cached: %v %+v", ok, k)
	}
	if _, _, ok := c.get("h", t0.Add(keyCacheTTL)); ok {
		t.Fatal("a key was trusted past the cache's bound")
	}
	c.invalidate()
	if _, _, ok := c.get("h", t0); ok {
		t.Fatal("invalidate left a key cached")
	}
}
