package ledger

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// The serial protocol reads records by _id under writeMu: the guard of a
// write (guarded: its version and lock), and a group's check and roll
// forward (checkSerialPlan, rollBatchSerial: each record's version, and
// the fields the group keeps as stored). Where the service keeps its own
// index of the collection, that read is the index's: the index is updated
// under writeMu after every record the write path writes (and marked stale
// when a write's outcome is unknown), so while it is live it holds each
// record as stored, bookkeeping fields included, and a record it does not
// hold is not stored. The store is read instead (by _id, its one cheap
// read) when the index is stale or being built, when the collection is not
// kept, or when a field asked for is one the index leaves out; in check
// mode (tests) the store is read as well and a different answer fails the
// write.

// indexedRecord is record id of coll as the index holds it, with at least
// fields (writeMu held). ok is false where the index cannot answer; found
// is false for a record that is not stored.
func (s *Engine) indexedRecord(coll, id string, fields []string) (doc bson.M, found, ok bool, err error) {
	mi := s.mirror
	if !s.written() {
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
	for _, f := range append([]string{fieldVersion, fieldLastChange, fieldLockedBy}, fields...) {
		if !mc.Keeps(f) {
			return nil, false, false, nil // the index leaves it out: the store answers
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

// serialRecord reads record id of coll (writeMu held): from the index
// where it answers for fields, else from the store. found is false for a
// record that is not stored. Only the bookkeeping fields and fields may be
// relied on: the index leaves some others out.
func (s *Engine) serialRecord(ctx context.Context, coll, id string, fields []string) (cur bson.M, found bool, err error) {
	doc, found, ok, err := s.indexedRecord(coll, id, fields)
	if err != nil {
		return nil, false, err
	}
	if ok && !s.mirror.check {
		return doc, found, nil
	}
	err = s.coll(coll).FindOne(ctx, bson.M{"_id": id}).Decode(&cur)
	if errors.Is(err, mongo.ErrNoDocuments) {
		cur, err = nil, nil
	}
	if err != nil {
		return nil, false, err
	}
	if ok && !sameFields(doc, cur, append([]string{fieldVersion, fieldLastChange, fieldLockedBy}, fields...)) {
		// Check mode: the index answered differently from the store.
		return nil, false, fmt.Errorf("%w: record %s of %s", errMirrorMismatch, id, coll)
	}
	return cur, cur != nil, nil
}

// sameFields reports whether a and b (either nil: not stored) agree on
// fields, numbers compared by value.
func sameFields(a, b bson.M, fields []string) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	for _, f := range fields {
		x, okx := a[f]
		y, oky := b[f]
		if okx != oky || (!sameValue(x, y) && !reflect.DeepEqual(x, y)) {
			return false
		}
	}
	return true
}

// guardRead reads record filter["_id"] of coll for guarded, with the
// fields its filter names.
func (s *Engine) guardRead(ctx context.Context, coll string, filter bson.M) (bson.M, bool, error) {
	id, ok := filter["_id"].(string)
	if !ok {
		var cur bson.M
		err := s.coll(coll).FindOne(ctx, bson.M{"_id": filter["_id"]}).Decode(&cur)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, false, nil
		}
		return cur, err == nil, err
	}
	fields := make([]string, 0, len(filter))
	for k := range filter {
		fields = append(fields, k)
	}
	return s.serialRecord(ctx, coll, id, fields)
}
