package repo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/ledger"
)

// rollbackCtx is a caller with every scope, in its own session.
func rollbackCtx(session string) context.Context {
	return audit.WithActor(context.Background(), audit.Actor{UserID: "u-r", AgentID: "a-r", SessionID: session, Tool: "test",
		Scopes: []string{ScopeRead, ScopeWrite, ScopeAdmin}})
}

// A change that left the system (a message sent) is listed as not
// reversible, never skipped silently, and the rest of its session is rolled
// back around it.
func TestRollbackListsWhatCannotBeReversed(t *testing.T) {
	s := openStore(t, ModeOrdered)
	setup := audit.WithActor(context.Background(), audit.Actor{UserID: "u", AgentID: "a", SessionID: "setup", Tool: "test"})
	work := audit.WithActor(context.Background(), audit.Actor{UserID: "u", AgentID: "a", SessionID: "work", Tool: "test"})
	u, err := createUser(setup, s, "Ann", "ann@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Modify(work, s, CollUsers, u.ID, audit.ActionUpdate, func(u *User) error { u.Name = "Anne"; return nil }); err != nil {
		t.Fatal(err)
	}
	before, v := userState(t, s, u.ID)
	after := renamed(before, "Anne")
	after["slack_user_id"] = "U123"
	sent, err := s.write(work, mutation{Coll: CollUsers, ID: u.ID, Action: audit.ActionSend, Before: before, After: after, Version: v, Irreversible: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := rollbackCtx("rb")
	if _, err = s.RollbackChange(ctx, sent[0].ID, RollbackOptions{}); ErrorCode(err) != CodeFailedPrecondition {
		t.Fatalf("rollback of a send: %v, want failed_precondition", err)
	}
	dry, err := s.RollbackSession(ctx, "work", RollbackOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Steps) != 1 || dry.Steps[0].Action != audit.ActionUpdate || len(dry.NotReversible) != 1 || dry.NotReversible[0].ChangeID != sent[0].ID {
		t.Fatalf("dry run = %+v", dry)
	}
	res, err := s.RollbackSession(ctx, "work", RollbackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Applied || len(res.NotReversible) != 1 || res.NotReversible[0].Status != "not_reversible" || !strings.Contains(res.Message, "not reversible") {
		t.Fatalf("rollback = %+v", res)
	}
	st, _ := userState(t, s, u.ID)
	if st["name"] != "Ann" || st["slack_user_id"] != "U123" {
		t.Errorf("after the rollback: %v (want the name back, the send's effect kept)", st)
	}
	checkInvariants(t, s)
}

// A record locked by a group in progress cannot be rolled back now: a
// retryable conflict, and nothing written.
func TestRollbackOfALockedRecordIsRetryable(t *testing.T) {
	for _, mode := range []string{modeSerial, ModeOrdered} {
		t.Run(mode, func(t *testing.T) { rollbackOfALockedRecord(t, mode) })
	}
}

func rollbackOfALockedRecord(t *testing.T, mode string) {
	s := openStore(t, mode)
	ctx := testCtx()
	muts, _, _ := groupMutations(t, s, ctx, "lock", false)
	var create audit.Entry
	if err := s.coll(CollChangeLog).FindOne(ctx, bson.M{"record_id": muts[0].ID}).Decode(&create); err != nil {
		t.Fatal(err)
	}
	if mode == modeSerial {
		crashAt(s, "step-entry", 1) // the plan holds its records, in memory
	} else {
		crashAt(s, "locked", 1)
	}
	if _, err := s.write(ctx, muts...); !errors.Is(err, ledger.ErrCrashed) {
		t.Fatal(err)
	}
	*s.Internals().Hook = nil
	for name, run := range map[string]func() error{
		"change":  func() error { _, err := s.RollbackChange(rollbackCtx("rb"), create.ID, RollbackOptions{}); return err },
		"session": func() error { _, err := s.RollbackSession(rollbackCtx("rb"), "s-test", RollbackOptions{}); return err },
	} {
		err := run()
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeConflict || !e.Retryable {
			t.Errorf("%s: %v, want a retryable conflict", name, err)
		}
	}
	if n := appliedEntries(t, s, bson.M{"session_id": "rb"}); n != 0 {
		t.Errorf("%d changes written", n)
	}
	if _, err := s.Recover(ctx, true); err != nil {
		t.Fatal(err)
	}
	// The group renamed the user since its creation: force the rollback.
	if _, err := s.RollbackChange(rollbackCtx("rb"), create.ID, RollbackOptions{Force: true}); err != nil {
		t.Errorf("after recovery: %v", err)
	}
	checkInvariants(t, s)
}

// A session rollback crashed at any point of its group is, after recovery,
// entirely applied or entirely absent.
func TestSessionRollbackCrashIsAllOrNothing(t *testing.T) {
	for _, cp := range []struct {
		point string
		n     int
		mode  string
	}{{"plan", 1, ModeOrdered}, {"lock", 1, ModeOrdered}, {"lock", 2, ModeOrdered}, {"locked", 1, ModeOrdered}, {"step-entry", 1, ModeOrdered},
		{"step-entry", 3, ModeOrdered}, {"step-record", 2, ModeOrdered}, {"step-record", 4, ModeOrdered},
		{"plan", 1, modeSerial}, {"step-entry", 1, modeSerial}, {"step-entry", 3, modeSerial}, {"step-record", 2, modeSerial}, {"step-record", 4, modeSerial}} {
		point := cp.point
		t.Run(fmt.Sprintf("%s/%s-%d", cp.mode, point, cp.n), func(t *testing.T) {
			s := openStore(t, cp.mode)
			work := audit.WithActor(context.Background(), audit.Actor{UserID: "u", AgentID: "a", SessionID: "work", Tool: "test"})
			var ids []string
			for _, name := range []string{"a", "b"} {
				u, err := createUser(work, s, name, name+"@example.com", "")
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, u.ID)
				if _, err := Modify(work, s, CollUsers, u.ID, audit.ActionUpdate, func(u *User) error { u.Name += "2"; return nil }); err != nil {
					t.Fatal(err)
				}
			}
			fired := crashAt(s, point, cp.n)
			_, err := s.RollbackSession(rollbackCtx("rb"), "work", RollbackOptions{})
			*s.Internals().Hook = nil
			if !*fired || !errors.Is(err, ledger.ErrCrashed) {
				t.Fatalf("crash at %s #%d: fired %v, %v", point, cp.n, *fired, err)
			}
			if _, err := s.Recover(context.Background(), true); err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, s)
			n := appliedEntries(t, s, bson.M{"session_id": "rb"})
			var archived int
			for _, id := range ids {
				st, _ := userState(t, s, id)
				if st["archived_at"] != nil {
					archived++
				}
			}
			if !(n == 0 && archived == 0) && !(n == 4 && archived == 2) {
				t.Errorf("after a crash at %s: %d rollback changes, %d users archived", point, n, archived)
			}
		})
	}
}
