package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
)

// This file is the raw store: the driver, with no service in between. Its
// writes go to a scratch database of their own (a copy of the collections
// they touch, so they scan as much as the service's writes do), never to the
// service's database, whose every change goes through the write path. The
// write-path test allows this one file its driver writes for that reason.

// newRaw connects to the store and copies the collections the raw writes
// touch (copies) into the scratch database.
func newRaw(ctx context.Context, uri, db string, d *data, copies []string) (*rawStore, error) {
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetTimeout(5 * time.Minute))
	if err != nil {
		return nil, err
	}
	r := &rawStore{client: client, db: client.Database(db), scratch: client.Database(db + "_raw"), data: d}
	for _, coll := range copies {
		cur, err := r.db.Collection(coll).Find(ctx, bson.M{})
		if err != nil {
			return nil, err
		}
		var batch []any
		for cur.Next(ctx) {
			batch = append(batch, bson.Raw(append([]byte(nil), cur.Current...)))
			if len(batch) == 500 || cur.RemainingBatchLength() == 0 {
				if _, err := r.scratch.Collection(coll).InsertMany(ctx, batch); err != nil {
					return nil, err
				}
				batch = batch[:0]
			}
		}
		if err := cur.Err(); err != nil {
			return nil, err
		}
		if len(batch) > 0 {
			if _, err := r.scratch.Collection(coll).InsertMany(ctx, batch); err != nil {
				return nil, err
			}
		}
	}
	if _, err := r.scratch.Collection("counters").InsertOne(ctx, bson.M{"_id": "change_seq", "seq": int64(0)}); err != nil {
		return nil, err
	}
	return r, nil
}

// close disconnects. The scratch copy stays, like the bench's own database:
// on the embedded store both go with the run's temporary folder; on a server
// (MONGODB_URI) they are left for inspection, and the service deletes nothing.
func (r *rawStore) close(ctx context.Context) {
	r.client.Disconnect(ctx)
}

// nextSeq is the counter a change entry's seq needs: one operation.
func (r *rawStore) nextSeq(ctx context.Context) (int64, error) {
	var c struct {
		Seq int64 `bson:"seq"`
	}
	err := r.scratch.Collection("counters").FindOneAndUpdate(ctx, bson.M{"_id": "change_seq"}, bson.M{"$inc": bson.M{"seq": 1}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&c)
	return c.Seq, err
}

// create is what creating a record needs at the least: a look-up of each
// linked contact, the counter, the record, its change entry.
func (r *rawStore) create(ctx context.Context, coll string, links []string, doc bson.M) error {
	for _, id := range links {
		if err := r.db.Collection("contacts").FindOne(ctx, bson.M{"_id": id}).Err(); err != nil {
			return err
		}
	}
	seq, err := r.nextSeq(ctx)
	if err != nil {
		return err
	}
	id, t := uuid.NewString(), time.Now()
	doc["_id"], doc["created_at"], doc["updated_at"], doc["archived_at"], doc["version"] = id, t, t, nil, int64(1)
	if _, err := r.scratch.Collection(coll).InsertOne(ctx, doc); err != nil {
		return err
	}
	_, err = r.scratch.Collection("change_log").InsertOne(ctx, bson.M{"_id": uuid.NewString(), "seq": seq, "at": t,
		"collection": coll, "record_id": id, "action": "create", "after": doc, "state": "applied"})
	return err
}

// update is what changing a record needs at the least: read it, the
// counter, a write guarded by its version, the change entry.
func (r *rawStore) update(ctx context.Context, coll, id string, set bson.M) error {
	var before bson.M
	if err := r.scratch.Collection(coll).FindOne(ctx, bson.M{"_id": id}).Decode(&before); err != nil {
		return err
	}
	seq, err := r.nextSeq(ctx)
	if err != nil {
		return err
	}
	v, _ := before["version"].(int64)
	set["updated_at"], set["version"] = time.Now(), v+1
	if _, err := r.scratch.Collection(coll).UpdateOne(ctx, bson.M{"_id": id, "version": before["version"]}, bson.M{"$set": set}); err != nil {
		return err
	}
	_, err = r.scratch.Collection("change_log").InsertOne(ctx, bson.M{"_id": uuid.NewString(), "seq": seq, "at": time.Now(),
		"collection": coll, "record_id": id, "action": "update", "before": before, "after": set, "state": "applied"})
	return err
}

// bulkBatch is how many records one bulk insert carries.
const bulkBatch = 1000

// bulk stores records as the write path leaves them, a batch at a time,
// where creating each through the write path would take an hour at 100,000
// notes: every record at version 1 with last_change naming its change
// entry, and that entry a create in the state the write path leaves it
// (applied, the whole record as its after, the actor's ids, seq numbers
// reserved from the store's change counter). A batch's records go in before
// its entries, as the serial protocol writes them. It writes only a store no
// service has open (the bench closes its service first and reopens it
// after), so no process holds seq numbers of the counter in memory and no
// reader sees a batch half-written.
type bulk struct {
	client  *mongo.Client
	db      *mongo.Database
	actor   audit.Actor
	records map[string][]any // collection -> records of the batch
	entries []audit.Entry
}

func newBulk(uri, db string, actor audit.Actor) (*bulk, error) {
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetTimeout(5 * time.Minute))
	if err != nil {
		return nil, err
	}
	return &bulk{client: client, db: client.Database(db), actor: actor, records: map[string][]any{}}, nil
}

