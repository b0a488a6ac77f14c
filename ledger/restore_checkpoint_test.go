package ledger

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/embedded"
)

// A restore writes the index checkpoint once the restored store is
// verified and complete: the first start after it (here after a crash, so
// that no clean stop writes one) loads the indexes from that checkpoint
// instead of reading every collection, and they answer as the store does.
// Before it completes, no checkpoint is written: the records are in before
// the counter they belong to is set.
func TestRestoreWritesTheIndexCheckpoint(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("the engine keeps its own indexes for the embedded store only")
	}
	ctx := testCtx()
	open := func(es *embedded.Store, db, ckpt string) *Engine {
		t.Helper()
		s, err := openDB(context.Background(), es.URI, db, Options{Logger: zerolog.Nop(), Exclusive: true, PrepareStore: es.IndexIDs, IndexCheckpoint: ckpt, Lookups: es})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.IndexesReady(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	}
	src, err := embedded.Start(context.Background(), embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	s := open(src, "src", "")
	const notes = 30
	for i := range notes {
		at := now()
		id := uuid.NewString()
		after := bson.M{"_id": id, "created_at": at, "updated_at": at, "archived_at": nil,
			"title": fmt.Sprintf("Note %d", i), "type": "other", "links": bson.A{bson.M{"id": uuid.NewString(), "contact_id": "c1"}}}
		if _, err := s.write(ctx, Mutation{Coll: collNotes, ID: id, Action: audit.ActionCreate, After: after}); err != nil {
			t.Fatal(err)
		}
	}
	counter, err := s.changeCounter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// What a backup holds: every document of the indexed collections.
	docs := map[string][]bson.Raw{}
	for _, coll := range []string{collNotes, collChangeLog} {
		cur, err := s.coll(coll).Find(ctx, bson.M{})
		if err != nil {
			t.Fatal(err)
		}
		for cur.Next(ctx) {
			docs[coll] = append(docs[coll], append(bson.Raw(nil), cur.Current...))
		}
		cur.Close(ctx)
	}
	closeDB(context.Background(), s)

	dst, err := embedded.Start(context.Background(), embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	ckpt := dst.IndexCheckpoint("dst")
	r := open(dst, "dst", ckpt)
	if err := r.BeginRestore(ctx, "backup", counter); err != nil {
		t.Fatal(err)
	}
	for coll, d := range docs {
		if err := r.RestoreDocs(ctx, coll, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.SetRestoredCounter(ctx, counter); err != nil {
		t.Fatal(err)
	}
	// A checkpoint asked for before the restore completes is refused.
	if _, err := r.writeCheckpoint(ctx); err == nil {
		t.Error("a checkpoint was written while the restore was under way")
	}
	if _, err := os.Stat(ckpt); err == nil {
		t.Fatal("a checkpoint exists before the restore completed")
	}
	if err := r.CompleteRestore(ctx, counter); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ckpt); err != nil {
		t.Fatalf("no index checkpoint after the restore completed: %v", err)
	}
	// A crash: no clean stop, so the checkpoint is the restore's.
	r.Abandon()
	r.client.Disconnect(context.Background())

	r = open(dst, "dst", ckpt)
	defer closeDB(context.Background(), r)
	for deadline := time.Now().Add(time.Minute); r.mirror.stale.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the indexes were not ready within a minute")
		}
	}
	if !r.mirror.fromCheckpoint.Load() {
		t.Error("the first start after the restore built the indexes from the store: the restore wrote no usable checkpoint")
	}
	ids, total, ok := r.mirror.ids(mirrorQuery{coll: collNotes, filter: bson.M{"links.contact_id": "c1"}})
	if !ok || total != notes || len(ids) != notes {
		t.Errorf("the indexes answer %d notes of contact c1 (ok %v); want %d", total, ok, notes)
	}
	v, err := r.mirrorViolations(ctx)
	if err != nil || len(v) > 0 {
		t.Errorf("the indexes loaded from the restore's checkpoint differ from the store: %v %+v", err, v)
	}
}
