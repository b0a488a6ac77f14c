package index

import (
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestPostingListsFollowReplacedRecords: a record put again with other key
// values leaves the old values' lists and joins the new ones, keeping its
// place in the insertion order; the lists stay ascending and hold a record
// once however often a value repeats in it.
func TestPostingListsFollowReplacedRecords(t *testing.T) {
	mc := NewColl(Spec{Keys: []string{"tags"}})
	put := func(id string, tags ...string) {
		raw, err := bson.Marshal(bson.M{"_id": id, "tags": tags})
		if err != nil {
			t.Fatal(err)
		}
		mc.Put(raw)
	}
	ids := func(filter bson.M) []string {
		got, total, ok := mc.IDs(Query{Filter: filter})
		if !ok || int(total) != len(got) {
			t.Fatalf("%v: ok %v, total %d, ids %v", filter, ok, total, got)
		}
		return got
	}
	put("a", "x", "x", "y")
	put("b", "y")
	put("c", "x")
	if got := ids(bson.M{"tags": "x"}); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("x: %v", got)
	}
	put("a", "z") // a leaves x and y
	if got := ids(bson.M{"tags": "x"}); !slices.Equal(got, []string{"c"}) {
		t.Errorf("x after the replace: %v", got)
	}
	if got := ids(bson.M{"tags": "y"}); !slices.Equal(got, []string{"b"}) {
		t.Errorf("y after the replace: %v", got)
	}
	put("c", "z", "y")
	if got := ids(bson.M{"tags": bson.M{"$in": bson.A{"z", "y"}}}); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("z or y, in insertion order: %v", got)
	}
	if got := ids(bson.M{"_id": bson.M{"$in": bson.A{"c", "a", "nope", "c"}}}); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("by id: %v", got)
	}
	if _, ok := mc.keys["tags"]["x"]; ok {
		t.Errorf("an emptied list is kept: %v", mc.keys["tags"])
	}
	for v, list := range mc.keys["tags"] {
		if !slices.IsSorted(list) || len(slices.Compact(slices.Clone(list))) != len(list) {
			t.Errorf("list of %s: %v", v, list)
		}
	}
	if mc.Len() != 3 {
		t.Errorf("%d records; want 3", mc.Len())
	}
}
