package repo

import (
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
)

// Tests of the write path through the domain: two rollbacks of one change
// racing (a singleton's creates racing, the settings, are tested in package
// reports). The engine's own protocol tests are in package ledger.

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
