package integration

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"outreach/integration/testenv"
)

// A session id chosen by one agent cannot be used by another key: its
// changes cannot be filed into that session (nor block its rollback).
func TestAgentSessionIsBoundToItsKey(t *testing.T) {
	env := testenv.New(t)
	a := env.Client(env.Key("read", "write"), "campaign-run-7")
	b := env.Client(env.Key("read", "write"), "campaign-run-7")
	outlet := testenv.ID(t, a.Must("create_outlet", map[string]any{"name": "Daily Planet", "type": "newspaper"}, nil))
	e := b.Fail("update_outlet", map[string]any{"id": outlet, "name": "Hijacked"}, "permission_denied")
	if e.Field != "X-Agent-Session-Id" || !strings.Contains(e.Message, "another agent") {
		t.Errorf("refusal %+v; want it to name the header and say the session is another agent's", e)
	}
	var got struct{ Name string }
	a.Must("get_outlet", map[string]any{"id": outlet}, &got)
	if got.Name != "Daily Planet" {
		t.Errorf("outlet renamed to %q by the refused call", got.Name)
	}
	var log struct{ Total int }
	a.Must("get_change_log", map[string]any{"session_id": "campaign-run-7"}, &log)
	if log.Total != 1 {
		t.Errorf("%d changes in the session, want only its owner's create", log.Total)
	}
	// The owner's rollback of its session undoes exactly its own work.
	var rb struct{ Applied bool }
	a.Must("rollback_session", map[string]any{"session_id": "campaign-run-7"}, &rb)
	if !rb.Applied {
		t.Error("the owner's rollback_session was not applied")
	}
}

// The key commands talk to the running server instead of writing its
// store from a second process: many of them at once, beside MCP writes,
// leave every invariant whole (before, each command wrote from its own
// process, and duplicate seqs and entries lost to overwritten intents
// followed).
func TestKeyCommandsBesideALiveServerKeepTheInvariants(t *testing.T) {
	data := dataDir(t)
	srv := startServer(t, data)
	admin := mustDial(t, srv.URL, srv.FirstKey)
	const commands, writes = 6, 20
	var wg sync.WaitGroup
	keys := make([]string, commands)
	for i := range commands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, _, err := runCLI(t, "keys", "create", "--data", data, "--name", fmt.Sprintf("cli-%d", i))
			if err != nil {
				t.Errorf("keys create %d: %v", i, err)
			}
			keys[i] = strings.TrimSpace(out)
		}()
	}
	defer wg.Wait() // the commands end before the data directory goes, even when a write below fails
	for i := range writes {
		admin.must(t, "create_outlet", map[string]any{"name": fmt.Sprintf("Outlet %d", i), "type": "blog"}, nil)
	}
	wg.Wait()
	for i, k := range keys {
		if k == "" {
			continue
		}
		c := mustDial(t, srv.URL, k)
		var who whoami
		c.must(t, "whoami", nil, &who)
		if who.KeyName != fmt.Sprintf("cli-%d", i) {
			t.Errorf("key %d is %q", i, who.KeyName)
		}
	}
	if out := mustCLI(t, "verify", "--data", data); !strings.HasPrefix(out, "ok") {
		t.Errorf("verify while serving: %s", out)
	}
	// On the embedded store commands go through the running server; with
	// MONGODB_URI they connect to that server directly (see Keys).
	if os.Getenv("MONGODB_URI") == "" && !strings.Contains(srv.stderr.String(), `"command":"keys create"`) {
		t.Error("the server's log shows no command from the command line: the commands did not go through it")
	}
	if code := srv.term(30e9); code != 0 {
		t.Fatalf("server exit %d", code)
	}
	if out := mustCLI(t, "verify", "--data", data); !strings.HasPrefix(out, "ok") {
		t.Errorf("verify after stopping: %s", out)
	}
}
