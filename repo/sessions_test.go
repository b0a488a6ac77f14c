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
// minute) after that, and is never another key's; with both write
// protocols (the serial one, of the embedded store, caches what the answer
// depends on).
func TestImplicitSessionEndsAfterIdleness(t *testing.T) {
	for _, mode := range []string{ModeOrdered, modeSerial} {
		t.Run(mode, func(t *testing.T) { implicitSessionEndsAfterIdleness(t, openStore(t, mode)) })
	}
}

func implicitSessionEndsAfterIdleness(t *testing.T, s *Store) {
	base := time.Date(2026, 11, 24, 9, 0, 30, 0, time.UTC)
	clock := base
	sessionClock = func() time.Time { return clock }
	t.Cleanup(func() { sessionClock = Now })
	a := audit.Actor{UserID: "u1", AgentID: "agent-1", KeyID: "key-1", Tool: "test"}
	b := audit.Actor{UserID: "u1", AgentID: "agent-2", KeyID: "key-2", Tool: "test"}
	write := func(actor audit.Actor, n int) string {
		t.Helper()
		id, until, err := s.ImplicitSession(context.Background(), actor)
		if err != nil {
			t.Fatal(err)
		}
		actor.SessionID = id
		if _, err := createUser(audit.WithActor(context.Background(), actor), s, fmt.Sprint("U", n), fmt.Sprintf("u%d-%s@example.com", n, actor.KeyID), ""); err != nil {
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

// TestImplicitSessionCacheFollowsEveryChange: on the embedded store the
// facts a key's implicit session depends on are read once and reused, and
// a change written in another of the key's implicit sessions (one already
// bound: no session is opened) is what the next call sees, as a read of
// the store would.
func TestImplicitSessionCacheFollowsEveryChange(t *testing.T) {
	s := openStore(t, modeSerial)
	if !s.Internals().IndexKept() {
		t.Skip("the cache serves the embedded store, whose writes all pass through this process")
	}
	waitIndexes(t, s)
	a := audit.Actor{UserID: "u1", AgentID: "agent-1", KeyID: "key-1", Tool: "test"}
	n := 0
	writeIn := func(session string) {
		t.Helper()
		n++
		b := a
		b.SessionID = session
		if _, err := createUser(audit.WithActor(context.Background(), b), s, fmt.Sprint("U", n), fmt.Sprintf("u%d-cache@example.com", n), ""); err != nil {
			t.Fatal(err)
		}
	}
	implicit := func() string {
		t.Helper()
		id, until, err := s.ImplicitSession(context.Background(), a)
		if err != nil {
			t.Fatal(err)
		}
		if until.IsZero() {
			t.Errorf("%s: a session with a change stands until zero", id)
		}
		return id
	}
	// Two later implicit sessions of the key, as other instances of the
	// service could have named them.
	l1, l2 := ImplicitPrefix+"key-1-20991231T2358Z", ImplicitPrefix+"key-1-20991231T2359Z"
	writeIn(l1)
	writeIn(l2)
	if got := implicit(); got != l2 {
		t.Fatalf("after a change in %s: %q", l2, got)
	}
	gen, _ := s.SessionGeneration()
	if _, ok := s.implicit.get(ImplicitPrefix+"key-1-", gen); !ok {
		t.Fatal("the implicit session's facts were not kept")
	}
	writeIn(l1)
	if got := implicit(); got != l1 {
		t.Errorf("after a change in %s: %q; want the session of the last change", l1, got)
	}
	gen, _ = s.SessionGeneration()
	f, ok := s.implicit.get(ImplicitPrefix+"key-1-", gen)
	if want, err := s.readImplicitFacts(context.Background(), ImplicitPrefix+"key-1-"); err != nil || !ok || f != want {
		t.Errorf("cached %+v (%v); the store says %+v (%v)", f, ok, want, err)
	}
}
