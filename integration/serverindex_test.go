package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestServerIndexTwoInstances runs two service processes on one server
// (MONGODB_URI), each keeping the service's own index by following the
// change log, with every answer of the index compared with the store's
// (check mode). Writes go to them in turn, as a round-robin balancer sends
// them, and each is read back at once through the other instance. Then a
// writer stops between taking a change seq and writing its entry (what a
// process killed there leaves in the store: the counter moved, no entry):
// the other instance must not answer from its index, which has not followed
// past that seq, but from the store, and say so in its status, until the
// seq is old enough to be taken as abandoned.
func TestServerIndexTwoInstances(t *testing.T) {
	uri := os.Getenv("MONGODB_URI")
	if uri == "" {
		t.Skip("two instances share a store only on a server: set MONGODB_URI (the embedded store is held by one process)")
	}
	db := "outreach_si_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	env := []string{"OUTREACH_DB=" + db, "OUTREACH_SERVER_INDEX=on", "OUTREACH_INDEX_CHECK=1"}
	p1 := startServer(t, dataDir(t), env...)
	if p1.FirstKey == "" {
		t.Fatalf("no admin key printed on the first start:\n%s", p1.stdout)
	}
	// The second instance waits up to 2 s for its index (a loaded machine
	// follows one change well within it) and exports its metrics.
	p2 := startServer(t, dataDir(t), append(env, "OUTREACH_SERVER_INDEX_WAIT=2s", "OUTREACH_METRICS_LISTEN=127.0.0.1:0")...)
	procs := []*proc{p1, p2}
	for _, p := range procs {
		untilReady(t, p, time.Minute)
	}
	m := regexp.MustCompile(`"url":"(http://[^"]+)/metrics"[^\n]*"message":"serving metrics"`).FindStringSubmatch(p2.stderr.String())
	if m == nil {
		t.Fatalf("no metrics listener in the log:\n%s", p2.stderr)
	}
	reads := func(from string) float64 {
		for _, x := range scrape(t, m[1], "")["outreach_index_reads_total"].GetMetric() {
			if x.GetLabel()[0].GetValue() == from {
				return x.GetCounter().GetValue()
			}
		}
		t.Fatalf("outreach_index_reads_total{from=%q} not exported", from)
		return 0
	}
	fromIndex, fromStore := reads("index"), reads("store")
	conns := []*mcpConn{mustDial(t, p1.URL, p1.FirstKey), mustDial(t, p2.URL, p1.FirstKey)}
	for i, c := range conns {
		if st := serviceIndex(t, c); st.Index != "current" || !st.IndexFollows {
			t.Fatalf("instance %d: get_service_info says the index is %q (follows %v), want current, following the change log", i+1, st.Index, st.IndexFollows)
		}
	}
	var contact struct{ ID string }
	conns[0].must(t, "create_contact", map[string]any{"first_name": "Lois", "last_name": "Lane"}, &contact)

	var notes []string
	for i := range 12 {
		w, r := conns[i%2], conns[(i+1)%2]
		var n struct{ ID string }
		w.must(t, "create_note", map[string]any{"title": fmt.Sprint("call ", i), "contact_ids": []string{contact.ID}}, &n)
		notes = append(notes, n.ID)
		if i%3 == 2 {
			// An update through the writer, read back through the other.
			w.must(t, "update_note", map[string]any{"id": n.ID, "title": fmt.Sprint("call ", i, " (edited)")}, nil)
		}
		got := listNotes(t, r, contact.ID)
		if len(got) != len(notes) || got[0].ID != n.ID {
			t.Fatalf("write %d through instance %d: instance %d lists %d notes, newest %v; want %d, newest %s", i, i%2+1, (i+1)%2+1, len(got), got[:min(1, len(got))], len(notes), n.ID)
		}
		if i%3 == 2 && !strings.HasSuffix(got[0].Title, "(edited)") {
			t.Fatalf("write %d: the other instance lists the note as %q, before its update", i, got[0].Title)
		}
	}

	// Instance 2 answered its six lists from its index, every one after
	// waiting for the write just made on instance 1.
	if got := reads("index") - fromIndex; got < 6 {
		t.Errorf("instance 2's index answered %v reads of its six lists, want at least 6", got)
	}
	if got := reads("store") - fromStore; got != 0 {
		t.Errorf("instance 2 read the store %v times: its index did not follow instance 1's writes within 2 s", got)
	}

	// The writer that stopped after taking its seq.
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.Database(db).Collection("counters").UpdateOne(ctx, bson.M{"_id": "change_log"}, bson.M{"$inc": bson.M{"seq": 1}}); err != nil {
		t.Fatal(err)
	}
	var n struct{ ID string }
	conns[0].must(t, "create_note", map[string]any{"title": "after the gap", "contact_ids": []string{contact.ID}}, &n)
	notes = append(notes, n.ID)
	// Read at once through the other instance: its index has not passed the
	// gap, so the answer comes from the store, with the new note in it.
	if got := listNotes(t, conns[1], contact.ID); len(got) != len(notes) || got[0].ID != n.ID {
		t.Fatalf("past an unresolved seq: the other instance lists %d notes, newest %v; want %d, newest %s (an answer from a partial index)", len(got), got[:min(1, len(got))], len(notes), n.ID)
	}
	// Its status says the index is behind while the seq is unresolved...
	sawBehind := false
	deadline := time.Now().Add(9 * time.Second)
	for time.Now().Before(deadline) && !sawBehind {
		listNotes(t, conns[1], contact.ID)
		code, body := readyz(t, p2)
		if code == http.StatusServiceUnavailable && strings.Contains(body, "index behind") {
			sawBehind = serviceIndex(t, conns[1]).Index == "behind"
		}
		time.Sleep(200 * time.Millisecond)
	}
	if reads("store") == fromStore {
		t.Error("no read of instance 2 went to the store while its index was behind")
	}
	if !sawBehind {
		t.Error("the other instance's status never said its index is behind while a seq below its counter was unresolved")
	}
	// ...and, once the seq is taken as abandoned, the index answers again.
	for _, p := range procs {
		untilReady(t, p, time.Minute)
	}
	for i, c := range conns {
		if st := serviceIndex(t, c); st.Index != "current" {
			t.Errorf("instance %d: index %q after the abandoned seq, want current", i+1, st.Index)
		}
		if got := listNotes(t, c, contact.ID); len(got) != len(notes) {
			t.Errorf("instance %d: %d notes, want %d", i+1, len(got), len(notes))
		}
	}
}

type listedNote struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

func listNotes(t *testing.T, c *mcpConn, contact string) []listedNote {
	t.Helper()
	var out struct{ Notes []listedNote }
	c.must(t, "list_notes", map[string]any{"contact_id": contact, "limit": 100}, &out)
	return out.Notes
}

type indexState struct {
	Index        string `json:"index"`
	IndexFollows bool   `json:"index_follows"`
}

func serviceIndex(t *testing.T, c *mcpConn) indexState {
	t.Helper()
	var out struct{ Store indexState }
	c.must(t, "get_service_info", nil, &out)
	return out.Store
}

func readyz(t *testing.T, p *proc) (int, string) {
	t.Helper()
	resp, err := http.Get(p.Base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// untilReady waits until p's /readyz answers 200.
func untilReady(t *testing.T, p *proc, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, body := readyz(t, p)
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after %v: %s", code, within, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
