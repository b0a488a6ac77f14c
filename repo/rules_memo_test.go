package repo_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	mongoevent "go.mongodb.org/mongo-driver/v2/event"

	"outreach/audit"
	"outreach/embedded"
	"outreach/repo"
	"outreach/repo/directory"
	"outreach/repo/notes"
)

// TestRollbackChecksEachLinkedRecordOnce: the rules a session rollback
// keeps are checked against one view of the records, which reads a record
// that many steps link to once, not once per step (a thousand notes of one
// contact rolled back read the contact a thousand times before).
func TestRollbackChecksEachLinkedRecordOnce(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("counts the reads of the embedded store")
	}
	ctx := context.Background()
	es, err := embedded.Start(ctx, embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(es.Close)
	var contactID atomic.Value
	contactID.Store("")
	var reads atomic.Int64
	mon := &mongoevent.CommandMonitor{Started: func(_ context.Context, e *mongoevent.CommandStartedEvent) {
		if e.CommandName != "find" {
			return
		}
		if c, ok := e.Command.Lookup("find").StringValueOK(); !ok || c != repo.CollContacts {
			return
		}
		if id, ok := e.Command.Lookup("filter", "_id").StringValueOK(); ok && id == contactID.Load().(string) {
			reads.Add(1)
		}
	}}
	s, err := repo.Open(ctx, es.URI, "rulesmemo", repo.Options{Logger: zerolog.Nop(), Exclusive: true, PrepareStore: es.IndexIDs, Monitor: mon})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	waitIndexes(t, s)
	a := audit.Actor{UserID: "u1", AgentID: "agent-1", KeyID: "key-1", Tool: "test", SessionID: "memo-1"}
	work := audit.WithActor(ctx, a)
	c, err := directory.Of(s).CreateContact(audit.WithActor(ctx, audit.Actor{UserID: "u1", AgentID: "agent-1", KeyID: "key-1", Tool: "test", SessionID: "memo-0"}),
		directory.ContactFields{FirstName: repo.PtrTo("Memo"), LastName: repo.PtrTo("Contact")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const noteCount = 6
	for i := 0; i < noteCount; i++ {
		if _, err := notes.Of(s).CreateNote(work, notes.NewNote{Title: fmt.Sprint("note ", i), Links: notes.LinkTargets{ContactIDs: []string{c.ID}}}); err != nil {
			t.Fatal(err)
		}
	}
	contactID.Store(c.ID)
	res, err := s.RollbackSession(audit.WithActor(ctx, audit.Actor{UserID: "u1", AgentID: "agent-1", KeyID: "key-1", Tool: "test", SessionID: "memo-2"}), "memo-1", repo.RollbackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != noteCount {
		t.Fatalf("%d steps rolled back; want %d", len(res.Steps), noteCount)
	}
	if n := reads.Load(); n > 1 {
		t.Errorf("the rollback of %d notes of one contact read the contact %d times; want once", noteCount, n)
	}
}
