package repo

import (
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
)

// Tests of the write path through the domain: a singleton's creates racing
// (the settings), two rollbacks of one change racing. The engine's own
// protocol tests are in package ledger.

// Two creates of one fixed id (the organisation settings, a mailbox's sync
// state) decided at once in the ordered protocol: the one whose record lands
// is applied; the other's entry is voided, never counted applied beside it,
// and its writer retries on the record the first one made.
func TestConcurrentCreatesOfAFixedID(t *testing.T) {
	s := openStore(t, ModeOrdered)
	ctx := testCtx()
	busy := false
	*s.Internals().Hook = func(p string) error {
		if p != "entry" || busy {
			return nil
		}
		busy = true
		// The first writer's entry is in: another create of the same id
		// lands before it does.
		if _, err := s.UpdateSettings(ctx, SettingsPatch{Competitors: &[]string{"Second"}}); err != nil {
			t.Errorf("the other create: %v", err)
		}
		return nil
	}
	got, err := s.UpdateSettings(ctx, SettingsPatch{Competitors: &[]string{"First"}})
	*s.Internals().Hook = nil
	if err != nil {
		t.Fatalf("the first writer: %v", err)
	}
	if !busy {
		t.Fatal("the hook never ran: the test did not interleave the creates")
	}
	if len(got.Competitors) != 1 || got.Competitors[0] != "First" || got.Version != 2 {
		t.Errorf("settings after both: %+v, want competitors [First] at version 2 (the first writer retried as an update)", got)
	}
	cur, err := s.coll(CollChangeLog).Find(ctx, bson.M{"record_id": orgSettingsID})
	if err != nil {
		t.Fatal(err)
	}
	var entries []audit.Entry
	if err := cur.All(ctx, &entries); err != nil {
		t.Fatal(err)
	}
	states := map[string]int{}
	for _, e := range entries {
		states[e.State]++
	}
	if states[audit.StateApplied] != 2 || states[audit.StateAborted] != 1 || len(entries) != 3 {
		t.Errorf("change entries of the settings: %v, want 2 applied (create, update) and 1 aborted (the create that lost)", states)
	}
	checkInvariants(t, s)
}

// Two rollbacks of one change racing on the embedded store: the second
// plans while the first has written its record but not yet its entry (the
// serial protocol's window), and must still be refused, naming the first,
// even with force.
func TestSameChangeIsRolledBackOnce(t *testing.T) {
	s := openStore(t, modeSerial)
	ctx := testCtx()
	id := newUser(t, s, ctx)
	if err := rename(ctx, s, id, "Renamed"); err != nil {
		t.Fatal(err)
	}
	var change audit.Entry
	if err := s.coll(CollChangeLog).FindOne(ctx, bson.M{"record_id": id, "action": audit.ActionUpdate}).Decode(&change); err != nil {
		t.Fatal(err)
	}
	// The first rollback stops when its record has landed and its entry
	// is not written; there it starts the second and waits until the second
	// has read the records it plans from.
	second := make(chan error, 1)
	var started, planned atomic.Bool
	read := make(chan struct{})
	*s.Internals().Hook = func(p string) error {
		switch {
		case p == "rollback-read" && started.Load() && planned.CompareAndSwap(false, true):
			close(read)
		case p == "record" && started.CompareAndSwap(false, true):
			go func() {
				_, err := s.RollbackChange(rollbackCtx("rb-2"), change.ID, RollbackOptions{Force: true})
				second <- err
			}()
			select {
			case <-read:
			case err := <-second: // it answered without planning
				second <- err
			}
		}
		return nil
	}
	_, err := s.RollbackChange(rollbackCtx("rb-1"), change.ID, RollbackOptions{Force: true})
	if !started.Load() {
		*s.Internals().Hook = nil
		t.Fatalf("the first rollback (%v) never wrote its record", err)
	}
	second2 := <-second // the second rollback ends before this test does
	*s.Internals().Hook = nil
	if err != nil {
		t.Fatalf("first rollback: %v", err)
	}
	if !planned.Load() {
		t.Errorf("the second rollback (%v) answered before it planned in the first's window", second2)
	}
	err = second2
	t.Logf("second: %v", err)
	if ErrorCode(err) != CodeFailedPrecondition {
		t.Errorf("second rollback: %v, want failed_precondition naming the first", err)
	}
	if n := appliedEntries(t, s, bson.M{"reverts": change.ID}); n != 1 {
		t.Errorf("%d rollback entries of the change, want 1", n)
	}
	checkInvariants(t, s)
}
