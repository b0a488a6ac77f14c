package repo

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/ledger"
)

// TestLargeSessionRollback rolls back a session of many records as one
// group: its plan is kept in chunks (never one document that could reach
// the size limit), other records' writes go on while it is written, and the
// result is whole. OUTREACH_BIG_ROLLBACK sets the size (default 200; the
// figures in docs/performance.md are for 5000).
func TestLargeSessionRollback(t *testing.T) {
	n := 200
	if v := os.Getenv("OUTREACH_BIG_ROLLBACK"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	for _, mode := range []string{modeSerial, ModeOrdered} {
		t.Run(mode, func(t *testing.T) {
			s := openStore(t, mode)
			if mode == ModeOrdered && os.Getenv("MONGODB_URI") == "" {
				t.Skip("the ordered protocol under concurrent writers needs a server whose filtered writes are atomic: set MONGODB_URI")
			}
			old := (*ledger.PlanChunkBytes)
			(*ledger.PlanChunkBytes) = 64 << 10 // several chunks even for a small group
			t.Cleanup(func() { (*ledger.PlanChunkBytes) = old })
			work := audit.WithActor(context.Background(), audit.Actor{UserID: "u", AgentID: "a", SessionID: "big-" + mode, Tool: "test"})
			start := time.Now()
			// Created straight through the write path (CreateUser would
			// also check each email's uniqueness, a scan of the collection
			// on the embedded store, which is not what is measured here).
			for i := 0; i < n; i++ {
				id := uuid.NewString()
				if _, err := s.write(work, mutation{Coll: CollUsers, ID: id, Action: audit.ActionCreate,
					After: bson.M{"_id": id, "name": fmt.Sprintf("user %d", i), "email": id + "@example.com", "created_at": Now(), "updated_at": Now(), "archived_at": nil}}); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%s: created %d records in %v", mode, n, time.Since(start))
			other := newUser(t, s, testCtx())
			// A writer renames another record until the rollback ends. When
			// the group holds its records (the serial plan persisted and
			// locked in memory; the ordered plan locked in the store), the
			// hook waits for one more of its writes to land: other records'
			// writes go on while the group is written, whatever the load.
			held := "plan"
			if !*s.Internals().SerialWrites {
				held = "locked"
			}
			var done, waited atomic.Bool
			var during atomic.Int64
			wrote := make(chan struct{}, 1)
			exited := make(chan struct{})
			*s.Internals().Hook = func(p string) error {
				if p != held || !waited.CompareAndSwap(false, true) {
					return nil
				}
				select {
				case <-wrote: // a write that landed before the group held its records
				default:
				}
				select {
				case <-wrote:
					during.Add(1)
				case <-exited:
				}
				return nil
			}
			var wg sync.WaitGroup
			stop := func() {
				done.Store(true)
				wg.Wait()
				*s.Internals().Hook = nil
			}
			// Cleanups run last first: the writer ends before the store closes,
			// on every path out of this test.
			t.Cleanup(stop)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(exited)
				for i := 0; !done.Load(); i++ {
					if err := rename(testCtx(), s, other, fmt.Sprintf("o%d", i)); err != nil {
						t.Errorf("a write beside the group: %v", err)
						return
					}
					select {
					case wrote <- struct{}{}:
					default:
					}
				}
			}()
			start = time.Now()
			res, err := s.RollbackSession(rollbackCtx("rb-big-"+mode), "big-"+mode, RollbackOptions{})
			took := time.Since(start)
			stop()
			if err != nil {
				t.Fatalf("rollback_session of %d changes: %v", n, err)
			}
			t.Logf("%s: rolled back %d changes in %v (%.1f ms each)", mode, n, took, float64(took.Milliseconds())/float64(n))
			if !waited.Load() {
				t.Fatalf("the rollback never reached %q", held)
			}
			if during.Load() == 0 {
				t.Error("no other write went through while the group held its records")
			}
			if !res.Applied || len(res.Steps) != n {
				t.Fatalf("applied %v with %d steps, want %d", res.Applied, len(res.Steps), n)
			}
			if during.Load() == 0 {
				t.Error("no other write went through while the group was written")
			}
			var e audit.Entry
			if err := s.coll(CollChangeLog).FindOne(context.Background(), bson.M{"_id": res.Steps[0].RollbackID}).Decode(&e); err != nil {
				t.Fatal(err)
			}
			var p ledger.Plan
			if err := s.coll(CollPlans).FindOne(context.Background(), bson.M{"_id": e.PlanID}).Decode(&p); err != nil {
				t.Fatal(err)
			}
			if p.State != ledger.PlanApplied || p.Chunks < 2 || p.Count != n {
				t.Errorf("plan %+v; want applied, %d steps in several chunks", p, n)
			}
			if a := appliedEntries(t, s, bson.M{"session_id": "rb-big-" + mode}); a != int64(n) {
				t.Errorf("%d rollback entries, want %d", a, n)
			}
			checkInvariants(t, s)
		})
	}
}