// put adds one record of coll (fields as the tools store them, without the
// fields every record gets) and returns its id.
func (b *bulk) put(ctx context.Context, coll string, fields map[string]any) (string, error) {
	id, t := uuid.NewString(), time.Now().UTC().Truncate(time.Millisecond)
	after := bson.M{"_id": id, "created_at": t, "updated_at": t, "archived_at": nil}
	for k, v := range fields {
		after[k] = v
	}
	e := audit.Entry{ID: uuid.NewString(), At: t, Collection: coll, RecordID: id, Action: "create", After: after,
		UserID: b.actor.UserID, AgentID: b.actor.AgentID, SessionID: b.actor.SessionID, Tool: b.actor.Tool,
		Reversible: true, VersionAfter: 1, State: audit.StateApplied}
	rec := bson.M{"version": int64(1), "last_change": e.ID}
	for k, v := range after {
		rec[k] = v
	}
	b.records[coll] = append(b.records[coll], rec)
	b.entries = append(b.entries, e)
	if len(b.entries) == bulkBatch {
		return id, b.flush(ctx)
	}
	return id, nil
}

// flush writes the batch: seq numbers for its entries, its records, then
// its entries.
func (b *bulk) flush(ctx context.Context) error {
	if len(b.entries) == 0 {
		return nil
	}
	var c struct {
		Seq int64 `bson:"seq"`
	}
	if err := b.db.Collection("counters").FindOneAndUpdate(ctx, bson.M{"_id": "change_log"}, bson.M{"$inc": bson.M{"seq": int64(len(b.entries))}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&c); err != nil {
		return fmt.Errorf("change counter: %w", err)
	}
	entries := make([]any, len(b.entries))
	for i := range b.entries {
		b.entries[i].Seq = c.Seq - int64(len(b.entries)) + 1 + int64(i)
		entries[i] = b.entries[i]
	}
	for coll, recs := range b.records {
		if _, err := b.db.Collection(coll).InsertMany(ctx, recs); err != nil {
			return fmt.Errorf("%s: %w", coll, err)
		}
	}
	if _, err := b.db.Collection("change_log").InsertMany(ctx, entries); err != nil {
		return fmt.Errorf("change_log: %w", err)
	}
	clear(b.records)
	b.entries = b.entries[:0]
	return nil
}

// close writes what is left and disconnects.
func (b *bulk) close(ctx context.Context) error {
	err := b.flush(ctx)
	return errors.Join(err, b.client.Disconnect(ctx))
}
