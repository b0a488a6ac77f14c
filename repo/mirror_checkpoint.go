package repo

import (
	"context"
	"errors"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

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

// changeCounter is the change counter's value (0 before the first change).
func (s *Store) changeCounter(ctx context.Context) (int64, error) {
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
func (s *Store) loadCheckpoint(ctx context.Context) (map[string]*index.Coll, bool) {
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
// written, through a temporary file renamed over the old one. A failure
// removes the old file and is logged; the next start builds from the store.
func (s *Store) saveCheckpoint(ctx context.Context) {
	mi := s.mirror
	if s.checkpoint == "" || mi == nil {
		return
	}
	err := func() error {
		mi.mu.RLock()
		defer mi.mu.RUnlock()
		if mi.stale.Load() || mi.building || mi.colls == nil {
			return errors.New("the indexes are not built")
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
	if err != nil {
		os.Remove(s.checkpoint)
		s.log.Warn().Err(err).Msg("the index checkpoint was not written; the next start builds the indexes from the store")
	}
}

// readMirrorFirst is the first build's read: the checkpoint when it is
// valid, else the store.
func (s *Store) readMirrorFirst(ctx context.Context) (map[string]*index.Coll, error) {
	select {
	case <-s.mirror.ready:
	default:
		if colls, ok := s.loadCheckpoint(ctx); ok {
			s.mirror.fromCheckpoint.Store(true)
			return colls, nil
		}
	}
	return s.readMirror(ctx)
}
