package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger/index"
)

// A start after a crash: the newest checkpoint, then what changed after it.
//
// The checkpoint is written while the store runs, not only at a clean stop
// (checkpointLoop): a start then loads it and applies the change entries
// whose seq is above its counter, with the records they name, each read by
// _id (catchUp). The embedded store cannot find those entries itself
// without decoding every one (FerretDB 1.24 pushes down only an equality on
// _id, and change entry ids are random), so it lists their ids from an
// index of SQLite's own on seq (Lookups). After recovery every change to
// an indexed record since the checkpoint is named by an entry above its
// counter: a write reserves its seqs, then writes its records, then its
// entries, all under writeMu; a crash between the two leaves an intent or
// a plan, whose entries recovery inserts (with those seqs, or new ones).

// Lookups are reads the store answers from indexes of its own, outside its
// query language (the embedded store: SQLite's indexes on FerretDB's
// tables), returning ids only.
type Lookups interface {
	// IDsAbove: the ids of collection's documents whose integer field is
	// above the value, in the field's order.
	IDsAbove(ctx context.Context, database, collection, field string, above int64) ([]string, error)
	// IDsEqual: the ids of collection's documents whose field holds the
	// string value.
	IDsEqual(ctx context.Context, database, collection, field, value string) ([]string, error)
}

// Checkpoints while running: one is written once checkpointChanges seq
// numbers were taken since the last, or checkpointAge after the first
// change since it, checked every checkpointPoll. A start after a crash
// follows at most about that many change entries.
var (
	checkpointChanges int64 = 1000
	checkpointAge           = time.Minute
	checkpointPoll          = 5 * time.Second
)

// maxTail bounds the entries a start follows from a checkpoint: past it
// (a bulk import written around the service, a checkpoint long out of
// date) reading each entry and record by _id costs more than one read of
// every collection, and the indexes are built from the store.
var maxTail = func(checkpointed int) int { return max(5000, checkpointed/4) }

// readers is how many reads by _id a catch-up runs at once.
const readers = 4

// catchUp brings a checkpoint's indexes up to the store: every change entry
// above its counter, and every entry it held pending (whose state may have
// moved since), is read again by _id, and so is every record they name.
// It returns how many entries it applied.
func (s *Engine) catchUp(ctx context.Context, pre *loadedCheckpoint) (int, error) {
	if s.lookups == nil {
		return 0, errors.New("the store cannot list the changes after a checkpoint")
	}
	ids, err := s.lookups.IDsAbove(ctx, s.db.Name(), collChangeLog, "seq", pre.pos)
	if err != nil {
		return 0, err
	}
	log := pre.colls[collChangeLog]
	if log == nil {
		return 0, errors.New("the checkpoint holds no change log")
	}
	held := 0
	for _, c := range pre.colls {
		held += c.Len()
	}
	if len(ids) > maxTail(held) {
		return 0, fmt.Errorf("%d changes after the checkpoint (%d records): too many to follow", len(ids), held)
	}
	pending, _, ok := log.IDs(index.Query{Filter: bson.M{"state": audit.StatePending}})
	if !ok {
		return 0, errors.New("the checkpoint cannot name its pending changes")
	}
	seen := make(map[string]bool, len(ids)+len(pending))
	var want []string
	for _, id := range append(pending, ids...) {
		if !seen[id] {
			seen[id] = true
			want = append(want, id)
		}
	}
	// Whole: the after-image is the record's state.
	entries, err := s.readByID(ctx, collChangeLog, want, false)
	if err != nil {
		return 0, err
	}
	// Each record named, in the order first named (the order the live
	// indexes would have numbered a new one), with its last entry.
	type ref struct{ coll, id string }
	var recs []ref
	last := map[ref]bson.Raw{}
	for _, raw := range entries {
		if raw == nil {
			continue // a pending entry is never removed; nothing to apply
		}
		coll, _ := raw.Lookup("collection").StringValueOK()
		id, _ := raw.Lookup("record_id").StringValueOK()
		r := ref{coll, id}
		if _, indexed := pre.colls[coll]; indexed && id != "" {
			if _, ok := last[r]; !ok {
				recs = append(recs, r)
			}
			last[r] = raw
		}
	}
	for _, raw := range entries {
		if raw == nil {
			continue
		}
		kept, err := s.schema.Index[collChangeLog].Held(raw)
		if err != nil {
			return 0, err
		}
		log.Put(kept)
	}
	// A record whose last change is applied is its after-image, with the
	// fields the write path adds (recordOf); any other is read again.
	reread := map[string][]string{}
	for _, r := range recs {
		doc, ok := s.recordOf(last[r])
		if !ok {
			reread[r.coll] = append(reread[r.coll], r.id)
			continue
		}
		kept, err := s.schema.Index[r.coll].Held(doc)
		if err != nil {
			return 0, err
		}
		pre.colls[r.coll].Put(kept)
	}
	for coll, ids := range reread {
		raws, err := s.readByID(ctx, coll, ids, true)
		if err != nil {
			return 0, err
		}
		for _, raw := range raws {
			if raw == nil {
				continue // never written (an aborted create)
			}
			held, err := s.schema.Index[coll].Held(raw)
			if err != nil {
				return 0, err
			}
			pre.colls[coll].Put(held)
		}
	}
	return len(entries), nil
}

