package ledger

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/embedded"
)

// crashChildDir names, in the child process of
// TestStartAfterACrashFollowsTheChangeLog, the data folder it writes to
// until it is killed.
const crashChildDir = "OUTREACH_TEST_CRASH_CHILD_DIR"

// openCrashStore opens the engine on the embedded store in dir as the
// service does: checkpoint file, the store's look-ups, exclusive.
func openCrashStore(t *testing.T, dir string) (*Engine, *embedded.Store) {
	t.Helper()
	es, err := embedded.Start(context.Background(), embedded.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s, err := openDB(context.Background(), es.URI, "crash", Options{Logger: zerolog.Nop(), Exclusive: true, PrepareStore: es.IndexIDs,
		IndexCheckpoint: es.IndexCheckpoint("crash"), Lookups: es})
	if err != nil {
		es.Close()
		t.Fatal(err)
	}
	if err := s.IndexesReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); s.mirror.stale.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the indexes were not built within a minute")
		}
	}
	return s, es
}

// crashChild is the child process: it writes notes (creates and updates)
// until it is killed, printing a line per write, with checkpoints written
// while running every few changes.
func crashChild(t *testing.T, dir string) {
	checkpointChanges, checkpointAge, checkpointPoll = 64, 50*time.Millisecond, 20*time.Millisecond
	s, _ := openCrashStore(t, dir)
	ctx := testCtx()
	var ids []string
	for i := 0; ; i++ {
		at := now()
		m := Mutation{Coll: collNotes, Action: audit.ActionCreate}
		if i%3 == 2 {
			// An update of an earlier note.
			id := ids[i%len(ids)]
			var cur bson.M
			if err := s.coll(collNotes).FindOne(ctx, bson.M{"_id": id}).Decode(&cur); err != nil {
				t.Fatal(err)
			}
			v, _ := AsInt(cur[fieldVersion])
			after := bson.M{}
			for k, v := range cur {
				if k != fieldVersion && k != fieldLastChange {
					after[k] = v
				}
			}
			after["title"], after["updated_at"] = fmt.Sprintf("Note %d, renamed", i), at
			m = Mutation{Coll: collNotes, ID: id, Action: audit.ActionUpdate, Before: cur, After: after, Version: v}
		} else {
			m.ID = uuid.NewString()
			m.After = bson.M{"_id": m.ID, "created_at": at, "updated_at": at, "archived_at": nil,
				"title": fmt.Sprintf("Note %d", i), "type": "other", "links": bson.A{bson.M{"id": uuid.NewString(), "contact_id": fmt.Sprintf("c%d", i%7)}}}
			ids = append(ids, m.ID)
		}
		if _, err := s.write(ctx, m); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("wrote %d\n", i)
	}
}

// A process killed in the middle of its writes leaves the checkpoint it
// wrote while running and the change entries after it: the next start
// loads the one and follows the others (after recovery has settled what
// the kill left half-done), and its indexes are then those a build from
// the store gives, record by record. A checkpoint too far behind the
// store, or damaged, is refused and the indexes are built from the store.
func TestStartAfterACrashFollowsTheChangeLog(t *testing.T) {
	if dir := os.Getenv(crashChildDir); dir != "" {
		crashChild(t, dir)
		return
	}
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("the engine keeps its own indexes for the embedded store only")
	}
	dir := t.TempDir()
	checkpoint := dir + "/crash.index"
	cmd := exec.Command(os.Args[0], "-test.run=^TestStartAfterACrashFollowsTheChangeLog$")
	cmd.Env = append(os.Environ(), crashChildDir+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	// Kill it once it has written a checkpoint while running and gone on
	// writing for a while after it.
	lines := bufio.NewScanner(out)
	after, written := -1, 0
	for lines.Scan() {
		if !strings.HasPrefix(lines.Text(), "wrote ") {
			continue
		}
		if written++; written > 5000 {
			break // no checkpoint while running
		}
		if after < 0 {
			if _, err := os.Stat(checkpoint); err == nil {
				after = 0
			}
			continue
		}
		if after++; after == 150 {
			break
		}
	}
	if after < 150 {
		t.Fatalf("the child stopped before it wrote a checkpoint and 150 changes after it (%v)", lines.Err())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true

	// The indexes after the crash: the checkpoint and the entries after it.
	s, es := openCrashStore(t, dir)
	if !s.mirror.fromCheckpoint.Load() || s.ckpt.followed.Load() == 0 {
		t.Errorf("after the crash: loaded from the checkpoint %v, %d changes followed; want the checkpoint and the changes after it",
			s.mirror.fromCheckpoint.Load(), s.ckpt.followed.Load())
	}
	equalToTheStore(t, s, "after the crash")
	notes, err := s.coll(collNotes).CountDocuments(context.Background(), bson.M{})
	if err != nil {
		t.Fatal(err)
	}
	if _, total, ok := s.mirror.ids(mirrorQuery{coll: collNotes, filter: bson.M{}}); !ok || total != notes {
		t.Errorf("after the crash the index holds %d notes (ok %v); the store %d", total, ok, notes)
	}
	s.Abandon()
	s.client.Disconnect(context.Background())
	es.Close()

	// A checkpoint farther behind than a start follows is not used.
	defer func(f func(int) int) { maxTail = f }(maxTail)
	maxTail = func(int) int { return 0 }
	s, es = openCrashStore(t, dir)
	if s.mirror.fromCheckpoint.Load() {
		t.Error("a checkpoint too far behind the store was used")
	}
	equalToTheStore(t, s, "a checkpoint too far behind")
	s.Abandon()
	s.client.Disconnect(context.Background())
	es.Close()
	maxTail = func(n int) int { return max(5000, n/4) }

	// A damaged checkpoint is not used either.
	b, err := os.ReadFile(checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(checkpoint, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, es = openCrashStore(t, dir)
	if s.mirror.fromCheckpoint.Load() {
		t.Error("a damaged checkpoint was used")
	}
	equalToTheStore(t, s, "a damaged checkpoint")
	closeDB(context.Background(), s)
	es.Close()
}

// equalToTheStore compares the indexes with a build from the store.
func equalToTheStore(t *testing.T, s *Engine, when string) {
	t.Helper()
	v, err := s.mirrorViolations(context.Background())
	if err != nil || len(v) > 0 {
		t.Errorf("%s: the indexes differ from a build from the store: %v %+v", when, err, v)
	}
}
