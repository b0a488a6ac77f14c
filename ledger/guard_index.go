package ledger

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// The guard of a serial write (guarded) reads the record by _id to check
// its version and lock before writing it. Where the service keeps its own
// index of the collection, that read is the index's: the index is updated
// under writeMu after every record the write path writes (and marked stale
// when a write's outcome is unknown), and guarded runs under writeMu, so
// while the index is live it holds the record as stored, bookkeeping
// fields included. A record the index does not hold is not stored. The
// store is read instead when the index is stale or being built, when the
// collection is not kept, or when the guard names a field the index leaves
// out; in check mode (tests) the store is read as well and a different
// answer fails the write.

// guardDoc is record id of coll as the index holds it, for a guard on
// filter's fields (writeMu held). ok is false where the index cannot
// answer; found is false for a record that is not stored.
func (s *Engine) guardDoc(coll string, filter bson.M) (doc bson.M, found, ok bool, err error) {
	mi := s.mirror
	if mi == nil || !s.serialWrites {
		return nil, false, false, nil
	}
	id, isID := filter["_id"].(string)
	if !isID {
		return nil, false, false, nil
	}
	mi.mu.RLock()
	defer mi.mu.RUnlock()
	if mi.stale.Load() || mi.building {
		return nil, false, false, nil
	}
	mc := mi.colls[coll]
	if mc == nil {
		return nil, false, false, nil
	}
	for k := range filter {
		if !mc.Keeps(k) {
			return nil, false, false, nil
		}
	}
	raw, held := mc.Doc(id)
	if !held {
		return nil, false, true, nil
	}
	if err := decodeRaw(raw, &doc); err != nil {
		return nil, false, false, err
	}
	return doc, true, true, nil
}

// guardRead reads record filter["_id"] of coll for guarded: from the index
// where it answers, else from the store. found is false for a record that
// is not stored.
func (s *Engine) guardRead(ctx context.Context, coll string, filter bson.M) (cur bson.M, found bool, err error) {
	doc, found, ok, err := s.guardDoc(coll, filter)
	if err != nil {
		return nil, false, err
	}
	if ok && !s.mirror.check {
		return doc, found, nil
	}
	err = s.coll(coll).FindOne(ctx, bson.M{"_id": filter["_id"]}).Decode(&cur)
	if errors.Is(err, mongo.ErrNoDocuments) {
		cur, err = nil, nil
	}
	if err != nil {
		return nil, false, err
	}
	if ok && (found != (cur != nil) || (found && matches(doc, filter) != matches(cur, filter))) {
		// Check mode: the index's guard answered differently from the store.
		return nil, false, fmt.Errorf("%w: the guard of %s %v", errMirrorMismatch, coll, filter["_id"])
	}
	return cur, cur != nil, nil
}
