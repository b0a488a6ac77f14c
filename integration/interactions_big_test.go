package integration

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/dossiers"
	"outreach/repo/notes"
)

// bigLog is one contact's interaction log of many entries, as seeded.
type bigLog struct {
	contact string
	// want holds every entry of the contact's log, newest first.
	want []bigEntry
}

type bigEntry struct {
	id   string
	date time.Time
}

// seedBigLog writes n interactions for one contact through the write path:
// n/4 notes, n/4 coverage and n/2 email messages (in threads of 100, with a
// few messages of each thread not involving the contact), plus notes of
// another contact. Dates fall on a minute grid so they collide and the id
// tie-break matters.
func seedBigLog(t testing.TB, store *repo.Store, n int) bigLog {
	t.Helper()
	ctx := audit.WithActor(context.Background(), repo.SystemActor("seed"))
	rng := rand.New(rand.NewPCG(1, 2))
	mk := func(coll string, f map[string]any) string {
		id, err := store.Fixture(ctx, coll, f)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	l := bigLog{contact: mk("contacts", map[string]any{"first_name": "Big", "last_name": "Log"})}
	other := mk("contacts", map[string]any{"first_name": "Other", "last_name": "Contact"})
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	date := func() time.Time { return base.Add(time.Duration(rng.IntN(n/2)) * time.Minute) }
	for i := 0; i < n/4; i++ {
		d := date()
		note, err := notes.Of(store).CreateNote(ctx, notes.NewNote{Title: "note", Content: "x", OccurredAt: &d, Links: notes.LinkTargets{ContactIDs: []string{l.contact}}})
		if err != nil {
			t.Fatal(err)
		}
		l.want = append(l.want, bigEntry{note.ID, d})
		d = date()
		l.want = append(l.want, bigEntry{mk("coverage", map[string]any{"title": "cov", "published_at": d, "type": "article", "contact_ids": []string{l.contact}}), d})
	}
	for got := 0; got < n/2; {
		var msgs []map[string]any
		for i := 0; i < 105 && got < n/2; i++ {
			d, id := date(), uuid.NewString()
			contacts := []string{l.contact}
			if i%21 == 20 {
				contacts = []string{other} // not the contact's interaction
			} else {
				l.want = append(l.want, bigEntry{id, d})
				got++
			}
			msgs = append(msgs, map[string]any{"id": id, "message_id": "<" + id + ">", "subject": "s", "date": d, "body_text": "b", "contact_ids": contacts})
		}
		mk("email_threads", map[string]any{"subject": "s", "contact_ids": []string{l.contact, other}, "messages": msgs})
	}
	for i := 0; i < n/50; i++ {
		d := date()
		if _, err := notes.Of(store).CreateNote(ctx, notes.NewNote{OccurredAt: &d, Links: notes.LinkTargets{ContactIDs: []string{other}}}); err != nil {
			t.Fatal(err)
		}
	}
	slices.SortFunc(l.want, func(a, b bigEntry) int {
		if c := b.date.Compare(a.date); c != 0 {
			return c
		}
		return cmp.Compare(b.id, a.id)
	})
	return l
}

// TestInteractionLogOverManyEntries seeds 4,000 interactions of one contact
// in the test command (its time is mostly the seeding and the cleanup's
// Verify, both in proportion), 10,000 in the long run (OUTREACH_LONG_TESTS=1).
func TestInteractionLogOverManyEntries(t *testing.T) {
	n := 4000
	if longRuns() {
		n = 10000
	}
	if testing.Short() {
		t.Skipf("seeds %d interactions", n)
	}
	parallelOnEmbedded(t)
	env := testenv.New(t)
	start := time.Now()
	l := seedBigLog(t, env.Store, n)
	t.Logf("seeded %d entries in %v", len(l.want), time.Since(start))
	if len(l.want) != n {
		t.Fatalf("seeded %d entries, want %d", len(l.want), n)
	}
	var got interactionLog
	start = time.Now()
	env.Admin().Must("get_interaction_log", M{"contact_id": l.contact}, &got)
	t.Logf("get_interaction_log over %d entries: %v", len(l.want), time.Since(start))
	var gotIDs, wantIDs []string
	for _, e := range got.Entries {
		gotIDs = append(gotIDs, fmt.Sprint(e.Date.Format(time.RFC3339Nano), " ", e.ID))
	}
	for _, e := range l.want[:50] {
		wantIDs = append(wantIDs, fmt.Sprint(e.date.Format(time.RFC3339Nano), " ", e.id))
	}
	if diff := gocmp.Diff(wantIDs, gotIDs); diff != "" {
		t.Errorf("the first 50 (-want +got):\n%s", diff)
	}
	if got.TotalEntries != len(l.want) || got.Showing != 50 {
		t.Errorf("total_entries %d showing %d; want %d and 50", got.TotalEntries, got.Showing, len(l.want))
	}
}

// BenchmarkInteractionLog compares, on one seeded store of 10,000
// interactions for one contact, the log (both sources merged, counted,
// sorted, trimmed to 50) against raw driver queries of the same data: the
// contact's 50 newest notes, and the three finds the merge builder starts
// from. Run: go test ./integration -run XXX -bench InteractionLog -benchtime 20x
func BenchmarkInteractionLog(b *testing.B) {
	store := testenv.OpenStore(b, testenv.Options{})
	l := seedBigLog(b, store, 10000)
	ctx := context.Background()
	raw := store.RawCollections()
	b.Run("interaction_log", func(b *testing.B) {
		for b.Loop() {
			got, err := dossiers.Of(store).InteractionLog(ctx, dossiers.InteractionQuery{ContactID: l.contact, Limit: 50})
			if err != nil || got.Showing != 50 {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw_find_notes_50", func(b *testing.B) {
		for b.Loop() {
			cur, err := raw.Database.Collection("notes").Find(ctx, bson.M{"links.contact_id": l.contact, "archived_at": nil},
				options.Find().SetSort(bson.D{{Key: "occurred_at", Value: -1}, {Key: "_id", Value: -1}}).SetLimit(50))
			if err != nil {
				b.Fatal(err)
			}
			var docs []bson.M
			if err := cur.All(ctx, &docs); err != nil || len(docs) != 50 {
				b.Fatal(err, len(docs))
			}
		}
	})
	b.Run("raw_three_finds", func(b *testing.B) {
		for b.Loop() {
			for _, q := range []struct {
				coll   string
				filter bson.M
				sort   string
			}{
				{"notes", bson.M{"links.contact_id": l.contact, "archived_at": nil}, "occurred_at"},
				{"coverage", bson.M{"contact_ids": l.contact, "archived_at": nil}, "published_at"},
				{"email_threads", bson.M{"messages.contact_ids": l.contact, "archived_at": nil}, ""},
			} {
				opts := options.Find()
				if q.sort != "" {
					opts.SetSort(bson.D{{Key: q.sort, Value: -1}, {Key: "_id", Value: -1}}).SetLimit(50)
				}
				cur, err := raw.Database.Collection(q.coll).Find(ctx, q.filter, opts)
				if err != nil {
					b.Fatal(err)
				}
				var docs []bson.M
				if err := cur.All(ctx, &docs); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
