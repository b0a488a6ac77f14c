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
// IndexCheckpoint) while the store runs (every so many changes, in the
// background, see mirror_tail.go) and when it closes cleanly. A checkpoint
// names the change counter it was written at: every write reserves its seq
// numbers from the counter before it touches a record (see nextSeqs), and
// the numbers reserved but not handed out are dropped when a checkpoint is
// taken, so every change entry written after it has a higher seq. The next
// start loads the checkpoint instead of reading every record: as it is when
// the counter has not moved; else it applies the change entries after the
// counter and the records they name, re-read from the store (catchUp, when
// the store can list those entries cheaply: Options.Lookups). Anything
// else (no file, a damaged one, other specs, another database, a counter
// behind the checkpoint, too long a tail) builds from the store as before;
// Verify compares the indexes with the store either way.

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

// loadedCheckpoint is a checkpoint read from its file: the indexes, valid
// at the change counter pos.
type loadedCheckpoint struct {
	pos   int64
	colls map[string]*index.Coll
}

// loadCheckpoint reads the checkpoint when it is one of this database, not
// ahead of the store's counter; nil builds the indexes from the store.
func (s *Engine) loadCheckpoint(ctx context.Context) *loadedCheckpoint {
	path := s.checkpoint
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		s.log.Warn().Err(err).Msg("the index checkpoint cannot be read; building the indexes from the store")
		return nil
	}
	defer f.Close()
	started := time.Now()
	pos, colls, err := index.ReadCheckpoint(f, s.schema.Index)
	if err != nil {
		s.log.Warn().Err(err).Msg("the index checkpoint is not used; building the indexes from the store")
		return nil
	}
	counter, err := s.changeCounter(ctx)
	if err != nil {
		s.log.Warn().Err(err).Msg("reading the change counter; building the indexes from the store")
		return nil
	}
	if pos.Database != s.db.Name() || pos.Counter > counter || (pos.Counter != counter && s.lookups == nil) {
		s.log.Info().Int64("checkpoint_counter", pos.Counter).Int64("counter", counter).Str("checkpoint_database", pos.Database).
			Msg("the index checkpoint does not describe the store; building the indexes from the store")
		return nil
	}
	s.log.Info().Dur("took", time.Since(started)).Int64("checkpoint_counter", pos.Counter).Int64("counter", counter).
		Msg("the service's indexes are loaded from their checkpoint")
	return &loadedCheckpoint{pos: pos.Counter, colls: colls}
}

// saveCheckpoint writes the indexes to the checkpoint file at a clean stop
// (writeMu held, the last write intent settled). When the indexes are not
// built yet (a short command's store) or the write fails, the old file
// stays: its counter says what it misses.
func (s *Engine) saveCheckpoint(ctx context.Context) {
	if s.checkpoint == "" || s.mirror == nil {
		return
	}
	snap, pos, err := s.snapshot(ctx)
	if err == nil {
		err = s.writeCheckpointFile(snap, pos)
	}
	switch {
	case errors.Is(err, errNotBuilt):
		s.log.Info().Msg("the index checkpoint was not written: the indexes were not built yet")
	case errors.Is(err, errRestoring):
		s.log.Info().Msg("the index checkpoint was not written: the restore did not complete")
	case err != nil:
		s.log.Warn().Err(err).Msg("the index checkpoint was not written; the next start follows the change log from the last one, or builds the indexes from the store")
	}
}

// readMirrorFirst is the first build's read: the checkpoint (read before
// recovery, preload) when it is current, or brought up to date from the
// change entries after it; else the store.
func (s *Engine) readMirrorFirst(ctx context.Context) (map[string]*index.Coll, error) {
	select {
	case <-s.mirror.ready:
	default:
		pre := s.preloaded.Swap(nil)
		if pre == nil {
			pre = s.loadCheckpoint(ctx)
		}
		if pre != nil {
			counter, err := s.changeCounter(ctx)
			switch {
			case err != nil:
			case counter == pre.pos && !s.ckpt.recovered:
				s.mirror.fromCheckpoint.Store(true)
				return pre.colls, nil
			default:
				started := time.Now()
				n, err := s.catchUp(ctx, pre)
				if err == nil {
					s.ckpt.followed.Store(int64(n))
					s.mirror.fromCheckpoint.Store(true)
					s.log.Info().Dur("took", time.Since(started)).Int("changes", n).Int64("checkpoint_counter", pre.pos).
						Msg("the service's indexes are the checkpoint and the changes written after it")
					return pre.colls, nil
				}
				s.log.Info().Err(err).Msg("the index checkpoint is not followed by the change log; building the indexes from the store")
			}
		}
	}
	return s.readMirror(ctx)
}

// preloadCheckpoint reads the checkpoint before recovery (Open), so that
// recovery asks it, not a scan of the whole change log, for the entries
// left pending (pendingEntries).
func (s *Engine) preloadCheckpoint(ctx context.Context) {
	if pre := s.loadCheckpoint(ctx); pre != nil {
		s.preloaded.Store(pre)
	}
}

// pendingEntries are the change entries left pending, for recovery. With a
// checkpoint current for the store (read before recovery wrote anything,
// its counter unmoved) and holding no pending entry, there are none: every
// entry written since the checkpoint moved the counter. Otherwise the
// store's own index of entries by state names them (Options.Lookups) and
// each is read by _id; without it the change log is read, as it always was
// (on the embedded store a scan).
func (s *Engine) pendingEntries(ctx context.Context) ([]audit.Entry, error) {
	if pre := s.preloaded.Load(); pre != nil {
		if counter, err := s.changeCounter(ctx); err == nil && counter == pre.pos {
			if log := pre.colls[collChangeLog]; log != nil {
				if _, total, ok := log.IDs(index.Query{Filter: bson.M{"state": audit.StatePending}, Limit: 1}); ok && total == 0 {
					return nil, nil
				}
			}
		}
	}
	if s.lookups != nil {
		ids, err := s.lookups.IDsEqual(ctx, s.db.Name(), collChangeLog, "state", audit.StatePending)
		if err == nil {
			var pending []audit.Entry
			for _, id := range ids {
				var e audit.Entry
				err := s.coll(collChangeLog).FindOne(ctx, bson.M{"_id": id, "state": audit.StatePending}).Decode(&e)
				if errors.Is(err, mongo.ErrNoDocuments) {
					continue // settled since
				}
				if err != nil {
					return nil, err
				}
				pending = append(pending, e)
			}
			return pending, nil
		}
		s.log.Warn().Err(err).Msg("the store's index of pending changes cannot be read; reading the change log")
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
