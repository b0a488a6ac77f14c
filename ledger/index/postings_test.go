package index

import (
	"fmt"
	"math/rand/v2"
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
	if _, ok := mc.keys["tags"].m["x"]; ok {
		t.Errorf("an emptied list is kept: %v", mc.keys["tags"].m)
	}
	if !mc.keys["tags"].valid() {
		t.Errorf("the lists are not ascending, distinct and of several records: %v %v", mc.keys["tags"].m, mc.keys["tags"].lists)
	}
	if mc.Len() != 3 {
		t.Errorf("%d records; want 3", mc.Len())
	}
}

// valid reports whether every list is ascending, holds each record once,
// and has more than one record (a value of one record is held inline).
func (p *postings) valid() bool {
	for _, e := range p.m {
		if e < 0 {
			list := p.lists[-1-e]
			if len(list) < 2 || !slices.IsSorted(list) || len(slices.Compact(slices.Clone(list))) != len(list) {
				return false
			}
		}
	}
	return true
}

// TestPostingsHoldOneRecordInline: a value held by one record is that
// record's number, with no list of its own; a value joining a second record
// gets a list, which turns back into the number when one record is left,
// and the value leaves when none is. Random replaces, checked against the
// records themselves after every step, through the postings and IDs.
func TestPostingsHoldOneRecordInline(t *testing.T) {
	mc := NewColl(Spec{Keys: []string{"tags"}})
	rng := rand.New(rand.NewPCG(1, 2))
	held := map[string][]string{} // id → its tags
	var order []string
	for step := range 3000 {
		id := fmt.Sprint("r", rng.IntN(60))
		var tags []string
		for range rng.IntN(4) {
			tags = append(tags, fmt.Sprint("v", rng.IntN(40+step/30)))
		}
		raw, err := bson.Marshal(bson.M{"_id": id, "tags": tags})
		if err != nil {
			t.Fatal(err)
		}
		mc.Put(raw)
		if _, ok := held[id]; !ok {
			order = append(order, id)
		}
		held[id] = tags
		if step%50 != 49 {
			continue
		}
		want := map[string][]int32{}
		for n, id := range order {
			for _, v := range held[id] {
				if l := want[v]; len(l) == 0 || l[len(l)-1] != int32(n) {
					want[v] = append(l, int32(n))
				}
			}
		}
		p := mc.keys["tags"]
		if len(p.m) != len(want) {
			t.Fatalf("step %d: %d values held, want %d", step, len(p.m), len(want))
		}
		for v, list := range want {
			if got := p.get(v); !slices.Equal(got, list) {
				t.Fatalf("step %d: %s: %v, want %v", step, v, got, list)
			}
			if e := p.m[v]; (len(list) == 1) != (e >= 0) {
				t.Fatalf("step %d: %s of %d records held as %d", step, v, len(list), e)
			}
			got, total, ok := mc.IDs(Query{Filter: bson.M{"tags": v}})
			if !ok || int(total) != len(list) || len(got) != len(list) {
				t.Fatalf("step %d: IDs of %s: %v %d %v", step, v, got, total, ok)
			}
		}
		if !p.valid() {
			t.Fatalf("step %d: lists not ascending, distinct and of several records", step)
		}
		lists := 0
		for _, e := range p.m {
			if e < 0 {
				lists++
			}
		}
		if len(p.lists)-len(p.free) != lists {
			t.Fatalf("step %d: %d lists held, %d free, %d named", step, len(p.lists), len(p.free), lists)
		}
	}
}

