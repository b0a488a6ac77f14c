package ledger

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
)

// Each test here reproduces one window in which a change could lose its
// change entry (or an entry stand for a change that did not happen), found
// by review of the write path; the name says which.

// failAt makes the hook inject a store failure (not a crash) at point, the
// first n times the protocol reaches it.
func failAt(s *Engine, point string, n int) *int {
	count := new(int)
	s.hook = func(p string) error {
		if p == point && *count < n {
			*count++
			return fmt.Errorf("%w at %s", errInjected, p)
		}
		return nil
	}
	return count
}

func newUser(t *testing.T, s *Engine, ctx context.Context) string {
	t.Helper()
	u, err := s.CreateUser(ctx, "Ann", uuid.NewString()+"@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

func rename(ctx context.Context, s *Engine, id, name string) error {
	_, err := modify(ctx, s, collUsers, id, audit.ActionUpdate, func(u *User) error { u.Name = name; return nil })
	return err
}

// Serial protocol: the entry's insert fails after the record landed. The
// write must settle at once (the record carries the entry, so the entry goes
// in), and when the store is still failing, the process must settle that
// intent before its next write rather than overwrite it.
func TestSerialFailedEntryInsertKeepsTheEntry(t *testing.T) {
	s := openStore(t, modeSerial)
	ctx := testCtx()
	t.Run("settled at once", func(t *testing.T) {
		id := newUser(t, s, ctx)
		failAt(s, "entry-insert", 1)
		err := rename(ctx, s, id, "Landed")
		s.hook = nil
		if err != nil {
			t.Fatalf("rename: %v (the record landed, so the write succeeded)", err)
		}
		if st, _ := userState(t, s, id); st["name"] != "Landed" {
			t.Errorf("name %v", st["name"])
		}
		checkInvariants(t, s)
	})
	t.Run("store still failing", func(t *testing.T) {
		a, b := newUser(t, s, ctx), newUser(t, s, ctx)
		n := 0
		s.hook = func(p string) error {
			if (p == "entry-insert" || p == "settle-read") && n < 2 {
				n++
				return fmt.Errorf("%w at %s", errInjected, p)
			}
			return nil
		}
		err := rename(ctx, s, a, "Pending")
		s.hook = nil
		if ErrorCode(err) != CodeUnavailable {
			t.Fatalf("rename a: %v, want unavailable (outcome left to recovery)", err)
		}
		// The next write of the process settles a's intent before its own.
		if err := rename(ctx, s, b, "Next"); err != nil {
			t.Fatal(err)
		}
		if got := appliedEntries(t, s, bson.M{"record_id": a, "action": audit.ActionUpdate}); got != 1 {
			t.Errorf("a's rename has %d applied entries, want 1", got)
		}
		checkInvariants(t, s)
	})
	t.Run("caller cancels after the intent", func(t *testing.T) {
		id := newUser(t, s, ctx)
		cctx, cancel := context.WithCancel(ctx)
		s.hook = func(p string) error {
			if p == "entry" {
				cancel() // the MCP client went away mid-write
			}
			return nil
		}
		err := rename(cctx, s, id, "Finished")
		s.hook = nil
		if err != nil {
			t.Fatalf("rename: %v; once its intent is written a write finishes regardless of the caller", err)
		}
		if got := appliedEntries(t, s, bson.M{"record_id": id, "action": audit.ActionUpdate}); got != 1 {
			t.Errorf("%d applied entries, want 1", got)
		}
		checkInvariants(t, s)
	})
	t.Run("duplicate seq", func(t *testing.T) {
		id := newUser(t, s, ctx)
		// An entry already holds the seq the counter hands out next (a
		// counter behind the log): the write takes another, it is not
		// "already there".
		var c struct {
			Seq int64 `bson:"seq"`
		}
		if err := s.coll(collCounters).FindOne(ctx, bson.M{"_id": collChangeLog}).Decode(&c); err != nil {
			t.Fatal(err)
		}
		foreign := uuid.NewString()
		if _, err := s.coll(collChangeLog).InsertOne(ctx, bson.M{"_id": foreign, "seq": c.Seq + 1, "state": audit.StateAborted,
			"collection": collUsers, "record_id": "none", "at": time.Now()}); err != nil {
			t.Fatal(err)
		}
		// Written outside the write path: the service's own index learns
		// of it as it would at the next start.
		s.mirrorRefresh(ctx, collChangeLog, foreign)
		if err := rename(ctx, s, id, "NewSeq"); err != nil {
			t.Fatal(err)
		}
		var e audit.Entry
		if err := s.coll(collChangeLog).FindOne(ctx, bson.M{"record_id": id, "action": audit.ActionUpdate}).Decode(&e); err != nil {
			t.Fatalf("the rename's entry: %v", err)
		}
		if e.Seq == c.Seq+1 || e.State != audit.StateApplied {
			t.Errorf("entry seq %d state %s; want a fresh seq, applied", e.Seq, e.State)
		}
		checkInvariants(t, s)
	})
}

// Ordered protocol: a writer stops after its record write; another writer
// changes the record before recovery runs. Recovery must not void the first
// change (the second one's before is its after): the second writer settles
// it before overwriting, and recovery decides by version.
func TestOrderedRecoveryKeepsAChangeThatLanded(t *testing.T) {
	s := openStore(t, ModeOrdered)
	ctx := testCtx()
	id := newUser(t, s, ctx)
	crashAt(s, "record", 1)
	if err := rename(ctx, s, id, "First"); !errors.Is(err, errCrashed) {
		t.Fatalf("first: %v", err)
	}
	s.hook = nil
	other := otherProcess(s)
	if err := rename(ctx, other, id, "Second"); err != nil {
		t.Fatalf("second: %v", err)
	}
	s.lease = 0 // every pending entry is past its lease
	if _, err := s.Recover(ctx, false); err != nil {
		t.Fatal(err)
	}
	if got := appliedEntries(t, s, bson.M{"record_id": id}); got != 3 {
		t.Errorf("%d applied entries, want create, First and Second", got)
	}
	s.lease = 30 * time.Second
	checkInvariants(t, s)
}

// Ordered protocol: recovery acts on a write while its writer is paused
// (clock skew, a pause past the lease check). The write must not land after
// recovery voided it: recovery finishes it instead when the record is still
// at its base version, and voids it only once the record moved on, after
// which the writer's guarded write can never match.
func TestOrderedWriteNeverLandsAfterItWasVoided(t *testing.T) {
	for _, moved := range []bool{false, true} {
		t.Run(fmt.Sprintf("record moved=%v", moved), func(t *testing.T) {
			s := openStore(t, ModeOrdered)
			ctx := testCtx()
			id := newUser(t, s, ctx)
			other := otherProcess(s)
			other.lease = 0
			s.hook = func(p string) error {
				if p != "entry" {
					return nil
				}
				s.hook = nil
				if moved {
					if err := rename(ctx, other, id, "Moved"); err != nil {
						t.Errorf("other writer: %v", err)
					}
				}
				if _, err := other.Recover(ctx, false); err != nil {
					t.Errorf("recover: %v", err)
				}
				return nil
			}
			before, v := userState(t, s, id)
			entries, err := s.write(ctx, mutation{Coll: collUsers, ID: id, Action: audit.ActionUpdate, Before: before, After: renamed(before, "Paused"), Version: v})
			st, _ := userState(t, s, id)
			var e audit.Entry
			if ferr := s.coll(collChangeLog).FindOne(ctx, bson.M{"_id": entries[0].ID}).Decode(&e); ferr != nil {
				t.Fatal(ferr)
			}
			if moved {
				if !isConflict(err) || st["name"] != "Moved" || e.State != audit.StateAborted {
					t.Errorf("writer %v, name %v, entry %s; want a conflict, Moved kept, the entry aborted", err, st["name"], e.State)
				}
			} else if err != nil || st["name"] != "Paused" || e.State != audit.StateApplied {
				t.Errorf("writer %v, name %v, entry %s; want success, Paused, applied once", err, st["name"], e.State)
			}
			checkInvariants(t, s)
		})
	}
}

// Recovery must read a failing store as "wait", never as "absent".
func TestRecoveryWaitsWhenTheRecordCannotBeRead(t *testing.T) {
	s := openStore(t, ModeOrdered)
	ctx := testCtx()
	id := newUser(t, s, ctx)
	crashAt(s, "entry", 1)
	if err := rename(ctx, s, id, "Decided"); !errors.Is(err, errCrashed) {
		t.Fatalf("rename: %v", err)
	}
	failAt(s, "land-read", 100)
	rep, err := s.Recover(ctx, true)
	s.hook = nil
	if err == nil || rep.Aborted != 0 || rep.Waiting != 1 {
		t.Fatalf("recovery with failing reads: %+v, %v; want it to wait, voiding nothing", rep, err)
	}
	if rep, err := s.Recover(ctx, true); err != nil || rep.Applied != 1 {
		t.Fatalf("recovery: %+v, %v; want the decided change applied", rep, err)
	}
	if st, _ := userState(t, s, id); st["name"] != "Decided" {
		t.Errorf("name %v", st["name"])
	}
	checkInvariants(t, s)
}

// A session is bound to the agent that first wrote in it.
func TestSessionIsBoundToItsAgent(t *testing.T) {
	s := openStore(t, "")
	mine := audit.WithActor(context.Background(), audit.Actor{UserID: "u1", AgentID: "agent-1", SessionID: "shared-run", Tool: "test"})
	theirs := audit.WithActor(context.Background(), audit.Actor{UserID: "u2", AgentID: "agent-2", SessionID: "shared-run", Tool: "test"})
	id := newUser(t, s, mine)
	err := rename(theirs, s, id, "Intruder")
	if ErrorCode(err) != CodePermissionDenied {
		t.Fatalf("another agent writing in the session: %v, want permission_denied", err)
	}
	// A fresh handle (another process, or after a restart) reads the binding.
	if err := rename(theirs, otherProcess(s), id, "Intruder"); ErrorCode(err) != CodePermissionDenied {
		t.Fatalf("through another handle: %v, want permission_denied", err)
	}
	if n := appliedEntries(t, s, bson.M{"session_id": "shared-run"}); n != 1 {
		t.Errorf("%d changes in the session, want only its owner's create", n)
	}
	if err := rename(mine, s, id, "Owner"); err != nil {
		t.Errorf("the owner: %v", err)
	}
	checkInvariants(t, s)
}

// Verify checks each record's whole history, not only its last change.
func TestVerifyChecksTheWholeChain(t *testing.T) {
	for name, breakIt := range map[string]func(s *Engine, entries []audit.Entry) error{
		"an intermediate entry voided": func(s *Engine, es []audit.Entry) error {
			_, err := s.coll(collChangeLog).UpdateOne(context.Background(), bson.M{"_id": es[1].ID}, bson.M{"$set": bson.M{"state": audit.StateAborted}})
			return err
		},
		"a before that is not the previous after": func(s *Engine, es []audit.Entry) error {
			_, err := s.coll(collChangeLog).UpdateOne(context.Background(), bson.M{"_id": es[2].ID}, bson.M{"$set": bson.M{"before.name": "Nobody"}})
			return err
		},
		"a version applied twice": func(s *Engine, es []audit.Entry) error {
			e := es[1]
			e.ID, e.Seq = uuid.NewString(), es[len(es)-1].Seq+100
			_, err := s.coll(collChangeLog).InsertOne(context.Background(), e)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := openStore(t, "")
			ctx := testCtx()
			id := newUser(t, s, ctx)
			for _, n := range []string{"B", "C"} {
				if err := rename(ctx, s, id, n); err != nil {
					t.Fatal(err)
				}
			}
			checkInvariants(t, s)
			var es []audit.Entry
			cur, err := s.coll(collChangeLog).Find(ctx, bson.M{"record_id": id})
			if err != nil {
				t.Fatal(err)
			}
			if err := cur.All(ctx, &es); err != nil || len(es) != 3 {
				t.Fatalf("%d entries, %v", len(es), err)
			}
			if err := breakIt(s, es); err != nil {
				t.Fatal(err)
			}
			v, err := s.Verify(ctx)
			if err != nil || len(v) == 0 {
				t.Fatalf("Verify: %v %+v; want the broken history reported", err, v)
			}
			t.Logf("reported: %+v", v)
		})
	}
}

// Transactions do not rely on the server's default concerns.
func TestTransactionConcernsAreExplicit(t *testing.T) {
	var o options.TransactionOptions
	for _, set := range txOptions().List() {
		if err := set(&o); err != nil {
			t.Fatal(err)
		}
	}
	if o.WriteConcern == nil || o.WriteConcern.W != "majority" {
		t.Errorf("write concern %+v, want majority", o.WriteConcern)
	}
	if o.ReadConcern == nil || o.ReadConcern.Level != "snapshot" {
		t.Errorf("read concern %+v, want snapshot", o.ReadConcern)
	}
}
