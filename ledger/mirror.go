package ledger

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/ledger/index"
)

// The mirror: indexes the service keeps for the embedded store.
//
// FerretDB 1.24 on SQLite answers every query but an _id equality by
// decoding every document of the collection, so a list grows with the
// team's history, not with its answer. The embedded store is owned by one
// process and every change to a record goes through the one write path, so
// that process can keep, per collection, every record's small fields (the
// large text left out) with posting lists on the fields lists select by.
// A query the mirror can answer exactly is evaluated here for the ids, the
// order and the total; the records themselves are then read by _id, the
// store's one cheap read, so what a caller gets is always what is stored.
// The store stays the single source of truth: the mirror is rebuilt from it
// at start, updated by the write path after each record and change entry
// lands (under the write lock), and dropped to a rebuild whenever a write's
// outcome is unknown. A query it cannot answer exactly (a field it left
// out, an operator it does not evaluate) goes to the store, as before.

// mirror holds the mirrored collections. Readers take mu for reading;
// updates come from the write path, under writeMu, and take it for writing.
type mirror struct {
	mu    sync.RWMutex
	colls map[string]*index.Coll
	// stale is set until the first build ends and whenever a write's
	// outcome was unknown: every query then goes to the store.
	stale atomic.Bool
	// check, set by tests, runs every query the mirror answers on the store
	// too and fails it when the answers differ.
	check bool
	// Under mu: a build is reading the store (building), and the records
	// written meanwhile wait in journal to be applied over what it read;
	// lost counts the writes whose outcome was unknown, so a build that
	// overlapped one is not trusted; rebuilding: a build loop runs.
	building   bool
	journal    []journaled
	lost       int
	rebuilding bool
	// ready is closed when the first build has ended; stop ends the build
	// loop (Close).
	ready chan struct{}
	stop  context.Context
	// fromCheckpoint: the first build loaded the checkpoint (mirror_checkpoint.go).
	fromCheckpoint atomic.Bool
	// follow: the index follows the change log (a server,
	// mirror_follow.go); nil: the write path keeps it (the embedded store).
	follow *follower
}

// written reports whether the write path keeps the mirror (the embedded
// store): on a server the mirror follows the change log instead.
func (s *Engine) written() bool {
	return s.mirror != nil && s.serialWrites && s.mirror.follow == nil
}

// mirrorLive reports whether the mirror may answer a read beginning now:
// built and not stale, and on a server, current with the store's counter
// (followCurrent, which may wait for it).
func (s *Engine) mirrorLive(ctx context.Context) bool {
	switch {
	case s.mirror == nil || s.mirror.stale.Load():
		return false
	case s.mirror.follow != nil:
		return s.followCurrent(ctx)
	default:
		return s.serialWrites
	}
}

type journaled struct {
	coll string
	raw  bson.Raw
}

// errMirrorMismatch is what a query returns, in check mode, when the mirror
// and the store answer it differently.
var errMirrorMismatch = errors.New("the service's index answered differently from the store")

// startMirror begins the first build in the background: until it ends,
// queries read the store. Writes go on meanwhile; the build applies them
// over what it read, so it needs no lock on writers (at 100k notes a
// build reads for tens of seconds on a loaded machine).
func (s *Engine) startMirror(check bool) {
	stop, cancel := context.WithCancel(context.Background())
	s.stopMirror = cancel
	s.mirror = &mirror{check: check, ready: make(chan struct{}), stop: stop}
	s.mirror.stale.Store(true)
	s.mirror.rebuilding = true
	go s.buildLoop()
	s.startCheckpoints()
}

