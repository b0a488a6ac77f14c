package repo_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/embedded"
	"outreach/repo"
	"outreach/repo/notes"
)

// The list's two ways of reading a page, on notes: an external test of the
// core, which sits above every area.

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
		if _, err := s.Fixture(ctx, repo.CollNotes, map[string]any{"title": fmt.Sprintf("n%d", i), "content": "a call about the launch plan and the embargoed briefing",
			"occurred_at": repo.Now(), "links": []map[string]any{{"id": fmt.Sprint(i), "contact_id": contact}}}); err != nil {
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
				p, err := repo.ListPage[notes.Note](ctx, s, repo.CollNotes, filter(), sort, 50, 0)
				if err != nil || p.Total != n/3 || len(p.Items) != 50 {
					b.Fatal(err, p.Total, len(p.Items))
				}
			}
		})
	}
}

func openTestStoreB(b *testing.B) (*repo.Store, context.Context) {
	ctx := audit.WithActor(context.Background(), repo.SystemActor("list-bench"))
	es, err := embedded.Start(ctx, embedded.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(es.Close)
	s, err := repo.Open(ctx, es.URI, "list_bench", repo.Options{Logger: zerolog.Nop(), Exclusive: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(context.Background()) })
	return s, ctx
}
