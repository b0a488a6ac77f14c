package ledger

import (
	"context"
	"errors"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"outreach/audit"
	"outreach/ledger/index"
)

// The service's indexes are written to a checkpoint file (Options.
// IndexCheckpoint) when the store closes cleanly, and the next start loads
// them from it instead of reading every record, provided nothing was
// written since: the change counter, which every write moves before it
// touches a record (its seq numbers are reserved first, see nextSeqs), must
// hold the value written with the checkpoint, read after recovery has
// settled what a crashed process left. Anything else (no file, a damaged
// one, other specs, another database, a counter that moved) builds from
// the store as before; Verify compares the indexes with the store either way.

// errNotBuilt: the indexes are not built, so there is nothing to write.
var errNotBuilt = errors.New("the indexes are not built")

// changeCounter is the change counter's value (0 before the first change).
func (s *Engine) changeCounter(ctx context.Context) (int64, error) {
	var c struct {
		Seq int64 `bson:"seq"`
	}
	err := s.coll(collCounters).FindOne(ctx, bson.M{"_id": collChangeLog}).Decode(&c)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	return c.Seq, err
}

// loadCheckpoint returns the indexes of the checkpoint when it is valid
// for the store as it stands; ok false builds them from the store.
func (s *Engine) loadCheckpoint(ctx context.Context) (map[string]*index.Coll, bool) {
	path := s.checkpoint
	if path == "" {
		return nil, false
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		s.log.Warn().Err(err).Msg("the index checkpoint cannot be read; building the indexes from the store")
		return nil, false
	}
	defer f.Close()
	started := time.Now()
	pos, colls, err := index.ReadCheckpoint(f, s.schema.Index)
	if err != nil {
		s.log.Warn().Err(err).Msg("the index checkpoint is not used; building the indexes from the store")
		return nil, false
	}
	counter, err := s.changeCounter(ctx)
	if err != nil {
		s.log.Warn().Err(err).Msg("reading the change counter; building the indexes from the store")
		return nil, false
	}
	if pos.Database != s.db.Name() || pos.Counter != counter {
		s.log.Info().Int64("checkpoint_counter", pos.Counter).Int64("counter", counter).Str("checkpoint_database", pos.Database).
			Msg("the index checkpoint is older than the store; building the indexes from the store")
		return nil, false
	}
	s.log.Info().Dur("took", time.Since(started)).Msg("the service's indexes are loaded from their checkpoint")
	return colls, true
}

// saveCheckpoint writes the indexes to the checkpoint file (writeMu held,
// the last write intent settled): only a complete, current index is
// written, through a temporary file renamed over the old one. When the
// indexes are not built yet (a short command's store) or the write fails,
// the old file stays: the counter check keeps it from being taken once
// anything was written since.
func (s *Engine) saveCheckpoint(ctx context.Context) {
	mi := s.mirror
	if s.checkpoint == "" || mi == nil {
		return
	}
	err := func() error {
		mi.mu.RLock()
		defer mi.mu.RUnlock()
		if mi.stale.Load() || mi.building || mi.colls == nil {
			return errNotBuilt
		}
		counter, err := s.changeCounter(ctx)
		if err != nil {
			return err
		}
		tmp := s.checkpoint + ".tmp"
		f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		err = index.WriteCheckpoint(f, index.Position{Database: s.db.Name(), Counter: counter}, s.schema.Index, mi.colls)
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
	}()
	switch {
	case errors.Is(err, errNotBuilt):
		s.log.Info().Msg("the index checkpoint was not written: the indexes were not built yet")
	case err != nil:
		s.log.Warn().Err(err).Msg("the index checkpoint was not written; the next start builds the indexes from the store unless the old one is still current")
	}
}

// readMirrorFirst is the first build's read: the checkpoint when it is
// valid, else the store. The checkpoint read before recovery (preload) is
// taken when the counter still holds its value.
func (s *Engine) readMirrorFirst(ctx context.Context) (map[string]*index.Coll, error) {
	select {
	case <-s.mirror.ready:
	default:
		if pre := s.preloaded.Swap(nil); pre != nil {
			if counter, err := s.changeCounter(ctx); err == nil && counter == pre.counter {
				s.mirror.fromCheckpoint.Store(true)
				return pre.colls, nil
			}
		} else if colls, ok := s.loadCheckpoint(ctx); ok {
			s.mirror.fromCheckpoint.Store(true)
			return colls, nil
		}
	}
	return s.readMirror(ctx)
}

// preloadedCheckpoint is a checkpoint read, and found current, before
// recovery ran.
type preloadedCheckpoint struct {
	counter int64
	colls   map[string]*index.Coll
}

// preloadCheckpoint reads the checkpoint before recovery (Open), so that
// recovery asks it, not a scan of the whole change log, for the entries
// left pending (pendingEntries).
func (s *Engine) preloadCheckpoint(ctx context.Context) {
	colls, ok := s.loadCheckpoint(ctx)
	if !ok {
		return
	}
	counter, err := s.changeCounter(ctx)
	if err != nil {
		return
	}
	s.preloaded.Store(&preloadedCheckpoint{counter: counter, colls: colls})
}

// pendingEntries are the change entries left pending, for recovery. With a
// checkpoint current for the store (read before recovery wrote anything,
// its counter unmoved) and holding no pending entry, there are none: every
// entry written since the checkpoint moved the counter. Otherwise the
// change log is read, as it always was (on the embedded store a scan).
func (s *Engine) pendingEntries(ctx context.Context) ([]audit.Entry, error) {
	if pre := s.preloaded.Load(); pre != nil {
		if counter, err := s.changeCounter(ctx); err == nil && counter == pre.counter {
			if log := pre.colls[collChangeLog]; log != nil {
				if _, total, ok := log.IDs(index.Query{Filter: bson.M{"state": audit.StatePending}, Limit: 1}); ok && total == 0 {
					return nil, nil
				}
			}
		}
	}
	var pending []audit.Entry
	cur, err := s.coll(collChangeLog).Find(ctx, bson.M{"state": audit.StatePending})
	if err != nil {
		return nil, err
	}
	if err := cur.All(ctx, &pending); err != nil {
		return nil, err
	}
	return pending, nil
}
