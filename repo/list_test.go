package repo

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/ledger"
)

// TestListPageAnswersAlike checks that the list read in one pass (the
// embedded store's) and the page-then-count read (every other store) give
// the same page and the same total for every limit and offset around the
// list's ends, and that both equal the store's own count.
func TestListPageAnswersAlike(t *testing.T) {
	s, ctx := openTestStore(t)
	for i := range 7 {
		if _, err := s.Fixture(ctx, CollOutlets, map[string]any{"name": fmt.Sprintf("o%d", i), "tier": i % 2}); err != nil {
			t.Fatal(err)
		}
	}
	sort := bson.D{{Key: "name", Value: 1}, {Key: "_id", Value: 1}}
	for _, filter := range []bson.M{{}, {"tier": 1}, {"name": "none"}} {
		want, err := s.coll(CollOutlets).CountDocuments(ctx, filter)
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int{1, 3, 4, 7, 50} {
			for _, offset := range []int{0, 1, 3, 4, 6, 7, 8, 20} {
				name := fmt.Sprintf("filter %v limit %d offset %d", filter, limit, offset)
				*s.Internals().SerialWrites = true
				one, err := ListPage[outlet](ctx, s, CollOutlets, bson.M(ledger.CloneM(filter)), sort, limit, offset)
				if err != nil {
					t.Fatal(err)
				}
				*s.Internals().SerialWrites = false
				two, err := ListPage[outlet](ctx, s, CollOutlets, bson.M(ledger.CloneM(filter)), sort, limit, offset)
				*s.Internals().SerialWrites = true
				if err != nil {
					t.Fatal(err)
				}
				if one.Total != want || two.Total != want {
					t.Errorf("%s: totals %d (one pass) and %d (page, count); the store counts %d", name, one.Total, two.Total, want)
				}
				if diff := cmp.Diff(names(one.Items), names(two.Items)); diff != "" {
					t.Errorf("%s: pages differ (-one pass +page, count):\n%s", name, diff)
				}
				if wantLen := max(0, min(limit, int(want)-offset)); len(one.Items) != wantLen {
					t.Errorf("%s: %d items; want %d", name, len(one.Items), wantLen)
				}
			}
		}
	}
}

// outlet is what the test reads of an outlet (the directory's record, an
// area above the core).
type outlet struct {
	Meta `bson:",inline"`
	Name string `bson:"name"`
}

func names(os []outlet) []string {
	out := []string{}
	for _, o := range os {
		out = append(out, o.Name)
	}
	return out
}

func TestCheckKeysAtAnyDepth(t *testing.T) {
	for _, tc := range []struct {
		obj   map[string]any
		field string
	}{
		{map[string]any{"ok": 1, "$bad": 1}, "f"},
		{map[string]any{"a": map[string]any{"b": map[string]any{"c.d": 1}}}, "f.a.b"},
		{map[string]any{"a": []any{1, map[string]any{"": 1}}}, "f.a"},
		{map[string]any{"a": []any{[]any{map[string]any{"$x": 1}}}}, "f.a"},
	} {
		err := CheckFreeForm("f", tc.obj)
		e, ok := err.(*Error)
		if !ok || e.Code != CodeInvalid || e.Field != tc.field {
			t.Errorf("CheckFreeForm(%v) = %v; want invalid_argument on %s", tc.obj, err, tc.field)
		}
	}
	if err := CheckFreeForm("f", map[string]any{"a": []any{map[string]any{"b": "$not a key, a value"}}, "x-y": "ok"}); err != nil {
		t.Errorf("good keys refused: %v", err)
	}
}
