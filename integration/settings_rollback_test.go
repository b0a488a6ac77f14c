package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"outreach/integration/testenv"
)

type settingsOut struct {
	Competitors []string `json:"competitors"`
	AVERate     *float64 `json:"ave_rate_per_thousand"`
	AVECurrency string   `json:"ave_currency"`
	ArchivedAt  *string  `json:"archived_at"`
}

func verifyClean(t *testing.T, env *testenv.Env, when string) {
	t.Helper()
	v, err := env.Store.Verify(context.Background())
	if err != nil {
		t.Fatalf("verify %s: %v", when, err)
	}
	for _, x := range v {
		t.Errorf("verify %s: %+v", when, x)
	}
}

// TestRollbackOfASettingsSessionLeavesVerifyClean: a session that changed
// the organisation settings and made an outlet is rolled back as one group;
// the settings record must come out exactly as the rollback's change entry
// says (it had no redacted field, and gains none), so verify passes, and so
// does it after the next update.
func TestRollbackOfASettingsSessionLeavesVerifyClean(t *testing.T) {
	env := testenv.New(t)
	env.Client(env.AdminKey, "s0").Must("update_settings", M{"competitors": []string{"A"}}, nil)
	s1 := env.Client(env.AdminKey, "s1")
	s1.Must("update_settings", M{"competitors": []string{"B"}}, nil)
	s1.Must("create_outlet", M{"name": "O1"}, nil)
	var res rollbackResult
	env.Client(env.AdminKey, "s2").Must("rollback_session", M{"session_id": "s1"}, &res)
	if !res.Applied || len(res.Steps) != 2 {
		t.Fatalf("rollback: %+v", res)
	}
	verifyClean(t, env, "after the rollback")
	var st settingsOut
	env.Admin().Must("get_settings", M{}, &st)
	if diff := cmp.Diff(st.Competitors, []string{"A"}); diff != "" {
		t.Errorf("competitors after the rollback (-got +want):\n%s", diff)
	}
	env.Client(env.AdminKey, "s3").Must("update_settings", M{"competitors": []string{"C"}}, nil)
	verifyClean(t, env, "after the next update")
}

// TestRollbackOfTheSettingsCreateRestoresDefaults: the organisation settings
// are a singleton that holds its defaults until set. Rolling back the session
// that first stored them restores those defaults and leaves the record
// active (never archived), as a rollback of a later update would; the
// settings keep working, and the rollback itself can be rolled back.
func TestRollbackOfTheSettingsCreateRestoresDefaults(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	var defaults settingsOut
	c.Must("get_settings", M{}, &defaults)
	env.Client(env.AdminKey, "first").Must("update_settings", M{"competitors": []string{"A", "B"}, "ave_rate_per_thousand": 12.5, "ave_currency": "EUR"}, nil)

	var dry rollbackResult
	env.Client(env.AdminKey, "undo").Must("rollback_session", M{"session_id": "first", "dry_run": true}, &dry)
	if len(dry.Steps) != 1 || dry.Steps[0].Status != "would_roll_back" {
		t.Fatalf("dry run: %+v", dry)
	}
	var res rollbackResult
	env.Client(env.AdminKey, "undo").Must("rollback_session", M{"session_id": "first"}, &res)
	if !res.Applied {
		t.Fatalf("rollback: %+v", res)
	}
	var st settingsOut
	c.Must("get_settings", M{}, &st)
	if st.ArchivedAt != nil {
		t.Errorf("the settings were archived by the rollback of their first change (archived_at %s); they hold their defaults instead", *st.ArchivedAt)
	}
	if diff := cmp.Diff(settingsOut{Competitors: st.Competitors, AVERate: st.AVERate, AVECurrency: st.AVECurrency}, defaults); diff != "" {
		t.Errorf("settings after rolling back their first change (-got +defaults):\n%s", diff)
	}
	verifyClean(t, env, "after the rollback")

	// The settings go on as any record: updated, and the rollback undone.
	c.Must("update_settings", M{"ave_currency": "USD"}, nil)
	env.Client(env.AdminKey, "redo").Must("rollback_change", M{"id": res.Steps[0].RollbackID, "force": true}, nil)
	c.Must("get_settings", M{}, &st)
	if diff := cmp.Diff(st.Competitors, []string{"A", "B"}); diff != "" || st.AVERate == nil || *st.AVERate != 12.5 {
		t.Errorf("after undoing the rollback: %+v", st)
	}
	verifyClean(t, env, "after undoing the rollback")
}

// TestConcurrentSettingsUpdatesDoNotConflict: eight agents update the
// organisation settings at once, each call one field. A change to one
// field of a shared record is applied on the record as it stands (the
// fields the caller did not send are not its business), so no call ends in
// conflict, every call is one change, and the history chains.
func TestConcurrentSettingsUpdatesDoNotConflict(t *testing.T) {
	env := testenv.New(t)
	const agents, calls = 8, 20
	clients := make([]*testenv.Client, agents)
	for i := range clients {
		clients[i] = env.Client(env.Key("read", "write"), fmt.Sprintf("settings-agent-%d", i))
	}
	before := len(changes(t, env.Admin(), M{"collection": "settings"}))
	errs := make(chan string, agents*calls)
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range calls {
				var args M
				switch (i + j) % 3 {
				case 0:
					args = M{"competitors": []string{fmt.Sprintf("Rival %d-%d", i, j)}}
				case 1:
					args = M{"ave_rate_per_thousand": float64(i*100 + j + 1)}
				default:
					args = M{"ave_currency": fmt.Sprintf("C%d%d", i, j)}
				}
				if _, e := c.Call("update_settings", args); e != nil {
					errs <- fmt.Sprintf("agent %d call %d %v: %s: %s", i, j, args, e.Code, e.Message)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for e := range errs {
		if n++; n <= 5 {
			t.Error(e)
		}
	}
	if n > 0 {
		t.Errorf("%d of %d calls failed", n, agents*calls)
	}
	if got := len(changes(t, env.Admin(), M{"collection": "settings"})) - before; got != agents*calls-n {
		t.Errorf("%d settings changes for %d successful calls", got, agents*calls-n)
	}
	verifyClean(t, env, "after the concurrent updates")
}
