package bench

import (
	"context"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// This file is the raw store: the driver, with no service in between. Its
// writes go to a scratch database of their own (a copy of the collections
// they touch, so they scan as much as the service's writes do), never to the
// service's database, whose every change goes through the write path. The
// write-path test allows this one file its driver writes for that reason.

// newRaw connects to the store and copies the collections the raw writes
// touch into the scratch database.
func newRaw(ctx context.Context, uri, db string, d *data) (*rawStore, error) {
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetTimeout(5 * time.Minute))
	if err != nil {
		return nil, err
	}
	r := &rawStore{client: client, db: client.Database(db), scratch: client.Database(db + "_raw"), data: d}
	for _, coll := range []string{"notes", "contacts", "coverage"} {
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
