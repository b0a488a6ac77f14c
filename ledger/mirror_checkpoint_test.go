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

// The engine's indexes are loaded from the checkpoint a clean stop wrote
// only while no change has been written since: a restart after a clean
// stop loads it; a process that wrote and then died without a clean stop
// leaves it out of date, and so does a damaged file, and the indexes are
// then built from the store. Either way they answer as the store does.
func TestIndexCheckpointIsUsedOnlyWhenNothingChanged(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("the engine keeps its own indexes for the embedded store only")
	}
	ctx := testCtx()
	es, err := embedded.Start(context.Background(), embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	path := es.IndexCheckpoint("ckpt")
	open := func() *Engine {
		t.Helper()
		s, err := openDB(context.Background(), es.URI, "ckpt", Options{Logger: zerolog.Nop(), Exclusive: true, PrepareStore: es.IndexIDs, IndexCheckpoint: path})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.IndexesReady(context.Background()); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); s.mirror.stale.Load(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the indexes were not rebuilt within a minute")
			}
		}
		return s
	}
	// crash stops an engine the way a killed process does: no clean close,
	// so no checkpoint is written.
	crash := func(s *Engine) {
		s.Abandon()
		s.client.Disconnect(context.Background())
	}
	notes := 0
	addNote := func(s *Engine) {
		t.Helper()
		notes++
		at := now()
		id := uuid.NewString()
		after := bson.M{"_id": id, "created_at": at, "updated_at": at, "archived_at": nil,
			"title": fmt.Sprintf("Note %d", notes), "type": "other", "links": bson.A{}}
		if _, err := s.write(ctx, Mutation{Coll: collNotes, ID: id, Action: audit.ActionCreate, After: after}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(s *Engine, wantCheckpoint bool, when string) {
		t.Helper()
		if got := s.mirror.fromCheckpoint.Load(); got != wantCheckpoint {
			t.Errorf("%s: loaded from the checkpoint %v; want %v", when, got, wantCheckpoint)
		}
		ids, total, ok := s.mirror.ids(mirrorQuery{coll: collNotes, filter: bson.M{}})
		if !ok || total != int64(notes) || len(ids) != notes {
			t.Errorf("%s: the indexes hold %d notes (ok %v); want %d", when, total, ok, notes)
		}
		v, err := s.mirrorViolations(ctx)
		if err != nil || len(v) > 0 {
			t.Errorf("%s: the indexes differ from the store: %v %+v", when, err, v)
		}
	}
	closeClean := func(s *Engine) {
		t.Helper()
		closeDB(context.Background(), s)
	}

	s := open()
	check(s, false, "first start")
	addNote(s)
	addNote(s)
	closeClean(s)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no checkpoint after a clean stop: %v", err)
	}

	s = open()
	check(s, true, "restart after a clean stop")
	addNote(s) // the indexes loaded from the checkpoint follow the writes
	check(s, true, "a write after loading the checkpoint")
	crash(s)

	s = open()
	check(s, false, "restart after a process wrote and died")
	closeClean(s)

	// A damaged checkpoint is not used.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s = open()
	check(s, false, "restart with a damaged checkpoint")
	closeClean(s)
	s = open()
	check(s, true, "restart after the clean stop that followed")
	closeClean(s)
}
