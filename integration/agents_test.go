package integration

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"outreach/integration/testenv"
	"outreach/repo"
)

// TestSixteenAgentsOnOverlappingRecords: sixteen agents, each with its own
// key and session, link contacts to the same few notes and opportunities at
// once (each link is a read-modify-write of the record's array). No update
// may be lost: every acknowledged link is in the record, nothing else is,
// and each agent's session holds exactly one change entry per acknowledged
// call. A call refused as a retryable conflict is retried, as an agent
// would; one that still fails wrote nothing.
func TestSixteenAgentsOnOverlappingRecords(t *testing.T) {
	const agents = 16
	ops := 4
	if longRuns() {
		ops = 25
	}
	env := testenv.New(t)
	admin := env.Admin()
	outlet := mk(t, admin, "create_outlet", M{"name": "Shared"})
	notes := make([]string, 4)
	for i := range notes {
		notes[i] = mk(t, admin, "create_note", M{"title": fmt.Sprint("shared ", i), "outlet_ids": []string{outlet}})
	}
	opps := make([]string, 2)
	for i := range opps {
		opps[i] = mk(t, admin, "create_opportunity", M{"title": fmt.Sprint("shared ", i), "outlet_id": outlet})
	}
	contacts := make([]string, agents*ops)
	for i := range contacts {
		contacts[i] = mk(t, admin, "create_contact", M{"first_name": "C", "last_name": fmt.Sprint(i)})
	}
	clients := make([]*testenv.Client, agents)
	for a := range clients {
		clients[a] = env.Client(env.Key("read", "write"), fmt.Sprintf("agent-%02d", a))
	}

	var (
		mu        sync.Mutex
		linked    = map[string][]string{} // record → contacts acknowledged
		acked     = make([]int, agents)
		retries   int
		abandoned int
		wg        sync.WaitGroup
	)
	start := time.Now()
	for a, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ops {
				contact := contacts[a*ops+j]
				tool, record, args := "add_note_link", notes[(a+j)%len(notes)], M{}
				args["note_id"], args["contact_id"] = record, contact
				if j%2 == 1 {
					tool, record = "add_opportunity_contact", opps[(a+j)%len(opps)]
					args = M{"opportunity_id": record, "contact_id": contact}
				}
				for try := 0; ; try++ {
					_, e := c.Call(tool, args)
					if e == nil {
						mu.Lock()
						linked[record] = append(linked[record], contact)
						acked[a]++
						mu.Unlock()
						break
					}
					if e.Code != repo.CodeConflict || !e.Retryable {
						t.Errorf("agent %d: %s: %s: %s", a, tool, e.Code, e.Message)
						return
					}
					mu.Lock()
					if try == 20 {
						abandoned++
						mu.Unlock()
						break
					}
					retries++
					mu.Unlock()
					time.Sleep(time.Duration(try+1) * 5 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	total := 0
	for _, n := range acked {
		total += n
	}
	t.Logf("%d agents, %d calls each: %d acknowledged, %d conflicts retried, %d abandoned, in %v",
		agents, ops, total, retries, abandoned, elapsed.Round(time.Millisecond))

	for _, id := range notes {
		var n struct {
			Links []struct {
				ContactID string `json:"contact_id"`
			}
		}
		admin.Must("get_note", M{"id": id}, &n)
		var got []string
		for _, l := range n.Links {
			if l.ContactID != "" {
				got = append(got, l.ContactID)
			}
		}
		sameSet(t, "note "+id, got, linked[id])
	}
	for _, id := range opps {
		var o opportunity
		admin.Must("get_opportunity", M{"id": id}, &o)
		sameSet(t, "opportunity "+id, o.ContactIDs, linked[id])
	}
	for a := range clients {
		var log struct{ Total int }
		admin.Must("get_change_log", M{"session_id": fmt.Sprintf("agent-%02d", a), "limit": 1}, &log)
		if log.Total != acked[a] {
			t.Errorf("agent %d: %d change entries in its session; want %d, one per acknowledged call", a, log.Total, acked[a])
		}
	}
}

func sameSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	got, want = slices.Clone(got), slices.Clone(want)
	sort.Strings(got)
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: linked contacts differ from the acknowledged links (-want +got):\n%s", what, diff)
	}
}