// recordOf is the record an applied change entry wrote: its after-image,
// with the record's id, version and last change as writeRecord stores
// them. ok is false where the entry does not tell the whole record: not
// applied, no after-image, or a collection with redacted fields (the
// entry holds "[redacted]" where the record holds the value).
func (s *Engine) recordOf(entry bson.Raw) (bson.Raw, bool) {
	var e struct {
		State        string   `bson:"state"`
		Collection   string   `bson:"collection"`
		RecordID     string   `bson:"record_id"`
		After        bson.Raw `bson:"after"`
		VersionAfter int64    `bson:"version_after"`
		ID           string   `bson:"_id"`
	}
	if err := bson.Unmarshal(entry, &e); err != nil || e.State != audit.StateApplied || len(e.After) == 0 ||
		len(s.schema.Redacted[e.Collection]) > 0 || e.VersionAfter < 1 {
		return nil, false
	}
	var doc bson.D
	if err := bson.Unmarshal(e.After, &doc); err != nil {
		return nil, false
	}
	out := make(bson.D, 0, len(doc)+3)
	for _, el := range doc {
		switch el.Key {
		case "_id", fieldVersion, fieldLastChange:
		case fieldLockedBy:
			return nil, false
		default:
			out = append(out, el)
		}
	}
	out = append(out, bson.E{Key: "_id", Value: e.RecordID}, bson.E{Key: fieldVersion, Value: e.VersionAfter}, bson.E{Key: fieldLastChange, Value: e.ID})
	raw, err := bson.Marshal(out)
	if err != nil {
		return nil, false
	}
	return raw, true
}

