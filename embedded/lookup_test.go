package embedded

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The look-ups read SQLite directly and answer what FerretDB's find does:
// the ids above a seq, in seq order (across a change of digit count, where
// the JSON text FerretDB indexes would sort 10 before 9), and the ids whose
// field holds a string, as the store's own find returns them.
func TestLookupsAnswerAsTheStore(t *testing.T) {
	ctx := context.Background()
	es, err := Start(ctx, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	client, err := mongo.Connect(options.Client().ApplyURI(es.URI))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(ctx)
	coll := client.Database("look").Collection("change_log")
	var docs []any
	for _, seq := range []int64{12, 3, 9, 10, 100, 1, 11, 99, 2} {
		state := "applied"
		if seq%3 == 0 {
			state = "pending"
		}
		docs = append(docs, bson.M{"_id": fmt.Sprintf("e-%d", seq), "seq": seq, "state": state})
	}
	docs = append(docs, bson.M{"_id": "e-other", "seq": int64(50), "state": bson.A{"pending"}})
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	find := func(filter bson.M, sort bson.D) []string {
		t.Helper()
		cur, err := coll.Find(ctx, filter, options.Find().SetSort(sort).SetProjection(bson.M{"_id": 1}))
		if err != nil {
			t.Fatal(err)
		}
		var got []struct {
			ID string `bson:"_id"`
		}
		if err := cur.All(ctx, &got); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range got {
			ids = append(ids, d.ID)
		}
		return ids
	}
	for _, above := range []int64{0, 2, 9, 10, 99, 100} {
		got, err := es.IDsAbove(ctx, "look", "change_log", "seq", above)
		if err != nil {
			t.Fatal(err)
		}
		want := find(bson.M{"seq": bson.M{"$gt": above}}, bson.D{{Key: "seq", Value: 1}})
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("ids above %d (-look-up +find):\n%s", above, diff)
		}
	}
	got, err := es.IDsEqual(ctx, "look", "change_log", "state", "pending")
	if err != nil {
		t.Fatal(err)
	}
	// The store's find also matches an array holding the value; the
	// look-up is for fields that are never arrays.
	want := slices.DeleteFunc(find(bson.M{"state": "pending"}, bson.D{{Key: "_id", Value: 1}}), func(id string) bool { return id == "e-other" })
	slices.Sort(got)
	if diff := cmp.Diff(got, want); diff != "" || len(want) != 4 {
		t.Errorf("pending ids (-look-up +find):\n%s", diff)
	}
	if ids, err := es.IDsAbove(ctx, "look", "missing", "seq", 0); err != nil || len(ids) != 0 {
		t.Errorf("a collection that does not exist: %v, %v", ids, err)
	}
	if _, err := es.IDsAbove(ctx, "look", "change_log", "seq') OR 1=1 --", 0); err == nil {
		t.Error("a field name that is not plain was taken")
	}
}
