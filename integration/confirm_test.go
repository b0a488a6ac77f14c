package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/integration/testenv"
	"outreach/server"
	"outreach/tools"
)

// asker is a client's elicitation handler: it records the questions and
// answers with the action and value set for the next one.
type asker struct {
	mu        sync.Mutex
	questions []string
	action    string
	confirm   bool
}

func (a *asker) set(action string, confirm bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.action, a.confirm, a.questions = action, confirm, nil
}

func (a *asker) asked() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.questions...)
}

func (a *asker) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.questions = append(a.questions, req.Params.Message)
	res := &mcp.ElicitResult{Action: a.action}
	if a.action == "accept" {
		res.Content = map[string]any{"confirm": a.confirm}
	}
	return res, nil
}

// elicitingClient connects on revision version with a client that answers
// elicitations with a, in agent session session.
func elicitingClient(t *testing.T, env *testenv.Env, version, session string, a *asker) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: toolsetTransport(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+env.AdminKey)
		r.Header.Set(tools.SessionHeader, session)
		return http.DefaultTransport.RoundTrip(r)
	})}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "outreach-test", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: a.handle}).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: env.URL, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConfirmations: an import without a dry run and the rollback of a
// large session ask the user first, by elicitation on a stateful revision
// and by the input_required round trip on 2026-07-28; a no does nothing;
// confirm: true and a dry run ask nothing; a client that cannot be asked
// gets the step done as before.
func TestConfirmations(t *testing.T) {
	env := testenv.New(t)
	admin := env.Admin()
	contactsNamed := func(last string) int {
		var page struct{ Total int }
		admin.Must("list_contacts", M{"search": last}, &page)
		return page.Total
	}
	importOne := func(s *mcp.ClientSession, last string, extra M) (string, bool) {
		args := M{"rows": []M{{"first_name": "Ada", "last_name": last, "email": strings.ToLower(last) + "@example.com"}}}
		for k, v := range extra {
			args[k] = v
		}
		return callText(t, s, "import_contacts", args)
	}

	for _, rev := range []string{testenv.ClientRevision, server.StatelessRevision} {
		a := &asker{}
		s := elicitingClient(t, env, rev, "confirm-"+rev, a)

		a.set("accept", true)
		if text, isErr := importOne(s, "Yes"+rev[:4], nil); isErr {
			t.Errorf("%s: import confirmed: %s", rev, text)
		}
		if q := a.asked(); len(q) != 1 || !strings.Contains(q[0], "Import 1 rows of contacts without a dry run") {
			t.Errorf("%s: questions %q", rev, q)
		}
		if n := contactsNamed("Yes" + rev[:4]); n != 1 {
			t.Errorf("%s: confirmed import made %d contacts", rev, n)
		}

		for _, answer := range []struct {
			action  string
			confirm bool
			want    string
		}{{"decline", false, "not confirmed (decline)"}, {"accept", false, "not confirmed (answered no)"}, {"cancel", false, "not confirmed (cancel)"}} {
			a.set(answer.action, answer.confirm)
			text, isErr := importOne(s, "No"+rev[:4], nil)
			if !isErr || !strings.Contains(text, "failed_precondition") || !strings.Contains(text, answer.want) {
				t.Errorf("%s %s: %s; want failed_precondition %q", rev, answer.action, text, answer.want)
			}
		}
		if n := contactsNamed("No" + rev[:4]); n != 0 {
			t.Errorf("%s: refused imports made %d contacts", rev, n)
		}

		a.set("decline", false)
		for _, extra := range []M{{"confirm": true}, {"dry_run": true}} {
			if text, isErr := importOne(s, "Pre"+rev[:4], extra); isErr {
				t.Errorf("%s %v: %s", rev, extra, text)
			}
		}
		if q := a.asked(); len(q) != 0 {
			t.Errorf("%s: asked with confirm or dry_run: %q", rev, q)
		}
	}

	// The rollback of a session of more than ConfirmRollbackAbove changes.
	a := &asker{}
	s := elicitingClient(t, env, testenv.ClientRevision, "big-run", a)
	for i := 0; i <= tools.ConfirmRollbackAbove; i++ {
		if text, isErr := callText(t, s, "create_outlet", M{"name": "Outlet " + string(rune('A'+i))}); isErr {
			t.Fatal(text)
		}
	}
	a.set("decline", false)
	if text, isErr := callText(t, s, "rollback_session", M{"session_id": "big-run"}); !isErr || !strings.Contains(text, "not confirmed") {
		t.Errorf("rollback declined: %s", text)
	}
	if q := a.asked(); len(q) != 1 || !strings.Contains(q[0], "Roll back all 11 changes of agent session big-run") {
		t.Errorf("rollback questions %q", q)
	}
	var outlets struct{ Total int }
	admin.Must("list_outlets", M{"search": "Outlet "}, &outlets)
	if outlets.Total != tools.ConfirmRollbackAbove+1 {
		t.Errorf("after a declined rollback %d outlets remain, want %d", outlets.Total, tools.ConfirmRollbackAbove+1)
	}
	a.set("accept", true)
	text, isErr := callText(t, s, "rollback_session", M{"session_id": "big-run"})
	var rb struct{ Status string }
	if isErr || json.Unmarshal([]byte(text), &rb) != nil {
		t.Errorf("rollback confirmed: %s", text)
	}
	admin.Must("list_outlets", M{"search": "Outlet "}, &outlets)
	if outlets.Total != 0 {
		t.Errorf("after the confirmed rollback %d outlets remain", outlets.Total)
	}

	// Archiving an outlet with more than ConfirmArchiveLinksAbove links.
	outlet := mk(t, admin, "create_outlet", M{"name": "Busy Desk"})
	for i := 0; i <= tools.ConfirmArchiveLinksAbove; i++ {
		mk(t, admin, "create_contact", M{"first_name": "Reporter", "last_name": string(rune('A' + i)), "outlet_ids": []string{outlet}})
	}
	a.set("decline", false)
	if text, isErr := callText(t, s, "archive_outlet", M{"id": outlet}); !isErr || !strings.Contains(text, "not confirmed") {
		t.Errorf("archive declined: %s", text)
	}
	if q := a.asked(); len(q) != 1 || !strings.Contains(q[0], "Archive Busy Desk, with 11 contacts") {
		t.Errorf("archive questions %q", q)
	}
	var o struct {
		ArchivedAt *string `json:"archived_at"`
	}
	admin.Must("get_outlet", M{"id": outlet}, &o)
	if o.ArchivedAt != nil {
		t.Errorf("a declined archive archived the outlet")
	}
	if text, isErr := callText(t, s, "archive_outlet", M{"id": outlet, "confirm": true}); isErr {
		t.Errorf("archive with confirm: %s", text)
	}
	if q := a.asked(); len(q) != 1 {
		t.Errorf("confirm: true asked again: %q", q)
	}

	// A client that cannot be asked gets the step done, as before.
	if _, e := admin.Call("import_contacts", M{"rows": []M{{"first_name": "Ada", "last_name": "Plain", "email": "plain@example.com"}}}); e != nil {
		t.Errorf("import by a client without elicitation: %s", e.Message)
	}
}