// TestWordPostingsHoldOneRecordInline: a word of one record (most words:
// numbers, names) is that record's number in the word index, with no list
// of its own; lists are only for words of several records, and follow the
// records as they change.
func TestWordPostingsHoldOneRecordInline(t *testing.T) {
	mc := NewColl(testWordsSpec)
	docs := map[string]textDoc{}
	for round := range 3 {
		for i := range 40 {
			d := textDoc{id: fmt.Sprint("r", i), title: fmt.Sprintf("note %d", i*(round+1)), body: fmt.Sprintf("shared w%d only%d", i%(round+2), i+100*round)}
			docs[d.id] = d
			putHeld(t, mc, d)
		}
		for _, n := range []string{"note", "shared", "only", "only105", "w1", "7", fmt.Sprint("only", 100*round+3)} {
			checkText(t, mc, docs, n)
		}
		wi := mc.words
		lists := 0
		for w, at := range wi.vocab {
			for _, e := range []int32{wi.postings[at].all, wi.postings[at].title} {
				list := wi.lists.list(e)
				if len(list) == 1 && e < 0 {
					t.Errorf("round %d: %q of one record held as a list", round, w)
				}
				if len(list) > 1 {
					lists++
				}
			}
		}
		if live := len(wi.lists.lists) - len(wi.lists.free); live != lists {
			t.Errorf("round %d: %d lists held, %d named by a word", round, live, lists)
		}
	}
}

// TestDenseWordsAreBitmaps: a word of most records is held as a bitmap,
// answers as the list did while records join and leave it, and turns
// back into a record's number when one is left. Key paths keep lists.
func TestDenseWordsAreBitmaps(t *testing.T) {
	mc := NewColl(testWordsSpec)
	docs := map[string]textDoc{}
	put := func(i int, body string) {
		d := textDoc{id: fmt.Sprintf("r%04d", i), title: fmt.Sprint("t", i), body: body}
		docs[d.id] = d
		putHeld(t, mc, d)
	}
	const records = 1000
	for i := range records {
		body := "common"
		if i%2 == 0 {
			body += " even"
		}
		if i%100 == 0 {
			body += " rare"
		}
		put(i, body)
	}
	entry := func(w string) int32 {
		at, ok := mc.words.vocab[w]
		if !ok {
			return noRecords
		}
		return mc.words.postings[at].all
	}
	isBitmap := func(w string) bool {
		e := entry(w)
		return e < 0 && e != noRecords && mc.words.lists.bitmap(-1-e) != nil
	}
	if !isBitmap("common") || !isBitmap("even") || isBitmap("rare") {
		t.Fatalf("bitmaps: common %v, even %v, rare %v", isBitmap("common"), isBitmap("even"), isBitmap("rare"))
	}
	check := func() {
		t.Helper()
		for _, n := range []string{"common", "even", "rare", "comm", "mmon", "t1", "t99"} {
			checkText(t, mc, docs, n)
		}
		for _, w := range []string{"common", "even", "rare"} {
			var want []int32
			for n := range int32(records) {
				if slices.Contains(wordsOf(docs[mc.idString(n)].body), w) {
					want = append(want, n)
				}
			}
			l := mc.words.lists
			if got := l.list(entry(w)); !slices.Equal(got, want) || l.size(entry(w)) != len(want) {
				t.Fatalf("%s: %d records %v, want %v", w, l.size(entry(w)), got, want)
			}
		}
	}
	check()
	// Records leave "common" until one holds it: the bitmap follows, then
	// the word is that record's number.
	for i := range records - 1 {
		put(i, "gone")
		if i%97 == 0 {
			check()
		}
	}
	check()
	if e := entry("common"); e != int32(records-1) {
		t.Fatalf("common, in one record, held as %d", e)
	}
	put(records-1, "gone")
	if _, ok := mc.words.vocab["common"]; ok {
		t.Fatal("a word no record holds is kept")
	}
	check()
	// A key path's postings stay lists however dense.
	kc := NewColl(Spec{Keys: []string{"k"}})
	for i := range records {
		raw, _ := bson.Marshal(bson.M{"_id": fmt.Sprint(i), "k": "x"})
		kc.Put(raw)
	}
	if e := kc.keys["k"].m["x"]; kc.keys["k"].bitmap(-1-e) != nil || len(kc.keys["k"].get("x")) != records {
		t.Fatal("a key path's list became a bitmap")
	}
}
