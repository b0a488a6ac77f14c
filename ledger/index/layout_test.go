package index

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// A spec with Keep holds only the kept paths (and _id): an array of
// documents keeps every element, cut to the kept fields, and keeps its
// other elements as they are; a scalar where a document was expected is
// held as it is.
func TestPruneHoldsOnlyTheKeptPaths(t *testing.T) {
	spec := Spec{Keep: []string{"k", "links.c", "sub.c", "msgs"}, Drop: []string{"msgs.body"}}
	in := bson.D{
		{Key: "big", Value: "text"}, {Key: "_id", Value: "a"}, {Key: "k", Value: "x"}, {Key: "n", Value: int64(3)},
		{Key: "links", Value: bson.A{bson.D{{Key: "c", Value: "y"}, {Key: "o", Value: "p"}}, "scalar", bson.D{{Key: "o", Value: "q"}}}},
		{Key: "sub", Value: bson.D{{Key: "c", Value: "z"}, {Key: "d", Value: "w"}}},
		{Key: "msgs", Value: bson.A{bson.D{{Key: "id", Value: "m1"}, {Key: "body", Value: "long"}}}},
	}
	want := bson.D{
		{Key: "_id", Value: "a"}, {Key: "k", Value: "x"},
		{Key: "links", Value: bson.A{bson.D{{Key: "c", Value: "y"}}, "scalar", bson.D{}}},
		{Key: "sub", Value: bson.D{{Key: "c", Value: "z"}}},
		{Key: "msgs", Value: bson.A{bson.D{{Key: "id", Value: "m1"}}}},
	}
	raw, err := bson.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Prune(raw, spec)
	if err != nil {
		t.Fatal(err)
	}
	wantRaw, _ := bson.Marshal(want)
	if !slices.Equal(got, wantRaw) {
		t.Fatalf("pruned to %v, want %v", got, bson.Raw(wantRaw))
	}
	// A scalar where the kept path expects a document is held.
	scalar, _ := bson.Marshal(bson.D{{Key: "_id", Value: "b"}, {Key: "links", Value: "flat"}, {Key: "n", Value: 1}})
	got, _ = Prune(scalar, spec)
	wantRaw, _ = bson.Marshal(bson.D{{Key: "_id", Value: "b"}, {Key: "links", Value: "flat"}})
	if !slices.Equal(got, wantRaw) {
		t.Fatalf("pruned to %v, want %v", got, bson.Raw(wantRaw))
	}
	for path, kept := range map[string]bool{"k": true, "links.c": true, "links": false, "links.o": false, "n": false,
		"msgs": false, "msgs.id": true, "msgs.body": false, "sub": false, "sub.c": true, "_id": true, "big": false} {
		if got := NewColl(spec).Keeps(path); got != kept {
			t.Errorf("Keeps(%q) = %v, want %v", path, got, kept)
		}
	}
}

