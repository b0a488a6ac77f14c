package reportrender

import (
	"sync"
	"time"
)

// Renderings handed out by download URL are kept in memory until their URL
// expires, so the download is the very document whose figures the tool
// answered, and is not rendered twice. The cache is bounded (CacheBytes,
// the oldest dropped first); a URL whose rendering is not kept (dropped,
// or made by another instance, or before a restart) is rendered again
// when fetched, with the figures of that moment.

// CacheBytes bounds the renderings kept.
const CacheBytes = 64 << 20

type kept struct {
	key string
	r   *Rendered
	exp time.Time
}

var cache struct {
	sync.Mutex
	list  []kept
	bytes int
}

// Keep keeps r for key until exp.
func Keep(key string, r *Rendered, exp time.Time) {
	if len(r.Bytes) > CacheBytes/4 {
		return
	}
	cache.Lock()
	defer cache.Unlock()
	now := time.Now()
	live := cache.list[:0]
	cache.bytes = 0
	for _, k := range cache.list {
		if now.Before(k.exp) {
			live = append(live, k)
			cache.bytes += len(k.r.Bytes)
		}
	}
	cache.list = live
	for cache.bytes+len(r.Bytes) > CacheBytes && len(cache.list) > 0 {
		cache.bytes -= len(cache.list[0].r.Bytes)
		cache.list = cache.list[1:]
	}
	cache.list = append(cache.list, kept{key, r, exp})
	cache.bytes += len(r.Bytes)
}

// Kept returns the rendering kept for key, if it is and has not expired.
func Kept(key string) (*Rendered, bool) {
	cache.Lock()
	defer cache.Unlock()
	for _, k := range cache.list {
		if k.key == key && time.Now().Before(k.exp) {
			return k.r, true
		}
	}
	return nil, false
}
