package ledger

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/embedded"
	"outreach/indexes"
)

// TestSerialGuardReadsTheIndex: on the embedded store the guard of an
// update (its version and lock, checked under the write lock) is read from
// the service's own index, not from the store, and decides as the store
// would: the update at the version read lands, a second one at that old
// version is a conflict. With the index stale, the guard reads the store
// and decides the same.
func TestSerialGuardReadsTheIndex(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("the engine keeps its own indexes for the embedded store only")
	}
	ctx := testCtx()
	es, err := embedded.Start(context.Background(), embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	var finds atomic.Int64 // finds of the notes collection
	mon := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName == "find" {
			if c, ok := e.Command.Lookup("find").StringValueOK(); ok && c == collNotes {
				finds.Add(1)
			}
		}
	}}
	client, err := mongo.Connect(options.Client().ApplyURI(es.URI).SetTimeout(30 * time.Second).
		SetBSONOptions(&options.BSONOptions{DefaultDocumentM: true}).SetMonitor(mon))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), client, "guard", "embedded", Options{Logger: zerolog.Nop(), Exclusive: true,
		PrepareStore: es.IndexIDs, Schema: testSchema, ApplyIndexes: indexes.Apply, TextColl: collNotes})
	if err != nil {
		client.Disconnect(context.Background())
		t.Fatal(err)
	}
	defer closeDB(context.Background(), s)
	if err := s.IndexesReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	at := now()
	id := uuid.NewString()
	v1 := bson.M{"_id": id, "created_at": at, "updated_at": at, "archived_at": nil, "title": "first", "content": "text", "type": "other", "links": bson.A{}}
	if _, err := s.write(ctx, Mutation{Coll: collNotes, ID: id, Action: audit.ActionCreate, After: v1}); err != nil {
		t.Fatal(err)
	}
	update := func(version int64, title string) error {
		after := cloneM(v1)
		after["title"] = title
		_, err := s.write(ctx, Mutation{Coll: collNotes, ID: id, Action: audit.ActionUpdate, Before: v1, After: after, Version: version})
		return err
	}
	stored := func() int64 {
		t.Helper()
		var doc bson.M
		if err := s.coll(collNotes).FindOne(context.Background(), bson.M{"_id": id}).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		v, _ := AsInt(doc[fieldVersion])
		return v
	}
	finds.Store(0)
	if err := update(1, "second"); err != nil {
		t.Fatal(err)
	}
	if err := update(1, "lost"); !errors.Is(err, ErrConflict) {
		t.Fatalf("an update at an old version: %v; want a conflict", err)
	}
	if n := finds.Load(); n != 0 {
		t.Errorf("the guards read the store %d times; want none (the index answers)", n)
	}
	if v := stored(); v != 2 {
		t.Fatalf("version %d stored; want 2", v)
	}
	// Stale: the store answers the guard.
	s.mirror.stale.Store(true)
	finds.Store(0)
	if err := update(1, "lost again"); !errors.Is(err, ErrConflict) {
		t.Fatalf("an update at an old version, index stale: %v; want a conflict", err)
	}
	if err := update(2, "third"); err != nil {
		t.Fatal(err)
	}
	if n := finds.Load(); n != 2 {
		t.Errorf("with the index stale the guards read the store %d times; want 2", n)
	}
	if v := stored(); v != 3 {
		t.Fatalf("version %d stored; want 3", v)
	}
}
