package ledger

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
)

// Reading the change log in seq order without holding it. The embedded
// store (FerretDB 1.24) answers a find sorted by seq by decoding every
// matching entry, with its before and after, and sorting them in memory:
// at 100,000 notes a backup's copy of the log held 2 GB that way (and the
// document engine sorts every match too). So the log is read unsorted, a
// cursor batch of logBatch entries at a time, each entry written to a
// spill file as it comes, its seq and place kept (24 bytes an entry); the
// places are then sorted by seq and the entries read back from the file in
// that order. A short span (a shipped segment: up to byIDMost entries) is
// read by _id instead where the store lists the ids in seq order from an
// index of its own (Lookups: SQLite's index on seq), without reading the
// rest of the log.

// logBatch is how many change entries an in-order read asks of the store
// at once (a cursor batch, or reads by _id).
var logBatch = 512

// byIDMost is the longest span read by _id (a round trip an entry, four at
// once): above it one pass over the log is cheaper.
var byIDMost = 5000

// logHeld, when set (tests), is told how many change entries a read in
// seq order made the store hand over at once (a cursor batch, or a batch
// read by _id).
var logHeld func(n int)

// ChangesInOrder calls fn with every change entry whose seq is above after
// and at most upto, in increasing seq order (entries of one seq in the
// order the store returns them), holding at most logBatch of them in
// memory at once. raw is valid only during the call. An error of fn stops
// the read and is returned.
func (s *Engine) ChangesInOrder(ctx context.Context, after, upto int64, fn func(raw bson.Raw) error) error {
	if s.lookups != nil {
		ids, err := s.lookups.IDsAbove(ctx, s.db.Name(), collChangeLog, "seq", after)
		switch {
		case err == nil && len(ids) <= byIDMost:
			return s.changesByID(ctx, ids, upto, fn)
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			s.log.Warn().Err(err).Msg("the change log's look-up failed: reading the log once")
		}
	}
	return s.changesSpilled(ctx, after, upto, fn)
}

// spilled is where an entry read by changesSpilled lies in its file.
type spilled struct {
	seq, off int64
	n        int
}

// changesSpilled reads the entries of the span unsorted through a spill
// file, then hands them over in seq order.
func (s *Engine) changesSpilled(ctx context.Context, after, upto int64, fn func(raw bson.Raw) error) error {
	f, err := os.CreateTemp("", "outreach-changes-*.bson")
	if err != nil {
		return fmt.Errorf("the change log's spill file: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	filter := bson.M{"seq": bson.M{"$gt": after, "$lte": upto}}
	if after == math.MinInt64 {
		filter = bson.M{"seq": bson.M{"$lte": upto}}
	}
	cur, err := s.coll(collChangeLog).Find(ctx, filter, options.Find().SetBatchSize(int32(logBatch)))
	if err != nil {
		return err
	}
	defer cur.Close(ctx)
	w := bufio.NewWriterSize(f, 1<<20)
	var at []spilled
	var off int64
	left := 0 // of the cursor's batch
	for cur.Next(ctx) {
		if left == 0 && logHeld != nil {
			logHeld(cur.RemainingBatchLength() + 1) // a new batch
		}
		left = cur.RemainingBatchLength()
		seq, ok := cur.Current.Lookup("seq").AsInt64OK()
		if !ok {
			return fmt.Errorf("change entry %s: no integer seq", cur.Current.Lookup("_id"))
		}
		if _, err := w.Write(cur.Current); err != nil {
			return fmt.Errorf("the change log's spill file: %w", err)
		}
		at = append(at, spilled{seq, off, len(cur.Current)})
		off += int64(len(cur.Current))
	}
	if err := cur.Err(); err != nil {
		return err
	}
	cur.Close(ctx)
	if err := w.Flush(); err != nil {
		return fmt.Errorf("the change log's spill file: %w", err)
	}
	slices.SortStableFunc(at, func(a, b spilled) int { return cmp.Compare(a.seq, b.seq) })
	var buf []byte
	for _, e := range at {
		if cap(buf) < e.n {
			buf = make([]byte, e.n)
		}
		buf = buf[:e.n]
		if _, err := f.ReadAt(buf, e.off); err != nil {
			return fmt.Errorf("the change log's spill file: %w", err)
		}
		if err := fn(bson.Raw(buf)); err != nil {
			return err
		}
	}
	return nil
}

// changesByID reads the entries ids names (in seq order) by _id, logBatch
// at a time, up to the first whose seq is above upto.
func (s *Engine) changesByID(ctx context.Context, ids []string, upto int64, fn func(raw bson.Raw) error) error {
	last := int64(math.MinInt64)
	for start := 0; start < len(ids); start += logBatch {
		batch, err := s.readByID(ctx, collChangeLog, ids[start:min(start+logBatch, len(ids))], false)
		if err != nil {
			return err
		}
		if logHeld != nil {
			logHeld(len(batch))
		}
		for _, raw := range batch {
			if raw == nil {
				continue // listed, then gone: no entry is ever removed; nothing to read
			}
			seq, ok := raw.Lookup("seq").AsInt64OK()
			if !ok {
				return fmt.Errorf("change entry %s: no integer seq", raw.Lookup("_id"))
			}
			if seq > upto {
				return nil
			}
			if seq < last {
				return fmt.Errorf("change entry %s: seq %d listed after %d: the store's look-up is not in seq order", raw.Lookup("_id"), seq, last)
			}
			last = seq
			if err := fn(raw); err != nil {
				return err
			}
		}
	}
	return nil
}

// FirstPending is the lowest seq of a change entry still pending with a seq
// above after and at most upto (found false: none). Where the store has
// look-ups the pending entries are listed from SQLite (FerretDB would
// decode the whole log to find them) and read by _id.
func (s *Engine) FirstPending(ctx context.Context, after, upto int64) (seq int64, found bool, err error) {
	if s.lookups != nil {
		ids, err := s.lookups.IDsEqual(ctx, s.db.Name(), collChangeLog, "state", audit.StatePending)
		if err == nil {
			entries, err := s.readByID(ctx, collChangeLog, ids, false)
			if err != nil {
				return 0, false, err
			}
			for _, raw := range entries {
				if raw == nil {
					continue
				}
				st, _ := raw.Lookup("state").StringValueOK()
				n, ok := raw.Lookup("seq").AsInt64OK()
				if st == audit.StatePending && ok && n > after && n <= upto && (!found || n < seq) {
					seq, found = n, true
				}
			}
			return seq, found, nil
		}
		if ctx.Err() != nil {
			return 0, false, ctx.Err()
		}
		s.log.Warn().Err(err).Msg("the change log's look-up failed: reading it through the store")
	}
	var e struct {
		Seq int64 `bson:"seq"`
	}
	err = s.coll(collChangeLog).FindOne(ctx, bson.M{"seq": bson.M{"$gt": after, "$lte": upto}, "state": audit.StatePending},
		options.FindOne().SetSort(bson.D{{Key: "seq", Value: 1}}).SetProjection(bson.M{"seq": 1})).Decode(&e)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	return e.Seq, true, nil
}
