package integration

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/repo"
)

type seeded struct {
	contact string
	// want holds every entry of the contact's log: id and date.
	want []seededEntry
}

type seededEntry struct {
	id   string
	date time.Time
}

// seedBig writes n interactions for one contact, mixed across notes,
// coverage and email messages (in threads of ten), with noise for another
// contact. Contacts, notes and coverage come through their tools over MCP;
// email threads, which have no tools, through the write path.
func seedBig(t testing.TB, env *testenv.Env, n int) seeded {
	t.Helper()
	ctx := audit.WithActor(context.Background(), repo.SystemActor("seed"))
	rng := rand.New(rand.NewPCG(1, 2))
	c := env.Admin()
	// call runs from the seeding goroutines too: it reports with t.Error,
	// never t.Fatal, and returns "" on failure.
	call := func(tool string, args M) string {
		raw, e := c.Call(tool, args)
		if e != nil {
			t.Errorf("%s: %+v", tool, e)
			return ""
		}
		var out struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(raw, &out); err != nil || out.ID == "" {
			t.Errorf("%s: no id in %s", tool, raw)
		}
		return out.ID
	}
	s := seeded{contact: mk(t, c, "create_contact", M{"first_name": "Big", "last_name": "Log"})}
	other := mk(t, c, "create_contact", M{"first_name": "Other", "last_name": "Contact"})
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex // guards rng and s.want: the jobs run on two goroutines
	// Dates collide on purpose (a minute grid), so the id tie-break matters.
	date := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return base.Add(time.Duration(rng.IntN(n/2)) * time.Minute)
	}
	add := func(id string, d time.Time) {
		mu.Lock()
		s.want = append(s.want, seededEntry{id, d})
		mu.Unlock()
	}
	type job func()
	var jobs []job
	for len(jobs)*1 < n {
		switch len(jobs) % 3 {
		case 0:
			jobs = append(jobs, func() {
				d := date()
				if id := call("create_note", M{"title": "note", "content": "x", "occurred_at": d.Format(time.RFC3339), "contact_ids": []string{s.contact}}); id != "" {
					add(id, d)
				}
			})
		case 1:
			jobs = append(jobs, func() {
				d := date()
				if id := call("create_coverage", M{"title": "cov", "published_at": d.Format(time.RFC3339), "type": "article", "contact_ids": []string{s.contact}}); id != "" {
					add(id, d)
				}
			})
		case 2:
			jobs = append(jobs, func() {
				var msgs []map[string]any
				for i := 0; i < 10; i++ {
					d := date()
					id := uuid.NewString()
					contacts := []string{s.contact}
					if i%5 == 4 {
						contacts = []string{other} // a message of the thread without our contact
					} else {
						add(id, d.Truncate(time.Millisecond))
					}
					msgs = append(msgs, map[string]any{"id": id, "message_id": "<" + id + ">", "subject": "s", "date": d, "body_text": "b", "contact_ids": contacts})
				}
				if _, err := env.Store.Fixture(ctx, "email_threads", map[string]any{"subject": "s", "contact_ids": []string{s.contact, other}, "messages": msgs}); err != nil {
					t.Error(err)
				}
			})
		}
		if len(jobs)%3 == 0 {
			// the three kinds give 1 + 1 + 8 entries: stop when n is reached
			if len(jobs)/3*10 >= n {
				break
			}
		}
	}
	var wg sync.WaitGroup
	ch := make(chan job)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				j()
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	for i := 0; i < n/20; i++ { // noise: another contact's notes
		d := date()
		mk(t, c, "create_note", M{"occurred_at": d.Format(time.RFC3339), "contact_ids": []string{other}})
	}
	slices.SortFunc(s.want, func(a, b seededEntry) int {
		if c := b.date.Compare(a.date); c != 0 {
			return c
		}
		return cmp.Compare(b.id, a.id)
	})
	return s
}

func TestInteractionLogOverTenThousandEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 10,000 records")
	}
	env := testenv.New(t)
	start := time.Now()
	s := seedBig(t, env, 10000)
	t.Logf("seeded %d entries in %v", len(s.want), time.Since(start))
	if len(s.want) < 10000 {
		t.Fatalf("seeded %d entries, want 10000", len(s.want))
	}
	c := env.Admin()
	var l interactionLog
	start = time.Now()
	c.Must("get_interaction_log", M{"contact_id": s.contact}, &l)
	t.Logf("get_interaction_log over %d entries: %v", len(s.want), time.Since(start))
	var got, want []string
	for _, e := range l.Entries {
		got = append(got, fmt.Sprint(e.Date.Format(time.RFC3339Nano), " ", e.ID))
	}
	for _, e := range s.want[:50] {
		want = append(want, fmt.Sprint(e.date.Format(time.RFC3339Nano), " ", e.id))
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("the first 50 (-want +got):\n%s", diff)
	}
	if l.TotalEntries != len(s.want) || l.Showing != 50 {
		t.Errorf("total_entries %d showing %d; want %d and 50", l.TotalEntries, l.Showing, len(s.want))
	}
}
