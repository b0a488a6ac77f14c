package ledger

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The record cache: stored records, as the store returned them, for the
// reads by _id of the embedded store.
//
// A read by _id is the embedded store's one cheap read, but still a round
// trip through the wire protocol, FerretDB and SQLite, and a decoding of the
// stored JSON: a page of 50 records costs 50 of them where a raw find costs
// one. Where the service's index is live (this process the store's only
// writer, every record write through the one write path), the records of
// the indexed collections read by _id are kept here, in a bounded LRU, as
// the raw BSON the store returned. The cache is exact by the same rules as
// the index (mirror.go):
//   - Filled only from the store's own answer, and only when no write landed
//     between the look-up that missed and the fill (a generation moved by
//     every drop): a read that raced a write is never kept.
//   - Dropped by the write path, under its lock, for every record it lands
//     (mirrorPut) or whose outcome it re-reads (mirrorRefresh), before the
//     index hears of it.
//   - Cleared whole when a write's outcome is unknown (mirrorLost), and not
//     used while the index is stale (every read then goes to the store).
//   - In check mode (tests) every hit is read from the store too, and a
//     difference with no write in between fails the read.

// DefaultRecordCache is the record cache's size when none is given, in bytes.
const DefaultRecordCache = 32 << 20

// cacheItemOverhead approximates what an entry holds beside its bytes (the
// map entry, the list element, the key).
const cacheItemOverhead = 160

// errCacheMismatch is what a read returns, in check mode, when the record
// cache and the store answer it differently.
var errCacheMismatch = errors.New("the service's record cache answered differently from the store")

type cacheKey struct{ coll, id string }

type cacheItem struct {
	key cacheKey
	raw bson.Raw
}

// recordCache is an LRU of stored records bounded by bytes.
type recordCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	gen   uint64
	items map[cacheKey]*list.Element
	lru   list.List // front: most recently used
}

func newRecordCache(max int64) *recordCache {
	if max <= 0 {
		return nil
	}
	return &recordCache{max: max, items: map[cacheKey]*list.Element{}}
}

func itemSize(k cacheKey, raw bson.Raw) int64 {
	return int64(len(raw) + len(k.coll) + len(k.id) + cacheItemOverhead)
}

// get returns the cached record and the generation of the look-up (a miss
// fills with it).
func (c *recordCache) get(coll, id string) (bson.Raw, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[cacheKey{coll, id}]
	if !ok {
		return nil, c.gen, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cacheItem).raw, c.gen, true
}

func (c *recordCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// fill keeps raw, read from the store after a look-up at generation gen,
// unless a write landed since.
func (c *recordCache) fill(coll, id string, raw bson.Raw, gen uint64) {
	k := cacheKey{coll, id}
	n := itemSize(k, raw)
	if n > c.max/8 {
		return // one large record would push out many small ones
	}
	raw = slices.Clone(raw)
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if el, ok := c.items[k]; ok {
		it := el.Value.(*cacheItem)
		c.size += n - itemSize(k, it.raw)
		it.raw = raw
		c.lru.MoveToFront(el)
	} else {
		c.items[k] = c.lru.PushFront(&cacheItem{key: k, raw: raw})
		c.size += n
	}
	for c.size > c.max {
		el := c.lru.Back()
		it := el.Value.(*cacheItem)
		c.lru.Remove(el)
		delete(c.items, it.key)
		c.size -= itemSize(it.key, it.raw)
	}
}

// drop forgets record id of coll and moves the generation, so that no read
// begun before the write that called it fills the cache.
func (c *recordCache) drop(coll, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	k := cacheKey{coll, id}
	if el, ok := c.items[k]; ok {
		c.lru.Remove(el)
		delete(c.items, k)
		c.size -= itemSize(k, el.Value.(*cacheItem).raw)
	}
}

// clear forgets every record.
func (c *recordCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.items = map[cacheKey]*list.Element{}
	c.lru.Init()
	c.size = 0
}

// stats returns the entries and bytes held.
func (c *recordCache) stats() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items), c.size
}

// cacheOn reports whether the record cache serves reads of coll now: the
// index is live and keeps coll (so every write of coll reaches mirrorPut).
func (s *Engine) cacheOn(coll string) bool {
	if s.cache == nil || !s.written() || s.mirror.stale.Load() {
		return false
	}
	_, ok := s.schema.Index[coll]
	return ok
}

// cacheDrop is called by the write path (writeMu held) for a record it
// wrote or may have written.
func (s *Engine) cacheDrop(coll, id string) {
	if s.cache != nil {
		s.cache.drop(coll, id)
	}
}

// cacheDropDoc is cacheDrop for a document about to be recorded in the
// index; a document without a string _id clears the whole cache.
func (s *Engine) cacheDropDoc(coll string, doc any) {
	if s.cache == nil {
		return
	}
	var id string
	switch d := doc.(type) {
	case bson.Raw:
		id, _ = d.Lookup("_id").StringValueOK()
	default:
		raw, err := bson.Marshal(doc)
		if err == nil {
			id, _ = bson.Raw(raw).Lookup("_id").StringValueOK()
		}
	}
	if id == "" {
		s.cache.clear()
		return
	}
	s.cache.drop(coll, id)
}

// storeByID is the store's read of record id of coll.
func (s *Engine) storeByID(ctx context.Context, coll, id string) (bson.Raw, error) {
	var raw bson.Raw
	if err := s.coll(coll).FindOne(ctx, bson.M{"_id": id}).Decode(&raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// byID reads record id of coll, as stored: from the record cache where it
// holds it, from the store otherwise (mongo.ErrNoDocuments when there is
// none). The bytes returned are shared: never change them.
func (s *Engine) byID(ctx context.Context, coll, id string) (bson.Raw, error) {
	if !s.cacheOn(coll) {
		return s.storeByID(ctx, coll, id)
	}
	raw, gen, hit := s.cache.get(coll, id)
	if hit && !s.mirror.check {
		return raw, nil
	}
	stored, err := s.storeByID(ctx, coll, id)
	if err != nil {
		return nil, err
	}
	if !hit {
		s.cache.fill(coll, id, stored, gen)
		return stored, nil
	}
	if !bytes.Equal(raw, stored) && s.cache.generation() == gen {
		s.log.Error().Str("collection", coll).Str("id", id).Msg("record cache mismatch")
		return nil, fmt.Errorf("%w: %s/%s", errCacheMismatch, coll, id)
	}
	return stored, nil
}

// ByID decodes record id of coll into out, as the store's client decodes
// (documents inside documents as bson.M): from the record cache where it
// holds the record, from the store otherwise. A record that is not there is
// mongo.ErrNoDocuments.
func (s *Engine) ByID(ctx context.Context, coll, id string, out any) error {
	raw, err := s.byID(ctx, coll, id)
	if err != nil {
		return err
	}
	return decodeRaw(raw, out)
}

// RecordCacheStats returns the records and bytes the record cache holds
// (zero where there is none).
func (s *Engine) RecordCacheStats() (entries int, bytes int64) {
	if s.cache == nil {
		return 0, 0
	}
	return s.cache.stats()
}
