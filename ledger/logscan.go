package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
)

// Reading the change log in seq order without holding it. The embedded
// store (FerretDB 1.24) answers a find sorted by seq by decoding every
// matching entry, with its before and after, and sorting them in memory:
// at 100,000 notes a backup's copy of the log held 2 GB that way. Where
// the store has look-ups (Lookups), the ids come in seq order from
// SQLite's own index on seq and the entries are read by _id, logBatch at a
// time; elsewhere (a server, whose index on seq answers the sort; an
// embedded store in memory) the sorted find is used.

// logBatch is how many change entries an in-order read holds at once.
var logBatch = 512

// logHeld, when set (tests), is told how many change entries a read in
// seq order made the store hold at once: a batch, or for a sorted find on
// the embedded store every entry it matched.
var logHeld func(n int)

// ChangesInOrder calls fn with every change entry whose seq is above after
// and at most upto, in increasing seq order, holding at most logBatch of
// them at once where the store has look-ups. raw is valid only during the
// call. An error of fn stops the read and is returned.
func (s *Engine) ChangesInOrder(ctx context.Context, after, upto int64, fn func(raw bson.Raw) error) error {
	if s.lookups != nil {
		ids, err := s.lookups.IDsAbove(ctx, s.db.Name(), collChangeLog, "seq", after)
		if err == nil {
			return s.changesByID(ctx, ids, upto, fn)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.Warn().Err(err).Msg("the change log's look-up failed: reading it sorted by the store")
	}
	filter := bson.M{"seq": bson.M{"$gt": after, "$lte": upto}}
	if after == math.MinInt64 {
		filter = bson.M{"seq": bson.M{"$lte": upto}}
	}
	cur, err := s.coll(collChangeLog).Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "seq", Value: 1}}))
	if err != nil {
		return err
	}
	defer cur.Close(ctx)
	n := 0
	for cur.Next(ctx) {
		n++
		if err := fn(cur.Current); err != nil {
			return err
		}
	}
	if logHeld != nil {
		logHeld(n) // the embedded store sorted them all before the first
	}
	return cur.Err()
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
