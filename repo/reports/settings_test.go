package reports_test

import (
	"context"
	"os"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/reports"
	"outreach/repo/repotest"
)

// Two creates of one fixed id (the organisation settings, a mailbox's sync
// state) decided at once in the ordered protocol: the one whose record lands
// is applied; the other's entry is voided, never counted applied beside it,
// and its writer retries on the record the first one made.
func TestConcurrentCreatesOfAFixedID(t *testing.T) {
	st := repotest.OpenOrdered(t)
	if os.Getenv("MONGODB_URI") == "" {
		// The embedded store runs the serial protocol; this test drives the
		// ordered one through it, one step at a time (its filtered writes
		// are not atomic under concurrency, but correct in sequence).
		*st.Internals().SerialWrites = false
	}
	s := reports.Of(st)
	ctx := repotest.Ctx()
	busy := false
	*s.Internals().Hook = func(p string) error {
		if p != "entry" || busy {
			return nil
		}
		busy = true
		// The first writer's entry is in: another create of the same id
		// lands before it does.
		if _, err := s.UpdateSettings(ctx, reports.SettingsPatch{Competitors: &[]string{"Second"}}); err != nil {
			t.Errorf("the other create: %v", err)
		}
		return nil
	}
	got, err := s.UpdateSettings(ctx, reports.SettingsPatch{Competitors: &[]string{"First"}})
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
	cur, err := s.Collection(repo.CollChangeLog).Find(ctx, bson.M{"record_id": reports.OrgSettingsID})
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
	v, err := s.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range v {
		t.Errorf("invariant: %+v", x)
	}
}
