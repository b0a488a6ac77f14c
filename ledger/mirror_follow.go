package ledger

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"outreach/audit"
	"outreach/ledger/index"
)

// The service's own index on a server (Options.ServerIndex): several
// processes write the store, so no process sees every write, and each one
// keeps its index current by following the change log in seq order.
//
// What the write path guarantees on a server (write.go): a change's seq is
// taken from the counter document before its entry is inserted, and the
// entry becomes applied (or aborted) only after its record carries it (or
// cannot). A transaction takes the seq, the entry and the record at once.
// So, for a counter value C read from the store:
//   - every change acknowledged before C was read has its entry at a seq at
//     or below C, settled (the ordered writer settles before it answers);
//   - an entry at or below C still pending is a write in flight: its
//     record may or may not carry it yet, and the index waits for it;
//   - a seq at or below C without an entry is a gap: a writer between
//     taking the seq and inserting its entry (a slow writer), or one that
//     stopped there (a crash, an insert the store refused, a duplicate seq
//     that took a new one). Its writer answered nobody yet, so no reader
//     can be owed it; but a slow writer may still fill it.
//
// The follower's position pos says every seq up to it is applied to the
// index or resolved. It moves over an entry only once the entry is
// settled, and over a gap only once the gap is older than gapBound. A gap
// passed over is still read again (recheck) for recheckFor, by every read
// while any is: an entry that turns up there after all is applied once
// settled, and while it is pending the index is not current. recheckFor
// (10 min) is far above the longest an insert can be in flight: the store
// client bounds every operation, retries included, by 30 s and sends the
// server the time left. So a write acknowledged before a read began is
// found by that read, at its seq or at a gap read again. A read asks the counter
// (one read by _id) and answers from the index only once pos reaches it;
// it waits for that at most Options.ServerIndexWait, and otherwise reads
// the store, as it would without the index. So the index never answers
// for a state older than the one the store had when the read began.
//
// Records are put from the entries' after-images where they tell the whole
// record (recordOf), or read again by _id; a plan's record locks
// (locked_by, written without an entry) are not held, on either side of
// the agreement check. The instance's own writes reach its index the same
// way: its next read finds the counter past them and follows.

// Bounds of the follower (variables for tests).
var (
	// gapBound: a seq without an entry for this long is taken as
	// abandoned (see above).
	gapBound = 10 * time.Second
	// recheckFor: how long a gap passed over is read again.
	recheckFor = 10 * time.Minute
	// followPoll: how often an idle instance follows the log.
	followPoll = 500 * time.Millisecond
	// followBatch bounds the entries read in one round.
	followBatch int64 = 1000
	// behindFor: an index behind the store's counter for this long says so
	// in the status (Health.IndexBehind).
	behindFor = 2 * time.Second
)

// follower is the state of the index's tail on a server.
type follower struct {
	// mu: one round at a time.
	mu sync.Mutex
	// pos: every seq up to it is applied or resolved (-1: not built).
	pos atomic.Int64
	// counter: the store's counter last read; behindSince (unix ns, 0:
	// current) when pos was first seen below it.
	counter     atomic.Int64
	behindSince atomic.Int64
	// Under mu: gaps above pos (seq -> first seen), gaps passed over
	// (seq -> read again until), and late entries found pending there.
	gaps    map[int64]time.Time
	recheck map[int64]time.Time
	late    map[int64]bool
	// wait bounds a read's wait for the index (Options.ServerIndexWait).
	wait time.Duration
	// indexReads counts the reads the index was current for; storeReads
	// those that found it behind and read the store (metrics).
	indexReads, storeReads atomic.Int64
}

func newFollower(wait time.Duration) *follower {
	f := &follower{gaps: map[int64]time.Time{}, recheck: map[int64]time.Time{}, late: map[int64]bool{}, wait: wait}
	f.pos.Store(-1)
	return f
}

// startFollow builds the index from the store in the background and then
// follows the change log (Options.ServerIndex).
func (s *Engine) startFollow(check bool, wait time.Duration) {
	stop, cancel := context.WithCancel(context.Background())
	s.stopMirror = cancel
	s.mirror = &mirror{check: check, ready: make(chan struct{}), stop: stop, follow: newFollower(wait)}
	s.mirror.stale.Store(true)
	go s.followLoop()
}

