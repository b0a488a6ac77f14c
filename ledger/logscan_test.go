package ledger

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
)

// TestChangesInOrderHoldsABatch: the change log is read in seq order (the
// same entries, in the same order, as the store's sorted find) while the
// store hands over at most a batch of entries at once: a span longer than
// byIDMost through the spill file, a shorter one by _id where the store
// has look-ups, and either way without them. The sorted find it replaces
// made the embedded store hold every entry it matched.
func TestChangesInOrderHoldsABatch(t *testing.T) {
	s, _ := openCrashStore(t, t.TempDir())
	defer s.Close(testCtx())
	ctx := testCtx()
	const notes = 160
	for i := range notes {
		at := now()
		id := uuid.NewString()
		m := Mutation{Coll: collNotes, ID: id, Action: audit.ActionCreate, After: bson.M{"_id": id, "created_at": at, "updated_at": at,
			"archived_at": nil, "title": fmt.Sprintf("Note %d", i), "type": "other", "links": bson.A{}}}
		if _, err := s.write(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	sorted := func(after, upto int64) []string {
		cur, err := s.coll(collChangeLog).Find(ctx, bson.M{"seq": bson.M{"$gt": after, "$lte": upto}}, options.Find().SetSort(bson.D{{Key: "seq", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for cur.Next(ctx) {
			out = append(out, cur.Current.Lookup("_id").StringValue())
		}
		if err := cur.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	defer func(b, m int) { logBatch, byIDMost, logHeld = b, m, nil }(logBatch, byIDMost)
	logBatch, byIDMost = 25, 130 // the whole log (160) spilled, seq 41 on (120) by _id
	read := func(after, upto int64) (ids []string, held int) {
		logHeld = func(n int) { held = max(held, n) }
		err := s.ChangesInOrder(ctx, after, upto, func(raw bson.Raw) error {
			ids = append(ids, raw.Lookup("_id").StringValue())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return ids, held
	}
	same := func(what string, got, want []string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %d entries in seq order, the sorted find %d; first differing at %v", what, len(got), len(want), firstDiff(got, want))
		}
	}
	all := sorted(math.MinInt64, math.MaxInt64)
	if len(all) != notes {
		t.Fatalf("%d change entries for %d notes", len(all), notes)
	}
	got, held := read(math.MinInt64, math.MaxInt64)
	same("the whole log", got, all)
	if held > logBatch {
		t.Errorf("the read in seq order made the store hold %d entries at once; at most a batch (%d)", held, logBatch)
	}
	got, held = read(40, 110)
	same("seq 41 to 110", got, sorted(40, 110))
	if held > logBatch {
		t.Errorf("a span: %d entries held at once, at most %d", held, logBatch)
	}
	// The first pending entry in a span, with the look-ups and without.
	top, err := s.changeCounter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := func() (a, b int64, found bool) {
		if _, found, err := s.FirstPending(ctx, 0, math.MaxInt64); err != nil || found {
			t.Fatalf("a pending entry before any was written: %v %v", found, err)
		}
		for _, n := range []int64{top + 7, top + 3} {
			if _, err := s.coll(collChangeLog).InsertOne(ctx, bson.M{"_id": uuid.NewString(), "seq": n, "state": audit.StatePending,
				"collection": collNotes, "record_id": uuid.NewString(), "action": audit.ActionCreate}); err != nil {
				t.Fatal(err)
			}
		}
		a, found, err := s.FirstPending(ctx, 0, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err = s.FirstPending(ctx, top+3, top+10)
		if err != nil {
			t.Fatal(err)
		}
		_, none, err := s.FirstPending(ctx, 0, top+2)
		if err != nil || none {
			t.Errorf("a pending entry up to %d: %v %v", top+2, none, err)
		}
		return a, b, found
	}
	if a, b, found := first(); !found || a != top+3 || b != top+7 {
		t.Errorf("first pending: %d (found %v) and above %d: %d; want %d and %d", a, found, top+3, b, top+3, top+7)
	}
	if _, err := s.coll(collChangeLog).DeleteMany(ctx, bson.M{"state": audit.StatePending}); err != nil {
		t.Fatal(err)
	}
	// Without the look-ups (a server, a store in memory): the spill file
	// for any span.
	s.lookups = nil
	for _, span := range [][2]int64{{math.MinInt64, math.MaxInt64}, {40, 110}} {
		got, held = read(span[0], span[1])
		same(fmt.Sprintf("without look-ups, %v", span), got, sorted(span[0], span[1]))
		if held > logBatch {
			t.Errorf("without look-ups: %d entries handed over at once, at most %d", held, logBatch)
		}
	}
	if a, b, found := first(); !found || a != top+3 || b != top+7 {
		t.Errorf("first pending through the store: %d (found %v) and above %d: %d; want %d and %d", a, found, top+3, b, top+3, top+7)
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
