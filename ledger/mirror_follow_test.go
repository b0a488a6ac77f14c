package ledger

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
)

// openFollowers opens n engines on one new database of the server at
// MONGODB_URI, each keeping the service's own index by following the
// change log, in check mode, as n instances of the service would.
func openFollowers(t *testing.T, n int) []*Engine {
	t.Helper()
	uri := os.Getenv("MONGODB_URI")
	if uri == "" {
		t.Skip("the index that follows the change log runs where several processes write one store: set MONGODB_URI to a server (the embedded store is written by one process, which keeps its index as it writes)")
	}
	db := "outreach_follow_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	var out []*Engine
	for range n {
		s, err := openDB(context.Background(), uri, db, Options{Logger: zerolog.Nop(), ServerIndex: true, IndexCheck: true,
			ServerIndexWait: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeDB(context.Background(), s) })
		if err := s.IndexesReady(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s.serialWrites {
			t.Skip("the server at MONGODB_URI has no atomic filtered writes: the ordered protocol, which several processes share, does not run there")
		}
		out = append(out, s)
	}
	return out
}

// createNote writes a note of contact through the write path.
func createNote(t *testing.T, s *Engine, contact string) string {
	t.Helper()
	id := uuid.NewString()
	after := bson.M{"_id": id, "archived_at": nil, "content": "call about " + contact, "occurred_at": now(),
		"links": bson.A{bson.M{"contact_id": contact}}}
	if _, err := s.write(testCtx(), Mutation{Coll: collNotes, ID: id, Action: audit.ActionCreate, After: after}); err != nil {
		t.Fatal(err)
	}
	return id
}

// indexAnswer asks s's index (not the store) for the notes of contact.
func indexAnswer(t *testing.T, s *Engine, contact string) (ids []string, ok bool) {
	t.Helper()
	ids, _, ok, err := s.mirrorIDs(context.Background(), mirrorQuery{coll: collNotes, filter: bson.M{"links.contact_id": contact}})
	if err != nil {
		t.Fatal(err) // check mode: the index answered differently from the store
	}
	return ids, ok
}

// TestServerIndexReadsItsWritesAcrossInstances: two instances write in
// turn, and each write is read back at once through the other one's index
// (the read waits until that index has followed the log to the store's
// counter), which check mode compares with the store on every read; the
// indexes then hold every record as stored.
func TestServerIndexReadsItsWritesAcrossInstances(t *testing.T) {
	ss := openFollowers(t, 2)
	contact := "c-" + uuid.NewString()[:8]
	var want []string
	for i := range 20 {
		w, r := ss[i%2], ss[(i+1)%2]
		want = append(want, createNote(t, w, contact))
		ids, ok := indexAnswer(t, r, contact)
		if !ok {
			t.Fatalf("write %d: the other instance's index did not answer", i)
		}
		if len(ids) != len(want) {
			t.Fatalf("write %d: the other instance's index holds %d notes of the contact, want %d", i, len(ids), len(want))
		}
	}
	// An update and an archive through one instance, read through the other.
	if _, err := modify(testCtx(), ss[0], collUsers, mustUser(t, ss[1]).ID, audit.ActionUpdate, func(u *User) error { u.Name = "renamed"; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		v, err := s.mirrorViolations(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(v) > 0 {
			t.Fatalf("the index disagrees with the store: %v", v)
		}
		if h := s.Health(); !h.IndexFollowing || h.IndexPosition < h.IndexCounter || h.IndexBuilding {
			t.Errorf("status after the writes: %+v", h)
		}
	}
}

// mustUser creates a user through s.
func mustUser(t *testing.T, s *Engine) *User {
	t.Helper()
	u, err := s.CreateUser(testCtx(), "Ada", fmt.Sprintf("ada-%s@example.com", uuid.NewString()[:6]), "")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestServerIndexWaitsAtAGap: a writer that took a seq and stopped before
// writing its entry leaves a gap below the entries written after it. The
// other instances must not answer from an index that has not resolved it:
// they answer from the store (and say they are behind) until the gap is old
// enough to be taken as abandoned. A gap filled late after all (a slow
// writer) holds the index back again until that entry is settled.
func TestServerIndexWaitsAtAGap(t *testing.T) {
	defer func(b time.Duration) { gapBound = b }(gapBound)
	gapBound = 3 * time.Second
	ss := openFollowers(t, 2)
	a, b := ss[0], ss[1]
	for _, s := range ss {
		s.mirror.follow.wait = 100 * time.Millisecond
	}
	contact := "c-" + uuid.NewString()[:8]
	createNote(t, a, contact)
	if _, ok := indexAnswer(t, b, contact); !ok {
		t.Fatal("before the gap: the index did not answer")
	}
	// The killed writer: a seq taken, no entry.
	gap, err := a.reserveSeqs(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	note := createNote(t, a, contact)
	reads := b.Health().IndexStoreReads
	if _, ok := indexAnswer(t, b, contact); ok {
		t.Fatalf("the index answered past the unresolved gap at seq %d", gap)
	}
	if b.Health().IndexStoreReads == reads {
		t.Error("a read that found the index behind was not counted")
	}
	// The domain's read still answers, from the store.
	var notes []bson.M
	if err := b.findAll(context.Background(), collNotes, bson.M{"links.contact_id": contact}, nil, &notes); err != nil || len(notes) != 2 {
		t.Fatalf("the read through the store: %d notes, %v", len(notes), err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !b.Health().IndexBehind {
		if time.Now().After(deadline) {
			t.Fatal("the status never said the index is behind")
		}
		indexAnswer(t, b, contact)
		time.Sleep(100 * time.Millisecond)
	}
	// Once the gap is old enough, the index passes it and answers again.
	for {
		ids, ok := indexAnswer(t, b, contact)
		if ok {
			if len(ids) != 2 {
				t.Fatalf("past the gap: %d notes, want 2", len(ids))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the index never passed the abandoned gap")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if h := b.Health(); h.IndexBehind {
		t.Errorf("still behind once current: %+v", h)
	}
	// A second gap, passed over, then filled after all by a slow writer:
	// its entry pending holds the index back; settled, it is applied.
	late, err := a.reserveSeqs(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	createNote(t, a, contact)
	for {
		if _, ok := indexAnswer(t, b, contact); ok {
			break
		}
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatal("the index never passed the second gap")
		}
		time.Sleep(100 * time.Millisecond)
	}
	id := uuid.NewString()
	e := audit.Entry{ID: uuid.NewString(), Seq: late, At: time.Now().UTC(), State: audit.StatePending, Collection: collNotes, RecordID: id,
		Action: audit.ActionCreate, VersionAfter: 1, UserID: "u-test", AgentID: "a-test", SessionID: "s-test", Tool: "test",
		After: bson.M{"_id": id, "archived_at": nil, "content": "late", "occurred_at": now(), "links": bson.A{bson.M{"contact_id": contact}}}}
	if err := a.insertEntry(context.Background(), &e); err != nil {
		t.Fatal(err)
	}
	if e.Seq != late {
		t.Fatalf("the late entry took seq %d, want the passed-over %d", e.Seq, late)
	}
	if _, ok := indexAnswer(t, b, contact); ok {
		t.Fatal("the index answered while a late entry below its position is pending")
	}
	if st, err := a.land(context.Background(), e, Mutation{}); err != nil || st != audit.StateApplied {
		t.Fatalf("landing the late entry: %s, %v", st, err)
	}
	ids, ok := indexAnswer(t, b, contact)
	if !ok || len(ids) != 4 {
		t.Fatalf("after the late entry settled: %d notes (answered %v), want 4", len(ids), ok)
	}
	_ = note
	for _, s := range ss {
		v, err := s.mirrorViolations(context.Background())
		if err != nil || len(v) > 0 {
			t.Fatalf("agreement: %v %v", v, err)
		}
	}
}

// TestReadPointSeesTheProcessOwnWrites: the reads of one call ask the
// store's counter once (WithReadPoint); a write of the same process ended
// since, from any goroutine, makes the next read ask again, so a call
// reads its own writes.
func TestReadPointSeesTheProcessOwnWrites(t *testing.T) {
	ss := openFollowers(t, 1)
	s := ss[0]
	contact := "c-" + uuid.NewString()[:8]
	createNote(t, s, contact)
	call := WithReadPoint(context.Background())
	counter := func() int64 {
		c, err := s.readCounter(call)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := counter()
	if again := counter(); again != first {
		t.Fatalf("the read point moved without a write: %d, then %d", first, again)
	}
	done := make(chan struct{})
	go func() { // another goroutine of the process, with a context of its own
		defer close(done)
		createNote(t, s, contact)
	}()
	<-done
	if after := counter(); after <= first {
		t.Fatalf("after a write of the process the read point stayed at %d", after)
	}
	ids, _, ok, err := s.mirrorIDs(call, mirrorQuery{coll: collNotes, filter: bson.M{"links.contact_id": contact}})
	if err != nil || !ok || len(ids) != 2 {
		t.Fatalf("the call's read after the write: %d notes (answered %v, %v), want 2", len(ids), ok, err)
	}
}