// readByID reads coll's records by _id, a few at a time, as the index
// keeps them (kept: the spec's large fields left out) or whole; a record
// not stored is nil.
func (s *Engine) readByID(ctx context.Context, coll string, ids []string, kept bool) ([]bson.Raw, error) {
	var proj bson.M
	if kept {
		proj = s.schema.Index[coll].ReadProjection() // what Held needs
	}
	out := make([]bson.Raw, len(ids))
	errs := make([]error, readers)
	var wg sync.WaitGroup
	for w := range readers {
		wg.Go(func() {
			for i := w; i < len(ids) && errs[w] == nil; i += readers {
				raw, err := s.coll(coll).FindOne(ctx, bson.M{"_id": ids[i]}, options.FindOne().SetProjection(proj)).Raw()
				switch {
				case errors.Is(err, mongo.ErrNoDocuments):
				case err != nil:
					errs[w] = fmt.Errorf("%s %s: %w", coll, ids[i], err)
				default:
					out[i] = raw
				}
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// checkpointer holds the state of the checkpoints written while running.
type checkpointer struct {
	// file serialises writing the file (the loop, a clean stop).
	file sync.Mutex
	stop context.CancelFunc
	done chan struct{}
	// followed: the change entries the first build applied over a
	// checkpoint; recovered: recovery at Open settled something.
	followed  atomic.Int64
	recovered bool
}

// startCheckpoints starts the loop that writes checkpoints while running,
// once the first build has ended (startMirror).
func (s *Engine) startCheckpoints() {
	if s.checkpoint == "" {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.ckpt.stop, s.ckpt.done = cancel, make(chan struct{})
	go s.checkpointLoop(ctx)
}

// stopCheckpoints ends the loop and waits for a checkpoint it is writing.
func (s *Engine) stopCheckpoints() {
	if s.ckpt.stop != nil {
		s.ckpt.stop()
		<-s.ckpt.done
		s.ckpt.stop = nil
	}
}

func (s *Engine) checkpointLoop(ctx context.Context) {
	defer close(s.ckpt.done)
	select {
	case <-s.mirror.ready:
	case <-ctx.Done():
		return
	}
	if s.lookups != nil {
		// The store's index on seq is made once, here rather than during
		// the first start after a crash (at 100,000 notes it reads the
		// whole change log once).
		if _, err := s.lookups.IDsAbove(ctx, s.db.Name(), collChangeLog, "seq", math.MaxInt64); err != nil && ctx.Err() == nil {
			s.log.Warn().Err(err).Msg("the store's index of change entries by seq")
		}
	}
	last, err := s.changeCounter(ctx)
	if err != nil {
		last = -1 // write one at the first chance
	}
	var since time.Time // when the counter was first seen past last
	t := time.NewTicker(checkpointPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		counter, err := s.changeCounter(ctx)
		if err != nil || counter == last {
			continue
		}
		if since.IsZero() {
			since = time.Now()
		}
		if counter-last < checkpointChanges && time.Since(since) < checkpointAge {
			continue
		}
		pos, err := s.writeCheckpoint(ctx)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, errNotBuilt) && !errors.Is(err, errRestoring) {
				s.log.Warn().Err(err).Msg("the index checkpoint was not written; the next start follows the change log from the last one")
			}
			continue
		}
		last, since = pos, time.Time{}
	}
}

// writeCheckpoint writes a checkpoint while the store runs: a snapshot
// taken under the write lock (writers wait for it only), written without
// it. It returns the counter it is valid at.
func (s *Engine) writeCheckpoint(ctx context.Context) (int64, error) {
	started := time.Now()
	s.writeMu.Lock()
	locked := time.Now()
	snap, pos, err := s.snapshot(ctx)
	s.writeMu.Unlock()
	paused := time.Since(locked) // what the writers waiting for the lock waited for it
	if err != nil {
		return 0, err
	}
	if err := s.writeCheckpointFile(snap, pos); err != nil {
		return 0, err
	}
	s.log.Debug().Dur("writes_paused", paused).Dur("took", time.Since(started)).Int64("counter", pos.Counter).Msg("index checkpoint written")
	return pos.Counter, nil
}

// snapshot takes the indexes and the counter they are valid at (writeMu
// held): only complete, current indexes, and no write of this process left
// half-done (its entries would come later with seqs below the counter).
// The seq numbers reserved and not handed out are dropped, so that every
// entry written after it has a seq above the counter.
func (s *Engine) snapshot(ctx context.Context) (index.Snapshot, index.Position, error) {
	mi := s.mirror
	if s.ownIntent != nil {
		return nil, index.Position{}, errors.New("a write is left half-done")
	}
	mi.mu.RLock()
	defer mi.mu.RUnlock()
	if mi.stale.Load() || mi.building || mi.colls == nil {
		return nil, index.Position{}, errNotBuilt
	}
	if s.restoring.Load() {
		// A restore writes records before the counter they belong to is
		// set, and verifies them after: its checkpoint is written once it
		// is complete (checkpointRestore).
		return nil, index.Position{}, errRestoring
	}
	s.seqs.drop()
	counter, err := s.changeCounter(ctx)
	if err != nil {
		return nil, index.Position{}, err
	}
	return index.Snap(mi.colls), index.Position{Database: s.db.Name(), Counter: counter}, nil
}

// errRestoring: a restore is under way, so the indexes describe no
// counter yet.
var errRestoring = errors.New("a restore is under way")

// checkpointRestore writes the checkpoint of a store just restored and
// verified: the restore's writes kept the indexes (RestoreDocs,
// ReplayChange, or a rebuild from the store when one failed), so the first
// start after it loads them instead of reading every collection again (at
// 100,000 notes a minute of answers from the store). When it cannot be
// written the next start builds the indexes from the store, as before, and
// says so in its status (Health.IndexBuilding).
func (s *Engine) checkpointRestore(ctx context.Context) {
	if s.checkpoint == "" || s.mirror == nil {
		return
	}
	pos, err := s.writeCheckpoint(ctx)
	if err != nil {
		s.log.Warn().Err(err).Msg("the restored store's index checkpoint was not written: the next start builds the indexes from the store")
		return
	}
	s.log.Info().Int64("counter", pos).Msg("the restored store's index checkpoint is written")
}

// writeCheckpointFile writes a snapshot through a temporary file renamed
// over the old one.
func (s *Engine) writeCheckpointFile(snap index.Snapshot, pos index.Position) error {
	s.ckpt.file.Lock()
	defer s.ckpt.file.Unlock()
	tmp := s.checkpoint + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = index.WriteCheckpoint(f, pos, s.schema.Index, snap)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.checkpoint)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// Abandon stops the engine as a killed process would leave it: no
// checkpoint written, this process's last write intent as it stands. For
// benchmarks and tests of the start after a crash; the caller disconnects
// the client.
func (s *Engine) Abandon() {
	s.stopCheckpoints()
	if s.stopMirror != nil {
		s.stopMirror()
	}
}