// On the kept paths the index answers as the store does; a query naming
// any other path (a filter, a sort, or an $or with one branch on it) is
// declined, so it goes to the store.
func TestIndexDeclinesWhatItDoesNotKeep(t *testing.T) {
	db := testDB(t)
	ctx := context.Background()
	coll := db.Collection("index_keep_" + uuid.NewString()[:8])
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var docs []any
	for i := range 40 {
		d := bson.M{"_id": fmt.Sprintf("r%02d", i), "k": []string{"x", "y", "z"}[i%3], "at": t0.Add(time.Duration(i%7) * time.Hour),
			"title": fmt.Sprintf("title %d", i%5), "n": int64(i % 4),
			"links": bson.A{bson.M{"c": []string{"p", "q"}[i%2], "o": "w"}}}
		if i%6 == 0 {
			d["archived_at"] = t0
		}
		docs = append(docs, d)
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	mc := NewColl(Spec{Keep: []string{"k", "at", "archived_at", "links.c"}, Keys: []string{"links.c"}})
	cur, err := coll.Find(ctx, bson.M{})
	if err != nil {
		t.Fatal(err)
	}
	for cur.Next(ctx) {
		mc.Put(cur.Current)
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	store := func(q Query) ([]string, int64) {
		opts := options.Find()
		if q.Sort != nil {
			opts.SetSort(q.Sort)
		}
		var got []struct {
			ID string `bson:"_id"`
		}
		c, err := coll.Find(ctx, q.Filter, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.All(ctx, &got); err != nil {
			t.Fatal(err)
		}
		ids := []string{}
		for i, g := range got {
			if int64(i) >= q.Skip && (q.Limit == 0 || int64(len(ids)) < q.Limit) {
				ids = append(ids, g.ID)
			}
		}
		return ids, int64(len(got))
	}
	byAt := bson.D{{Key: "at", Value: -1}, {Key: "_id", Value: -1}}
	for _, q := range []Query{
		{Filter: bson.M{"links.c": "p", "archived_at": nil}, Sort: byAt, Limit: 5},
		{Filter: bson.M{"k": bson.M{"$in": bson.A{"x", "z"}}, "at": bson.M{"$gte": t0.Add(2 * time.Hour)}}, Sort: byAt},
		{Filter: bson.M{"$or": bson.A{bson.M{"k": "y"}, bson.M{"links.c": "q"}}}, Sort: bson.D{{Key: "k", Value: 1}, {Key: "_id", Value: 1}}, Skip: 3, Limit: 4},
	} {
		ids, total, ok := mc.IDs(q)
		if !ok {
			t.Errorf("%v: declined on kept paths", q.Filter)
			continue
		}
		want, wantTotal := store(q)
		if !slices.Equal(ids, want) || total != wantTotal {
			t.Errorf("%v: index %v (%d), store %v (%d)", q.Filter, ids, total, want, wantTotal)
		}
	}
	for _, q := range []Query{
		{Filter: bson.M{"title": "title 1"}},
		{Filter: bson.M{"n": bson.M{"$gt": 1}, "k": "x"}},
		{Filter: bson.M{"links.o": "w"}},
		{Filter: bson.M{"links": bson.M{"$size": 1}}},
		{Filter: bson.M{"$or": bson.A{bson.M{"k": "y"}, bson.M{"title": "title 2"}}}},
		{Filter: bson.M{"k": "x"}, Sort: bson.D{{Key: "title", Value: 1}}},
		{Filter: bson.M{"k": "x"}, Sort: bson.D{{Key: "links", Value: 1}}},
	} {
		if ids, _, ok := mc.IDs(q); ok {
			t.Errorf("filter %v sort %v: answered %v on a path the index does not keep", q.Filter, q.Sort, ids)
		}
	}
	// What is held is the stored record cut to the kept paths.
	storedRaw, err := coll.FindOne(ctx, bson.M{"_id": "r01"}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	var stored bson.M
	if err := decodeRaw(storedRaw, &stored); err != nil {
		t.Fatal(err)
	}
	held, ok := mc.Doc("r01")
	if !ok {
		t.Fatal("r01 is not held")
	}
	var got bson.M
	if err := decodeRaw(held, &got); err != nil {
		t.Fatal(err)
	}
	want := bson.M{"_id": "r01", "k": stored["k"], "at": stored["at"], "links": bson.A{bson.M{"c": "q"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("held %v, want %v", got, want)
	}
}

// Records replaced many times are compacted into new chunks: every id
// still finds its latest record, the posting lists follow, and a record
// a reader took before a compaction keeps its bytes.
func TestArenaCompactionKeepsRecordsAndIDs(t *testing.T) {
	mc := NewColl(Spec{Keys: []string{"k"}})
	doc := func(id string, v int) bson.Raw {
		raw, err := bson.Marshal(bson.D{{Key: "_id", Value: id}, {Key: "k", Value: fmt.Sprintf("v%d", v%3)},
			{Key: "pad", Value: string(make([]byte, 2000))}, {Key: "v", Value: int64(v)}})
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	const records = 300
	for i := range records {
		mc.Put(doc(fmt.Sprintf("id%03d", i), i))
	}
	early, _ := mc.Doc("id007")
	earlyCopy := slices.Clone(early)
	compactions := 0
	for round := 1; round <= 20; round++ {
		before := mc.arena.used
		for i := range records {
			mc.Put(doc(fmt.Sprintf("id%03d", i), i+round))
		}
		if mc.arena.used < before {
			compactions++
		}
	}
	if compactions == 0 {
		t.Fatal("no compaction after 20 rounds of replacing every record")
	}
	if !slices.Equal(early, earlyCopy) {
		t.Fatal("a record taken before a compaction changed")
	}
	if mc.Len() != records {
		t.Fatalf("%d records held, want %d", mc.Len(), records)
	}
	if mc.arena.live > 2*records*2100 || mc.arena.used > 3*mc.arena.live+(4<<20) {
		t.Fatalf("arena holds %d bytes written for %d live", mc.arena.used, mc.arena.live)
	}
	for i := range records {
		id := fmt.Sprintf("id%03d", i)
		raw, ok := mc.Doc(id)
		if !ok {
			t.Fatalf("%s is not found", id)
		}
		if v := raw.Lookup("v").Int64(); v != int64(i+20) {
			t.Fatalf("%s holds v %d, want %d", id, v, i+20)
		}
	}
	if _, ok := mc.Doc("id300"); ok {
		t.Fatal("an id never put is found")
	}
	for k := range 3 {
		ids, total, ok := mc.IDs(Query{Filter: bson.M{"k": fmt.Sprintf("v%d", k)}})
		if !ok || total != records/3 {
			t.Fatalf("k=v%d: %d records (ok %v), want %d", k, total, ok, records/3)
		}
		for _, id := range ids {
			raw, _ := mc.Doc(id)
			if got := raw.Lookup("k").StringValue(); got != fmt.Sprintf("v%d", k) {
				t.Fatalf("%s under v%d holds %s", id, k, got)
			}
		}
	}
}

// A checkpoint holds records as the specs it was written with kept them:
// one written before a spec kept fewer paths (or other ones) is refused,
// and one written with the same specs loads the same records.
func TestCheckpointOfOtherKeptPathsIsRefused(t *testing.T) {
	old := map[string]Spec{"notes": {Drop: []string{"content"}, Keys: []string{"k"}}}
	now := map[string]Spec{"notes": {Keep: []string{"k", "at"}, Drop: []string{"content"}, Keys: []string{"k"}}}
	write := func(specs map[string]Spec) *bytes.Buffer {
		mc := NewColl(specs["notes"])
		for i := range 5 {
			raw, _ := bson.Marshal(bson.D{{Key: "_id", Value: fmt.Sprintf("n%d", i)}, {Key: "k", Value: "x"}, {Key: "title", Value: "t"}, {Key: "content", Value: "c"}})
			mc.Put(raw)
		}
		var buf bytes.Buffer
		if err := WriteCheckpoint(&buf, Position{Database: "d", Counter: 5}, specs, Snap(map[string]*Coll{"notes": mc})); err != nil {
			t.Fatal(err)
		}
		return &buf
	}
	if _, _, err := ReadCheckpoint(write(old), now); err == nil {
		t.Fatal("a checkpoint written before the spec kept fewer paths was loaded")
	}
	_, colls, err := ReadCheckpoint(write(now), now)
	if err != nil {
		t.Fatal(err)
	}
	raw, ok := colls["notes"].Doc("n3")
	if !ok {
		t.Fatal("n3 is not loaded")
	}
	if _, err := raw.LookupErr("title"); err == nil {
		t.Fatalf("the loaded record holds a path not kept: %v", raw)
	}
	if ids, total, ok := colls["notes"].IDs(Query{Filter: bson.M{"k": "x"}, Sort: bson.D{{Key: "_id", Value: 1}}, Limit: 2}); !ok || total != 5 || !slices.Equal(ids, []string{"n0", "n1"}) {
		t.Fatalf("loaded index answers %v (%d, ok %v)", ids, total, ok)
	}
}