// followLoop builds the index, then follows the log every followPoll.
func (s *Engine) followLoop() {
	mi := s.mirror
	for attempt := 0; ; attempt++ {
		started := time.Now()
		n, err := s.buildFollow(mi.stop)
		if err == nil {
			close(mi.ready)
			s.log.Info().Dur("took", time.Since(started)).Int("records", n).Bool("check", mi.check).
				Int64("position", mi.follow.pos.Load()).Msg("the service's indexes are built; following the change log")
			break
		}
		if mi.stop.Err() != nil {
			return
		}
		s.log.Warn().Err(err).Msg("building the service's indexes; queries read the store meanwhile")
		select {
		case <-time.After(time.Duration(min(attempt+1, 30)) * time.Second):
		case <-mi.stop.Done():
			return
		}
	}
	t := time.NewTicker(followPoll)
	defer t.Stop()
	for {
		select {
		case <-mi.stop.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(mi.stop, time.Minute)
		if c, err := s.changeCounter(ctx); err == nil {
			if err := s.followTo(ctx, c); err != nil && mi.stop.Err() == nil {
				s.log.Debug().Err(err).Msg("following the change log")
			}
		}
		cancel()
	}
}

// buildFollow reads the index from the store and sets the position it is
// valid from: below the counter read first and below every entry pending
// then (its record may land after its collection was read), so that the
// tail applies again every change the read may have missed. The recent
// gaps below it are read again (recheck) in case a slow writer fills one.
func (s *Engine) buildFollow(ctx context.Context) (int, error) {
	f := s.mirror.follow
	c0, err := s.changeCounter(ctx)
	if err != nil {
		return 0, err
	}
	pos := c0
	var pend struct {
		Seq int64 `bson:"seq"`
	}
	err = s.coll(collChangeLog).FindOne(ctx, bson.M{"state": audit.StatePending},
		options.FindOne().SetSort(bson.D{{Key: "seq", Value: 1}}).SetProjection(bson.M{"seq": 1})).Decode(&pend)
	switch {
	case err == nil:
		pos = min(pos, pend.Seq-1)
	case !errors.Is(err, mongo.ErrNoDocuments):
		return 0, err
	}
	recent, newest, err := s.seqsIn(ctx, max(0, pos-followBatch), pos)
	if err != nil {
		return 0, err
	}
	colls, err := s.readMirror(ctx)
	if err != nil {
		return 0, err
	}
	for _, c := range colls {
		for _, raw := range lockedRecords(c) {
			c.Put(raw)
		}
	}
	f.mu.Lock()
	clear(f.gaps)
	clear(f.recheck)
	clear(f.late)
	if until := newest.Add(recheckFor); time.Now().Before(until) {
		// Gaps among recent entries may still be filled by a slow writer.
		for seq := max(1, pos-followBatch+1); seq <= pos; seq++ {
			if !recent[seq] {
				f.recheck[seq] = until
			}
		}
	}
	// The records and the position change together: no round applies
	// between them (a rebuild after a restore runs beside the loop).
	mi := s.mirror
	mi.mu.Lock()
	mi.colls = colls
	mi.mu.Unlock()
	f.pos.Store(pos)
	f.mu.Unlock()
	mi.stale.Store(false)
	n := 0
	for _, c := range colls {
		n += c.Len()
	}
	return n, nil
}

// lockedRecords are c's records holding a plan's lock, without it.
func lockedRecords(c *index.Coll) []bson.Raw {
	var out []bson.Raw
	c.Each(func(_ string, d bson.Raw) {
		if _, err := d.LookupErr(fieldLockedBy); err == nil {
			out = append(out, withoutLock(d))
		}
	})
	return out
}

// withoutLock is d without a plan's lock (see above).
func withoutLock(d bson.Raw) bson.Raw {
	if _, err := d.LookupErr(fieldLockedBy); err != nil {
		return d
	}
	elems, err := d.Elements()
	if err != nil {
		return d
	}
	idx, doc := bsoncore.AppendDocumentStart(nil)
	for _, e := range elems {
		if e.Key() != fieldLockedBy {
			doc = append(doc, e...)
		}
	}
	doc, err = bsoncore.AppendDocumentEnd(doc, idx)
	if err != nil {
		return d
	}
	return bson.Raw(doc)
}

// seqsIn are the seqs of the entries in (from, to], and when the newest of
// them was written.
func (s *Engine) seqsIn(ctx context.Context, from, to int64) (map[int64]bool, time.Time, error) {
	out := map[int64]bool{}
	var newest time.Time
	if to <= from {
		return out, newest, nil
	}
	cur, err := s.coll(collChangeLog).Find(ctx, bson.M{"seq": bson.M{"$gt": from, "$lte": to}}, options.Find().SetProjection(bson.M{"seq": 1, "at": 1, "_id": 0}))
	if err != nil {
		return nil, newest, err
	}
	var docs []struct {
		Seq int64     `bson:"seq"`
		At  time.Time `bson:"at"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, newest, err
	}
	for _, d := range docs {
		out[d.Seq] = true
		if d.At.After(newest) {
			newest = d.At
		}
	}
	return out, newest, nil
}

// followCurrent reports whether the index may answer a read beginning now:
// it reads the store's counter and waits, at most the follower's bound,
// until the index has followed the log up to it.
func (s *Engine) followCurrent(ctx context.Context) bool {
	return s.followCurrentWithin(ctx, s.mirror.follow.wait)
}

func (s *Engine) followCurrentWithin(ctx context.Context, wait time.Duration) bool {
	mi := s.mirror
	f := mi.follow
	if mi.stale.Load() {
		return false
	}
	c, err := s.readCounter(ctx)
	if err != nil {
		return false
	}
	deadline := time.Now().Add(wait)
	for {
		if f.pos.Load() >= c && f.quiet() {
			f.indexReads.Add(1)
			return true
		}
		// followTo reads the gaps passed over again after this read began:
		// a write acknowledged before it is found there.
		wctx, cancel := context.WithDeadline(ctx, deadline)
		err := s.followTo(wctx, c)
		cancel()
		if err == nil && f.pos.Load() >= c && f.noLate() {
			f.indexReads.Add(1)
			return true
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			f.storeReads.Add(1)
			return false
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			f.storeReads.Add(1)
			return false
		}
	}
}

// quiet: no gap passed over is still read again, and no late entry is
// pending.
func (f *follower) quiet() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.recheck) == 0 && len(f.late) == 0
}

// noLate: no late entry is pending.
func (f *follower) noLate() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.late) == 0
}

// followTo runs one round of the tail towards counter c: the gaps passed
// over are read again, then the entries above pos are applied in seq order
// until one is pending or a gap is too young to pass.
func (s *Engine) followTo(ctx context.Context, c int64) error {
	mi := s.mirror
	f := mi.follow
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pos.Load() < 0 {
		return errNotBuilt
	}
	if c > f.counter.Load() {
		f.counter.Store(c)
	}
	defer f.noteBehind()
	if err := s.followRecheck(ctx); err != nil {
		return err
	}
	for f.pos.Load() < c {
		pos := f.pos.Load()
		cur, err := s.coll(collChangeLog).Find(ctx, bson.M{"seq": bson.M{"$gt": pos, "$lte": c}},
			options.Find().SetSort(bson.D{{Key: "seq", Value: 1}}).SetLimit(followBatch))
		if err != nil {
			return err
		}
		var entries []bson.Raw
		for cur.Next(ctx) {
			entries = append(entries, slices.Clone(cur.Current))
		}
		if err := cur.Err(); err != nil {
			cur.Close(ctx)
			return err
		}
		cur.Close(ctx)
		var apply []bson.Raw
		next := pos
		now := time.Now()
	walk:
		for seq, i := pos+1, 0; seq <= c; seq++ {
			var e bson.Raw
			if i < len(entries) {
				if got, _ := AsInt(rawValue(entries[i], "seq")); got == seq {
					e = entries[i]
					i++
				}
			}
			switch {
			case e == nil && i >= len(entries) && int64(len(entries)) == followBatch:
				break walk // the batch ended: the next round reads on
			case e == nil:
				first, seen := f.gaps[seq]
				if !seen {
					f.gaps[seq] = now
					break walk
				}
				if now.Sub(first) < gapBound {
					break walk
				}
				delete(f.gaps, seq)
				f.recheck[seq] = now.Add(recheckFor)
				s.log.Warn().Int64("seq", seq).Msg("a change seq was taken but no entry was written: passed over as abandoned (its writer stopped)")
			default:
				if st, _ := e.Lookup("state").StringValueOK(); st == audit.StatePending {
					break walk
				}
				delete(f.gaps, seq)
				apply = append(apply, e)
			}
			next = seq
		}
		if next == pos {
			return nil
		}
		if err := s.followApply(ctx, apply, false); err != nil {
			return err
		}
		f.pos.Store(next)
	}
	return nil
}

// noteBehind records since when the index is behind the counter (mu held).
func (f *follower) noteBehind() {
	if f.pos.Load() >= f.counter.Load() && len(f.late) == 0 {
		f.behindSince.Store(0)
		return
	}
	if f.behindSince.Load() == 0 {
		f.behindSince.Store(time.Now().UnixNano())
	}
}

// followRecheck reads the gaps passed over again (mu held): an entry found
// there after all is applied once settled, and holds the index back while
// it is pending.
func (s *Engine) followRecheck(ctx context.Context) error {
	f := s.mirror.follow
	now := time.Now()
	maps.DeleteFunc(f.recheck, func(_ int64, until time.Time) bool { return now.After(until) })
	if len(f.recheck) == 0 {
		return nil
	}
	seqs := slices.Collect(maps.Keys(f.recheck))
	cur, err := s.coll(collChangeLog).Find(ctx, bson.M{"seq": bson.M{"$in": seqs}})
	if err != nil {
		return err
	}
	var found []bson.Raw
	for cur.Next(ctx) {
		found = append(found, slices.Clone(cur.Current))
	}
	if err := cur.Err(); err != nil {
		cur.Close(ctx)
		return err
	}
	cur.Close(ctx)
	var apply []bson.Raw
	for _, e := range found {
		seq, _ := AsInt(rawValue(e, "seq"))
		if st, _ := e.Lookup("state").StringValueOK(); st == audit.StatePending {
			if !f.late[seq] {
				s.log.Warn().Int64("seq", seq).Msg("a change seq passed over as abandoned was written after all: the index waits for it")
			}
			f.late[seq] = true
			continue
		}
		apply = append(apply, e)
	}
	if err := s.followApply(ctx, apply, true); err != nil {
		return err
	}
	for _, e := range apply {
		seq, _ := AsInt(rawValue(e, "seq"))
		delete(f.recheck, seq)
		delete(f.late, seq)
	}
	return nil
}

// followApply puts settled entries, and the records they name, into the
// index, in order. late: the entries are below pos, so their after-image
// may be older than what the index holds: every record is read again.
func (s *Engine) followApply(ctx context.Context, entries []bson.Raw, late bool) error {
	if len(entries) == 0 {
		return nil
	}
	type put struct {
		coll string
		raw  bson.Raw
	}
	puts := make([]put, 0, 2*len(entries))
	type ref struct {
		coll, id string
		at       int // index in puts to fill
	}
	var reread []ref
	for _, e := range entries {
		kept, err := s.schema.Index[collChangeLog].Held(e)
		if err != nil {
			return err
		}
		puts = append(puts, put{collChangeLog, kept})
		st, _ := e.Lookup("state").StringValueOK()
		coll, _ := e.Lookup("collection").StringValueOK()
		id, _ := e.Lookup("record_id").StringValueOK()
		spec, indexed := s.schema.Index[coll]
		if st != audit.StateApplied || !indexed || id == "" || coll == collChangeLog {
			continue
		}
		if doc, ok := s.recordOf(e); ok && !late {
			held, err := spec.Held(doc)
			if err != nil {
				return err
			}
			puts = append(puts, put{coll, held})
			continue
		}
		reread = append(reread, ref{coll, id, len(puts)})
		puts = append(puts, put{coll, nil})
	}
	for _, r := range reread {
		raws, err := s.readByID(ctx, r.coll, []string{r.id}, true)
		if err != nil {
			return err
		}
		if raws[0] == nil {
			continue // cannot happen for an applied entry: nothing is deleted
		}
		held, err := s.schema.Index[r.coll].Held(raws[0])
		if err != nil {
			return err
		}
		puts[r.at].raw = held
	}
	mi := s.mirror
	mi.mu.Lock()
	defer mi.mu.Unlock()
	for _, p := range puts {
		if p.raw == nil {
			continue
		}
		if mc := mi.colls[p.coll]; mc != nil {
			mc.Put(withoutLock(p.raw))
		}
	}
	return nil
}

// rawValue is d's field key, decoded (nil when absent).
func rawValue(d bson.Raw, key string) any {
	v, err := d.LookupErr(key)
	if err != nil {
		return nil
	}
	var out any
	if err := v.Unmarshal(&out); err != nil {
		return nil
	}
	return out
}

// followStatus reports the follower's state for Health.
func (s *Engine) followStatus(h *Health) {
	f := s.mirror.follow
	h.IndexFollowing = true
	h.IndexPosition = f.pos.Load()
	h.IndexCounter = f.counter.Load()
	h.IndexStoreReads = f.storeReads.Load()
	h.IndexReads = f.indexReads.Load()
	if since := f.behindSince.Load(); since != 0 && time.Since(time.Unix(0, since)) > behindFor {
		h.IndexBehind = true
	}
}

// followViolations compares the index of a server with the store: once the
// index has followed the log up to the counter read after the store was
// read, every record it holds must be the stored one, plan locks aside. A
// write landing between the two reads can make one differ for a moment, so
// a difference is only reported when a second comparison shows it too. An
// index that cannot reach the counter is not compared (it answers nothing
// then: reads go to the store).
func (s *Engine) followViolations(ctx context.Context) ([]Violation, error) {
	if s.mirror.stale.Load() {
		return nil, nil
	}
	ctx = context.WithValue(ctx, readPointKey{}, (*readPoint)(nil)) // the counter after the store's read
	var out []Violation
	for range 3 {
		fresh, err := s.readMirror(ctx)
		if err != nil {
			return nil, err
		}
		if !s.followCurrentWithin(ctx, 30*time.Second) {
			s.log.Warn().Msg("the service's index did not reach the store's counter: not compared")
			return nil, nil
		}
		s.mirror.follow.mu.Lock() // no round applies while comparing
		out, err = s.compareMirror(fresh, true)
		s.mirror.follow.mu.Unlock()
		if err != nil || len(out) == 0 {
			return out, err
		}
	}
	return out, nil
}

// A read point: the store's counter asked once for the reads of one call
// (a tool call) rather than once per read. Every read of the call begins
// after the call did, so the counter read at its first read bounds what
// each of them must see: every write acknowledged before the call began.
// It is not reused once a write of this process has ended since it was
// taken (whichever goroutine wrote), so a call's later reads see its own
// writes.
type readPoint struct {
	mu      sync.Mutex
	counter int64
	writes  uint64 // Engine.writesDone when counter was read
	set     bool
}

type readPointKey struct{}

// WithReadPoint marks ctx as one call's: the service's index on a server
// asks the store's counter once for its reads (see readPoint).
func WithReadPoint(ctx context.Context) context.Context {
	return context.WithValue(ctx, readPointKey{}, &readPoint{})
}

// readCounter is the counter a read beginning now must reach: the call's
// read point when it has one, else the store's counter.
func (s *Engine) readCounter(ctx context.Context) (int64, error) {
	rp, _ := ctx.Value(readPointKey{}).(*readPoint)
	if rp == nil {
		return s.changeCounter(ctx)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	writes := s.writesDone.Load()
	if rp.set && rp.writes == writes {
		return rp.counter, nil
	}
	c, err := s.changeCounter(ctx)
	if err == nil {
		rp.counter, rp.writes, rp.set = c, writes, true
	}
	return c, err
}
