package index

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/embedded"
)

// testDB is a fresh database on the store the tests compare with: the
// embedded one, or MONGODB_URI's.
func testDB(t *testing.T) *mongo.Database {
	t.Helper()
	ctx := context.Background()
	uri := os.Getenv("MONGODB_URI")
	if uri == "" {
		es, err := embedded.Start(ctx, embedded.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(es.Close)
		uri = es.URI
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetTimeout(30 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Disconnect(context.Background()) })
	return client.Database("outreach_test_" + strings.ReplaceAll(uuid.NewString()[:8], "-", ""))
}

// literal is the case-insensitive match of text the service's searches
// send (repo's list.go).
func literal(text string) bson.M {
	return bson.M{"$regex": strings.ReplaceAll(regexp.QuoteMeta(text), "\x00", `\x00`), "$options": "i"}
}

// The evaluator decides each operator as the store does, on documents of
// every shape the records take (a field missing, null, a scalar, an array,
// an array of documents with and without the field), compared on the store
// itself (the embedded one, or MONGODB_URI's).
func TestIndexEvaluatorAgreesWithTheStore(t *testing.T) {
	db := testDB(t)
	ctx := context.Background()
	coll := db.Collection("index_semantics_" + uuid.NewString()[:8])
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	docs := []bson.M{
		{"_id": "a", "k": "x", "n": int64(3), "at": t0, "tags": bson.A{"x", "y"}, "links": bson.A{bson.M{"c": "x"}, bson.M{"o": "p"}}},
		{"_id": "b", "k": nil, "n": int32(3), "at": t0.Add(time.Hour), "tags": bson.A{}, "links": bson.A{bson.M{"c": "y"}}},
		{"_id": "c", "n": 2.5, "at": t0.Add(-time.Hour), "tags": bson.A{"y"}, "links": bson.A{}},
		{"_id": "d", "k": "y", "n": "3", "at": "2026-01-01", "tags": "x", "links": bson.A{bson.M{"c": nil}}},
		{"_id": "e", "k": "X", "n": int64(10), "at": t0, "sub": bson.M{"c": "x"}},
		{"_id": "f", "k": "x y", "n": int64(-1), "at": nil, "tags": bson.A{"z", "x"}, "links": bson.A{bson.M{"c": "x"}, bson.M{"c": "z"}}},
	}
	for _, d := range docs {
		if _, err := coll.InsertOne(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	mc := NewColl(Spec{Keys: []string{"links.c", "tags", "k"}})
	cur, err := coll.Find(ctx, bson.M{})
	if err != nil {
		t.Fatal(err)
	}
	for cur.Next(ctx) {
		mc.Put(slices.Clone(cur.Current))
	}
	filters := []bson.M{
		{}, {"k": "x"}, {"k": nil}, {"k": bson.M{"$ne": nil}}, {"k": bson.M{"$exists": false}}, {"k": bson.M{"$exists": true}},
		{"k": bson.M{"$in": bson.A{"x", nil}}}, {"k": bson.M{"$nin": bson.A{"x", "y"}}}, {"k": bson.M{"$in": []string{"y", "X"}}},
		{"n": 3}, {"n": bson.M{"$gte": 3}}, {"n": bson.M{"$lt": 3}}, {"n": bson.M{"$gt": "2"}}, {"n": bson.M{"$lte": 2.5, "$gt": -5}},
		{"at": bson.M{"$gte": t0}}, {"at": bson.M{"$lte": t0, "$gte": t0.Add(-2 * time.Hour)}}, {"at": nil},
		{"tags": "x"}, {"tags": "y", "k": "x"}, {"tags": bson.M{"$in": bson.A{"z"}}}, {"tags": bson.M{"$ne": "x"}},
		{"links.c": "x"}, {"links.c": bson.M{"$exists": true}}, {"links.o": "p"}, {"links.c": bson.M{"$in": bson.A{"y", "z"}}},
		{"sub.c": "x"}, {"sub.c": nil},
		{"k": literal("X")}, {"k": bson.M{"$regex": "^x"}}, {"k": literal("x y")},
		{"$or": bson.A{bson.M{"k": "y"}, bson.M{"tags": "z"}}}, {"$and": bson.A{bson.M{"k": bson.M{"$ne": nil}}, bson.M{"links.c": "x"}}},
		{"_id": bson.M{"$in": bson.A{"a", "c", "zz"}}}, {"_id": "b"},
	}
	sorts := []bson.D{nil, {{Key: "at", Value: -1}, {Key: "_id", Value: -1}}, {{Key: "n", Value: 1}, {Key: "_id", Value: 1}}, {{Key: "k", Value: 1}, {Key: "_id", Value: -1}}}
	for _, f := range filters {
		for _, sort := range sorts {
			ids, total, ok := mc.IDs(Query{Filter: f, Sort: sort})
			if !ok {
				t.Errorf("filter %v sort %v: the index does not answer", f, sort)
				continue
			}
			opts := options.Find()
			if sort != nil {
				opts.SetSort(sort)
			}
			var want []struct {
				ID string `bson:"_id"`
			}
			cur, err := coll.Find(ctx, f, opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := cur.All(ctx, &want); err != nil {
				t.Fatal(err)
			}
			wantIDs := []string{}
			for _, w := range want {
				wantIDs = append(wantIDs, w.ID)
			}
			if sort == nil {
				slices.Sort(ids) // the store's unsorted order is its own
				slices.Sort(wantIDs)
			}
			if !slices.Equal(ids, wantIDs) || total != int64(len(wantIDs)) {
				t.Errorf("filter %v sort %v: index %v (total %d), store %v", f, sort, ids, total, wantIDs)
			}
		}
	}
	// What it does not decide exactly, it leaves to the store.
	dec, _ := bson.ParseDecimal128("3")
	for _, f := range []bson.M{{"k": bson.M{"$size": 1}}, {"$where": "1"}, {"sub": bson.M{"c": "x"}}, {"links": bson.M{"$elemMatch": bson.M{"c": "x"}}}, {"links.c": nil}, {"tags": bson.A{"x", "y"}},
		{"n": math.NaN()}, {"n": bson.M{"$gte": math.NaN()}}, {"n": bson.M{"$in": bson.A{dec}}}, {"n": -0x1p63},
		{"links.c": bson.M{"$ne": "x"}}, {"links.c": bson.M{"$nin": bson.A{"y"}}}, {"sub.c.d": nil}} {
		if _, _, ok := mc.IDs(Query{Filter: f}); ok {
			t.Errorf("filter %v: the index answered a query it cannot decide", f)
		}
	}
	// A sort on an array's elements, or on a path that elements of an array
	// of documents lack (links.c: doc a has a link without it), or through a
	// scalar (sub.c.d: sub.c is a string).
	for _, key := range []string{"tags", "links.c", "sub.c.d"} {
		if _, _, ok := mc.IDs(Query{Filter: bson.M{}, Sort: bson.D{{Key: key, Value: 1}}}); ok {
			t.Errorf("a sort on %s was answered by the index", key)
		}
	}
	// The report's case: one element lacks the field, the other holds it.
	gappy := NewColl(Spec{})
	for _, d := range []bson.M{{"_id": "x", "a": bson.A{bson.M{"b": 5}, bson.M{}}}, {"_id": "y", "a": bson.A{bson.M{"b": 3}}}} {
		raw, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		gappy.Put(raw)
	}
	if ids, _, ok := gappy.IDs(Query{Filter: bson.M{}, Sort: bson.D{{Key: "a.b", Value: 1}}}); ok {
		t.Errorf("a sort on a.b, which one element of x's a lacks, was answered by the index: %v", ids)
	}
}

// TestIndexEvaluatorAgreesWithTheStoreOnGeneratedShapes: generated documents
// (every BSON number type at its edges: int32 and int64 limits, integers
// around ±2^53, doubles with -0, NaN, ±Inf and the largest, decimal128; null
// and missing; arrays of scalars and of documents with and without the
// field; strings, booleans, dates) and generated filters and sorts over
// them. Wherever the index answers, it answers as the store does; where it
// cannot decide exactly, it declines. A fixed seed makes every run the same.
func TestIndexEvaluatorAgreesWithTheStoreOnGeneratedShapes(t *testing.T) {
	db := testDB(t)
	ctx := context.Background()
	coll := db.Collection("index_generated_" + uuid.NewString()[:8])
	const big = int64(1) << 53
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dec, err := bson.ParseDecimal128("3")
	if err != nil {
		t.Fatal(err)
	}
	// Integers and doubles near 2^53 and the limits: the values a float64
	// comparison gets wrong.
	bigs := []any{big, big + 1, big - 1, -big, -big - 1, big + 2, float64(big), float64(big) + 2, -float64(big),
		int64(math.MaxInt64), int64(math.MinInt64), int64(math.MaxInt64 - 1), int32(math.MaxInt32), int32(math.MinInt32),
		0x1p63, 0x1p62, -0x1p62, int64(1) << 62, int64(3), 3.0, int32(3), 2.5, math.Inf(1), math.Inf(-1), math.MaxFloat64}
	scalars := append(slices.Clone(bigs), int32(0), int64(0), 0.0, math.Copysign(0, -1), int32(-1), -2.5, 0.1,
		-0x1p63, nil, "3", "", "a", "é", "B", true, false, t0, t0.Add(time.Hour))
	// NaN and decimal128 appear in filters only: the embedded store drops
	// its connection on a document or a filter holding either (it cannot
	// store them), and the index must decline them, never copy that. The
	// double -2^63 (equal to the least int64) is left out of big: the
	// document engine holds them unequal, and the index declines it.
	conds := append(slices.Clone(scalars), math.NaN(), dec)
	pick := func(rng *rand.Rand, xs []any) any { return xs[rng.IntN(len(xs))] }
	rng := rand.New(rand.NewPCG(24, 6))
	var docs []bson.M
	for i := range 80 {
		d := bson.M{"_id": fmt.Sprintf("d%02d", i)}
		// big: numbers only, never NaN or decimal128 (the shapes the index
		// must decide, not decline).
		if rng.IntN(8) > 0 {
			d["big"] = pick(rng, bigs)
		}
		switch r := rng.IntN(10); {
		case r == 0: // missing
		case r < 8:
			d["n"] = pick(rng, scalars)
		default:
			arr := bson.A{}
			for range rng.IntN(3) + 1 {
				arr = append(arr, pick(rng, scalars))
			}
			d["n"] = arr
		}
		switch r := rng.IntN(10); {
		case r == 0:
		case r == 1:
			d["a"] = bson.A{}
		case r == 2:
			d["a"] = pick(rng, scalars)
		default:
			arr := bson.A{}
			for range rng.IntN(3) + 1 {
				switch rng.IntN(6) {
				case 0:
					arr = append(arr, bson.M{})
				case 1:
					arr = append(arr, pick(rng, scalars))
				default:
					arr = append(arr, bson.M{"b": pick(rng, bigs)})
				}
			}
			d["a"] = arr
		}
		switch rng.IntN(4) {
		case 0:
		case 1:
			d["s"] = bson.M{}
		case 2:
			d["s"] = pick(rng, scalars)
		default:
			d["s"] = bson.M{"b": pick(rng, scalars)}
		}
		docs = append(docs, d)
	}
	// The embedded store refuses to hold ±Inf (and other values its
	// version cannot store): such documents are left out, and the values
	// still appear in filters.
	stored := 0
	for _, d := range docs {
		if _, err := coll.InsertOne(ctx, d); err != nil {
			t.Logf("the store refuses %v: %v", d, err)
			continue
		}
		stored++
	}
	if stored < len(docs)/2 {
		t.Fatalf("the store holds %d of %d generated documents", stored, len(docs))
	}
	mc := NewColl(Spec{})
	cur, err := coll.Find(ctx, bson.M{})
	if err != nil {
		t.Fatal(err)
	}
	for cur.Next(ctx) {
		mc.Put(slices.Clone(cur.Current))
	}

	storeIDs := func(f bson.M, sort bson.D) ([]string, error) {
		opts := options.Find()
		if sort != nil {
			opts.SetSort(sort)
		}
		var got []struct {
			ID string `bson:"_id"`
		}
		cur, err := coll.Find(ctx, f, opts)
		if err != nil {
			return nil, err
		}
		if err := cur.All(ctx, &got); err != nil {
			return nil, err
		}
		ids := []string{}
		for _, g := range got {
			ids = append(ids, g.ID)
		}
		return ids, nil
	}
	var answered, declined, refused int
	compare := func(f bson.M, sort bson.D, mustAnswer bool) {
		t.Helper()
		ids, total, ok := mc.IDs(Query{Filter: f, Sort: sort})
		if !ok {
			declined++
			if mustAnswer {
				t.Errorf("filter %v sort %v: the index declines a shape it must decide", f, sort)
			}
			return
		}
		answered++
		want, err := storeIDs(f, sort)
		if err != nil {
			refused++
			t.Errorf("filter %v sort %v: the store refuses it (%v), the index answers %v", f, sort, err, ids)
			return
		}
		if sort == nil {
			slices.Sort(ids)
			slices.Sort(want)
		}
		if !slices.Equal(ids, want) || total != int64(len(want)) {
			t.Errorf("filter %v sort %v: index %v (total %d), store %v", f, sort, ids, total, want)
		}
	}

	// The shapes of the report: integers beyond 2^53, on a field that holds
	// numbers only, must be decided, and decided exactly.
	for _, v := range []any{big, big + 1, float64(big), int64(math.MaxInt64), -big - 1, 0x1p63} {
		compare(bson.M{"big": v}, nil, true)
		compare(bson.M{"big": bson.M{"$in": bson.A{v, int32(3)}}}, nil, true)
		for _, op := range []string{"$gt", "$gte", "$lt", "$lte", "$ne"} {
			compare(bson.M{"big": bson.M{op: v}}, nil, true)
		}
	}
	for _, dir := range []int{1, -1} {
		compare(bson.M{}, bson.D{{Key: "big", Value: dir}, {Key: "_id", Value: 1}}, true)
		compare(bson.M{"big": bson.M{"$gte": big}}, bson.D{{Key: "big", Value: dir}, {Key: "_id", Value: -1}}, true)
	}

	// Generated filters over every field, each with a generated sort.
	paths := []string{"big", "n", "a.b", "s.b", "a", "s"}
	ops := []string{"", "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists"}
	cond := func() bson.M {
		path := paths[rng.IntN(len(paths))]
		v := pick(rng, conds)
		switch op := ops[rng.IntN(len(ops))]; op {
		case "":
			return bson.M{path: v}
		case "$in", "$nin":
			return bson.M{path: bson.M{op: bson.A{v, pick(rng, conds)}}}
		case "$exists":
			return bson.M{path: bson.M{op: rng.IntN(2) == 0}}
		default:
			return bson.M{path: bson.M{op: v}}
		}
	}
	sorts := []bson.D{nil}
	for _, p := range paths[:4] {
		sorts = append(sorts, bson.D{{Key: p, Value: 1}, {Key: "_id", Value: 1}}, bson.D{{Key: p, Value: -1}, {Key: "_id", Value: -1}})
	}
	for range 600 {
		f := cond()
		switch rng.IntN(6) {
		case 0:
			f = bson.M{"$or": bson.A{f, cond()}}
		case 1:
			f = bson.M{"$and": bson.A{f, cond()}}
		}
		compare(f, sorts[rng.IntN(len(sorts))], false)
	}
	t.Logf("%d queries answered by the index (and compared), %d declined, %d refused by the store", answered, declined, refused)
}
