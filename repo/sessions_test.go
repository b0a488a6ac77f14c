package repo

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"outreach/audit"
)

// TestImplicitSessionEndsAfterIdleness: a key's implicit session continues
// while its last change is under ImplicitIdle old, is new (named after its
// minute) after that, and is never another key's.
func TestImplicitSessionEndsAfterIdleness(t *testing.T) {
	s := openStore(t, ModeOrdered)
	base := time.Date(2026, 11, 24, 9, 0, 30, 0, time.UTC)
	clock := base
	sessionClock = func() time.Time { return clock }
	t.Cleanup(func() { sessionClock = now })
	a := audit.Actor{UserID: "u1", AgentID: "agent-1", KeyID: "key-1", Tool: "test"}
	b := audit.Actor{UserID: "u1", AgentID: "agent-2", KeyID: "key-2", Tool: "test"}
	write := func(actor audit.Actor, n int) string {
		t.Helper()
		id, until, err := s.ImplicitSession(context.Background(), actor)
		if err != nil {
			t.Fatal(err)
		}
		actor.SessionID = id
		if _, err := s.CreateUser(audit.WithActor(context.Background(), actor), fmt.Sprint("U", n), fmt.Sprintf("u%d-%s@example.com", n, actor.KeyID), ""); err != nil {
			t.Fatal(err)
		}
		if !until.IsZero() && !until.After(clock) {
			t.Errorf("session %s stands until %v, before now %v", id, until, clock)
		}
		return id
	}
	first := write(a, 1)
	if want := ImplicitPrefix + "key-1-20261124T0900Z"; first != want {
		t.Fatalf("first implicit session %q, want %q", first, want)
	}
	if other := write(b, 2); !strings.HasPrefix(other, ImplicitPrefix+"key-2-") {
		t.Errorf("another key got %q", other)
	}
	// The change log's times are the real clock's; the session's clock runs
	// from there.
	clock = time.Now().UTC().Add(ImplicitIdle - time.Minute)
	if again := write(a, 3); again != first {
		t.Errorf("after %v idle: %q, want the same session %q", ImplicitIdle-time.Minute, again, first)
	}
	clock = time.Now().UTC().Add(ImplicitIdle + time.Minute)
	next := write(a, 4)
	if next == first || next != ImplicitPrefix+"key-1-"+clock.Format("20060102T1504Z") {
		t.Errorf("after %v idle: %q; want a new session of key-1 named after its minute", ImplicitIdle+time.Minute, next)
	}
}