// IndexesReady waits until the service's own indexes are built (at once
// where there are none).
func (s *Engine) IndexesReady(ctx context.Context) error {
	if s.mirror == nil {
		return nil
	}
	select {
	case <-s.mirror.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// buildLoop builds the mirror until a build overlaps no lost write.
func (s *Engine) buildLoop() {
	mi := s.mirror
	for attempt := 0; ; attempt++ {
		mi.mu.Lock()
		gen := mi.lost
		mi.building, mi.journal = true, nil
		mi.mu.Unlock()
		started := time.Now()
		colls, err := s.readMirrorFirst(mi.stop)
		mi.mu.Lock()
		if err == nil && mi.lost == gen {
			for _, j := range mi.journal {
				colls[j.coll].Put(j.raw)
			}
			mi.colls = colls
			mi.building, mi.journal, mi.rebuilding = false, nil, false
			mi.stale.Store(false)
			mi.mu.Unlock()
			select {
			case <-mi.ready:
			default:
				close(mi.ready)
			}
			n := 0
			for _, c := range colls {
				n += c.Len()
			}
			s.log.Info().Dur("took", time.Since(started)).Int("records", n).Bool("check", mi.check).Msg("the service's indexes are built")
			return
		}
		mi.building, mi.journal = false, nil
		mi.mu.Unlock()
		if mi.stop.Err() != nil {
			return // the store is closing
		}
		if err != nil {
			s.log.Warn().Err(err).Msg("building the service's indexes; queries read the store meanwhile")
			select {
			case <-time.After(time.Duration(min(attempt+1, 30)) * time.Second):
			case <-mi.stop.Done():
				return
			}
		}
	}
}

// buildMirror builds the mirror at once (tests, after forcing a state).
func (s *Engine) buildMirror(ctx context.Context) error {
	colls, err := s.readMirror(ctx)
	if err != nil {
		return err
	}
	s.mirror.mu.Lock()
	s.mirror.colls = colls
	s.mirror.mu.Unlock()
	s.mirror.stale.Store(false)
	return nil
}

// readMirror reads the mirrored collections from the store.
func (s *Engine) readMirror(ctx context.Context) (map[string]*index.Coll, error) {
	colls := map[string]*index.Coll{}
	for name, spec := range s.schema.Index {
		mc := index.NewColl(spec)
		cur, err := s.coll(name).Find(ctx, bson.M{}, options.Find().SetProjection(spec.ReadProjection()))
		if err != nil {
			return nil, fmt.Errorf("index %s: %w", name, err)
		}
		for cur.Next(ctx) {
			raw := cur.Current // Put copies in what it holds
			if spec.Words != nil {
				if raw, err = spec.Held(raw); err != nil {
					cur.Close(ctx)
					return nil, fmt.Errorf("index %s: %w", name, err)
				}
			}
			mc.Put(raw)
		}
		if err := cur.Err(); err != nil {
			cur.Close(ctx)
			return nil, fmt.Errorf("index %s: %w", name, err)
		}
		cur.Close(ctx)
		colls[name] = mc
		if err := s.at("index-read"); err != nil {
			return nil, err
		}
	}
	return colls, nil
}

// mirrorViolations compares the mirror with the store (writeMu held): a
// record missing from it, held there but not stored, or held in another
// state is a violation (verify reports it; tests fail on it).
func (s *Engine) mirrorViolations(ctx context.Context) ([]Violation, error) {
	if s.mirror != nil && s.mirror.follow != nil {
		return s.followViolations(ctx)
	}
	if !s.written() || s.mirror.stale.Load() {
		return nil, nil
	}
	fresh, err := s.readMirror(ctx)
	if err != nil {
		return nil, err
	}
	return s.compareMirror(fresh, false)
}

// compareMirror compares the mirror with fresh, read from the store;
// unlocked: a plan's locks are left out on both sides (mirror_follow.go).
func (s *Engine) compareMirror(fresh map[string]*index.Coll, unlocked bool) ([]Violation, error) {
	s.mirror.mu.RLock()
	defer s.mirror.mu.RUnlock()
	var out []Violation
	for name, want := range fresh {
		have := s.mirror.colls[name]
		var failed error
		want.Each(func(id string, d bson.Raw) {
			h, ok := have.Doc(id)
			if unlocked {
				d, h = withoutLock(d), withoutLock(h)
			}
			if failed != nil {
				return
			}
			if !ok {
				out = append(out, Violation{name, id, "stored, but missing from the service's index"})
				return
			}
			var a, b bson.M
			if err := decodeRaw(d, &a); err != nil {
				failed = err
				return
			}
			if err := decodeRaw(h, &b); err != nil {
				failed = err
				return
			}
			if !reflect.DeepEqual(a, b) {
				out = append(out, Violation{name, id, "the service's index holds another state than the stored record"})
			}
		})
		if failed != nil {
			return nil, failed
		}
		have.Each(func(id string, _ bson.Raw) {
			if _, ok := want.Doc(id); !ok {
				out = append(out, Violation{name, id, "in the service's index, but not stored"})
			}
		})
	}
	return out, nil
}

// mirrorPut records a document the write path has just written (writeMu
// held). doc is the whole stored document.
func (s *Engine) mirrorPut(coll string, doc any) {
	if !s.written() {
		return
	}
	if coll == collChangeLog {
		defer s.changeLanded(doc)
	}
	s.cacheDropDoc(coll, doc)
	spec, ok := s.schema.Index[coll]
	if !ok {
		return
	}
	raw, err := bson.Marshal(doc) // Put holds what the spec keeps of it
	if err == nil {
		raw, err = spec.Held(raw)
	}
	if err != nil {
		s.mirrorLost(coll, err)
		return
	}
	mi := s.mirror
	mi.mu.Lock()
	defer mi.mu.Unlock()
	switch {
	case mi.building:
		mi.journal = append(mi.journal, journaled{coll, raw})
	case mi.stale.Load():
		// Lost, and the next build has not begun reading: it will read this.
	default:
		if mc := mi.colls[coll]; mc != nil {
			mc.Put(raw)
		}
	}
}

// mirrorRefresh re-reads a record whose write failed (it may have landed
// without a reply) and records what is stored (writeMu held). A read that
// fails too leaves the mirror stale until it is rebuilt.
func (s *Engine) mirrorRefresh(ctx context.Context, coll, id string) {
	if !s.written() {
		return
	}
	if _, ok := s.schema.Index[coll]; !ok {
		return
	}
	s.cacheDrop(coll, id)
	var doc bson.Raw
	err := s.coll(coll).FindOne(context.WithoutCancel(ctx), bson.M{"_id": id}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return // nothing was written: there is nothing new to know
	}
	if err != nil {
		s.mirrorLost(coll, err)
		return
	}
	s.mirrorPut(coll, doc)
}

// mirrorLost makes every query go to the store until the mirror is rebuilt.
func (s *Engine) mirrorLost(coll string, err error) {
	defer s.bumpSessionGen()
	mi := s.mirror
	mi.mu.Lock()
	mi.lost++
	mi.stale.Store(true)
	if s.cache != nil {
		s.cache.clear()
	}
	start := !mi.rebuilding
	mi.rebuilding = true
	mi.mu.Unlock()
	if start {
		s.log.Warn().Err(err).Str("collection", coll).Msg("the service's indexes are stale after a failed write: queries read the store until they are rebuilt")
		go s.buildLoop()
	}
}

// ---------------------------------------------------------------------------
// Queries

// mirrorQuery is a find the mirror may answer.
type mirrorQuery struct {
	coll         string
	filter       bson.M
	among        []string // not nil: the only ids the answer may hold (index.Query.Among)
	sort         bson.D
	skip, limit  int64 // limit 0: no limit
	wantTotal    bool
	projection   bson.M
	onlyIDsProjd bool
}

// ids answers q from the index: the ids in order, after skip and limit, and
// the number of matches. ok is false when the index is stale or cannot
// answer q exactly.
func (mi *mirror) ids(q mirrorQuery) (ids []string, total int64, ok bool) {
	if mi == nil || mi.stale.Load() {
		return nil, 0, false
	}
	mi.mu.RLock()
	defer mi.mu.RUnlock()
	return mi.colls[q.coll].IDs(index.Query{Filter: q.filter, Sort: q.sort, Skip: q.skip, Limit: q.limit, Among: q.among})
}
