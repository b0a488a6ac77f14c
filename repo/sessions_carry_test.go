package repo

import (
	"context"
	"fmt"
	"testing"

	"outreach/audit"
)

// TestImplicitFactsCarriedOverByWrites: on the embedded store a change
// entry landing no longer empties the cache of the implicit sessions'
// facts: the write path hands the entry over and the cache folds it in.
// After each write (creates, a group: a session rollback, writes of another
// key) the facts kept for the new generation are the ones a read of the
// store gives.
func TestImplicitFactsCarriedOverByWrites(t *testing.T) {
	s := openStore(t, modeSerial)
	if !s.Internals().IndexKept() {
		t.Skip("the cache serves the embedded store, whose writes all pass through this process")
	}
	waitIndexes(t, s)
	a := audit.Actor{UserID: "u1", AgentID: "agent-1", KeyID: "key-1", Tool: "test"}
	b := audit.Actor{UserID: "u1", AgentID: "agent-2", KeyID: "key-2", Tool: "test"}
	const p1, p2 = ImplicitPrefix + "key-1-", ImplicitPrefix + "key-2-"
	l1, l2 := p1+"20991231T2358Z", p1+"20991231T2359Z"
	o2 := p2 + "20991231T2359Z"
	n := 0
	writeIn := func(who audit.Actor, session string) {
		t.Helper()
		n++
		who.SessionID = session
		if _, err := s.Fixture(audit.WithActor(context.Background(), who), CollContacts, map[string]any{"first_name": "Carry", "last_name": fmt.Sprint(n), "name": fmt.Sprint("Carry ", n)}); err != nil {
			t.Fatal(err)
		}
	}
	// Bind every session first (binding one moves the generation and
	// empties the cache, as it should).
	writeIn(a, l1)
	writeIn(a, l2)
	writeIn(b, o2)
	check := func(step string) {
		t.Helper()
		gen, _ := s.SessionGeneration()
		for _, prefix := range []string{p1, p2} {
			f, ok := s.implicit.get(prefix, gen)
			if !ok {
				t.Fatalf("%s: the facts of %s were not carried over to the new generation", step, prefix)
			}
			want, err := s.readImplicitFacts(context.Background(), prefix)
			if err != nil {
				t.Fatal(err)
			}
			if f.LastID != want.LastID || f.LastSeq != want.LastSeq || !f.LastAt.Equal(want.LastAt) || f.HasLast != want.HasLast ||
				f.BoundID != want.BoundID || !f.BoundAt.Equal(want.BoundAt) || f.HasBound != want.HasBound {
				t.Fatalf("%s: kept %+v for %s; the store says %+v", step, f, prefix, want)
			}
		}
	}
	for _, who := range []audit.Actor{a, b} {
		if _, _, err := s.ImplicitSession(context.Background(), who); err != nil {
			t.Fatal(err)
		}
	}
	check("read")
	writeIn(a, l1)
	check("a change in the older session")
	writeIn(b, o2)
	check("another key's change")
	writeIn(a, l2)
	writeIn(a, l2)
	check("changes in the newer session")
	// A group: l2's changes rolled back from l1 (entries of l1, landed
	// through a plan).
	c := a
	c.SessionID = l1
	if _, err := s.RollbackSession(audit.WithActor(context.Background(), c), l2, RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	check("a session rollback")
}
