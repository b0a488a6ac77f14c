package repo

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/embedded"
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
				one, err := ListPage[Outlet](ctx, s, CollOutlets, bson.M(ledger.CloneM(filter)), sort, limit, offset)
				if err != nil {
					t.Fatal(err)
				}
				*s.Internals().SerialWrites = false
				two, err := ListPage[Outlet](ctx, s, CollOutlets, bson.M(ledger.CloneM(filter)), sort, limit, offset)
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

func names(os []Outlet) []string {
	out := []string{}
	for _, o := range os {
		out = append(out, o.Name)
	}
	return out
}

// BenchmarkListPage compares the two ways listPage reads a full page and
// its total on the embedded store: one pass (every match read, the page
// decoded) against the page and a count (two scans). Run:
// go test ./repo -run XXX -bench ListPage -benchtime 10x
func BenchmarkListPage(b *testing.B) {
	s, ctx := openTestStoreB(b)
	const n = 600
	for i := range n {
		contact := "other"
		if i%3 == 0 {
			contact = "hot"
		}
		if _, err := s.Fixture(ctx, CollNotes, map[string]any{"title": fmt.Sprintf("n%d", i), "content": "a call about the launch plan and the embargoed briefing",
			"occurred_at": Now(), "links": []map[string]any{{"id": fmt.Sprint(i), "contact_id": contact}}}); err != nil {
			b.Fatal(err)
		}
	}
	filter := func() bson.M { return bson.M{"links.contact_id": "hot", "archived_at": nil} }
	sort := bson.D{{Key: "occurred_at", Value: -1}, {Key: "_id", Value: -1}}
	for _, mode := range []struct {
		name   string
		serial bool
	}{{"one_pass", true}, {"page_and_count", false}} {
		b.Run(mode.name, func(b *testing.B) {
			*s.Internals().SerialWrites = mode.serial
			defer func() { *s.Internals().SerialWrites = true }()
			for b.Loop() {
				p, err := ListPage[Note](ctx, s, CollNotes, filter(), sort, 50, 0)
				if err != nil || p.Total != n/3 || len(p.Items) != 50 {
					b.Fatal(err, p.Total, len(p.Items))
				}
			}
		})
	}
}

func openTestStoreB(b *testing.B) (*Store, context.Context) {
	ctx := audit.WithActor(context.Background(), SystemActor("list-bench"))
	es, err := embedded.Start(ctx, embedded.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(es.Close)
	s, err := Open(ctx, es.URI, "list_bench", Options{Logger: zerolog.Nop(), Exclusive: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(context.Background()) })
	return s, ctx
}
