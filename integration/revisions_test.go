package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/server"
	"outreach/tools"
)

// roundRobin serves url through n instances of the service on env's store,
// behind a plain round-robin reverse proxy (no stickiness), and counts the
// requests each instance answered.
func roundRobin(t *testing.T, env *testenv.Env, n int) (string, []*atomic.Int64) {
	t.Helper()
	var backends []*url.URL
	hits := make([]*atomic.Int64, n)
	for i := range n {
		hits[i] = new(atomic.Int64)
		h := server.New(env.Store, zerolog.Nop())
		count := hits[i]
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			count.Add(1)
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(ts.Close)
		u, _ := url.Parse(ts.URL)
		backends = append(backends, u)
	}
	var next atomic.Int64
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(backends[int(next.Add(1)-1)%n])
		},
		FlushInterval: -1,
	}
	ts := httptest.NewServer(proxy)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp", hits
}

// callMeta calls a tool with _meta (and fails the test on an error result).
func callMeta(t *testing.T, c *testenv.Client, tool string, args any, meta mcp.Meta) json.RawMessage {
	t.Helper()
	res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		t.Fatalf("%s: %s", tool, text)
	}
	return json.RawMessage(text)
}

// sessionsOf returns the session id of every applied change of record ids.
func sessionsOf(t *testing.T, c *testenv.Client, ids ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, id := range ids {
		var log struct {
			Changes []struct {
				SessionID string `json:"session_id"`
				Action    string `json:"action"`
			}
		}
		c.Must("get_change_log", M{"record_id": id}, &log)
		if len(log.Changes) == 0 {
			t.Fatalf("no change of %s", id)
		}
		out[id] = log.Changes[len(log.Changes)-1].SessionID
	}
	return out
}

// TestRevision20260728BehindRoundRobin: a go-sdk client on the stateless
// revision talks to two instances on one store through a round-robin proxy.
// Every request carries its own version (no initialize, no Mcp-Session-Id),
// both instances answer, and attribution holds on each path: a start_session
// handle in _meta, the same handle in the header, and with neither the key's
// implicit session, which every instance resolves alike. rollback_session of
// the handle undoes exactly the calls made under it.
func TestRevision20260728BehindRoundRobin(t *testing.T) {
	env := testenv.New(t)
	endpoint, hits := roundRobin(t, env, 2)
	key := env.Key("read", "write")
	c := env.ClientAt(endpoint, server.StatelessRevision, key, "")
	if got := c.Session.InitializeResult().ProtocolVersion; got != server.StatelessRevision {
		t.Fatalf("negotiated %q, want %s", got, server.StatelessRevision)
	}
	if id := c.Session.ID(); id != "" {
		t.Fatalf("stateless revision got an MCP session id %q", id)
	}

	var started struct {
		SessionID string `json:"session_id"`
		Label     string `json:"label"`
	}
	c.Must("start_session", M{"label": "round robin run"}, &started)
	if !strings.HasPrefix(started.SessionID, "s-") || started.Label != "round robin run" {
		t.Fatalf("start_session: %+v", started)
	}
	meta := mcp.Meta{tools.MetaSessionKey: started.SessionID}
	var inSession []string
	for i := range 4 {
		raw := callMeta(t, c, "create_outlet", M{"name": "RR " + string(rune('A'+i))}, meta)
		inSession = append(inSession, testenv.ID(t, raw))
	}
	// The same handle in the header.
	hc := env.ClientAt(endpoint, server.StatelessRevision, key, started.SessionID)
	inSession = append(inSession, mk(t, hc, "create_outlet", M{"name": "RR header"}))

	// Nothing named: the key's implicit session, the same on every instance.
	var implicit []string
	for i := range 3 {
		implicit = append(implicit, mk(t, c, "create_outlet", M{"name": "implicit " + string(rune('A'+i)), "tier": 2}))
	}
	for i, h := range hits {
		if h.Load() < 3 {
			t.Errorf("instance %d answered %d requests; the proxy should spread them", i, h.Load())
		}
	}
	got := sessionsOf(t, env.Admin(), append(inSession, implicit...)...)
	implicitID := got[implicit[0]]
	if !strings.HasPrefix(implicitID, repo.ImplicitPrefix) {
		t.Fatalf("implicit session %q lacks the prefix %q", implicitID, repo.ImplicitPrefix)
	}
	for _, id := range inSession {
		if got[id] != started.SessionID {
			t.Errorf("change of %s in session %q, want %q", id, got[id], started.SessionID)
		}
	}
	for _, id := range implicit {
		if got[id] != implicitID {
			t.Errorf("change of %s in session %q, want the implicit %q", id, got[id], implicitID)
		}
	}
	var who struct {
		SessionID string `json:"session_id"`
	}
	c.Must("whoami", nil, &who)
	if who.SessionID != implicitID {
		t.Errorf("whoami session %q, want %q", who.SessionID, implicitID)
	}

	// list_sessions finds the run by its label, with its changes.
	var list struct {
		Sessions []repo.Session `json:"sessions"`
	}
	c.Must("list_sessions", M{}, &list)
	byID := map[string]repo.Session{}
	for _, s := range list.Sessions {
		byID[s.ID] = s
	}
	if s := byID[started.SessionID]; s.Kind != "started" || s.Changes != 5 || s.RolledBack || s.Label != "round robin run" || s.LastActiveAt == nil {
		t.Errorf("listed %+v; want the started session with 5 changes", s)
	}
	if s := byID[implicitID]; s.Kind != "implicit" || s.Changes != 3 {
		t.Errorf("listed %+v; want the implicit session with 3 changes", s)
	}

	// Roll back the handle's session: exactly its five changes.
	var rb struct {
		Applied bool `json:"applied"`
		Steps   []struct {
			RecordID string `json:"record_id"`
		}
	}
	c.Must("rollback_session", M{"session_id": started.SessionID}, &rb)
	var undone []string
	for _, s := range rb.Steps {
		undone = append(undone, s.RecordID)
	}
	slices.Sort(undone)
	want := slices.Clone(inSession)
	slices.Sort(want)
	if diff := cmp.Diff(undone, want); diff != "" || !rb.Applied {
		t.Errorf("rollback undid (-got +want):\n%s", diff)
	}
	for _, id := range implicit {
		var o struct {
			ArchivedAt *string `json:"archived_at"`
		}
		c.Must("get_outlet", M{"id": id}, &o)
		if o.ArchivedAt != nil {
			t.Errorf("outlet %s of the implicit session was archived by the other session's rollback", id)
		}
	}
	c.Must("list_sessions", M{"agent_id": byID[started.SessionID].AgentID}, &list)
	for _, s := range list.Sessions {
		if s.ID == started.SessionID && (!s.RolledBack || s.RolledBackChanges != 5) {
			t.Errorf("after rollback listed %+v; want rolled_back", s)
		}
	}
}

// TestSessionHandleIsBoundToItsAgent: a handle from start_session cannot be
// used by another key, on either revision, and nothing is written.
func TestSessionHandleIsBoundToItsAgent(t *testing.T) {
	env := testenv.New(t)
	owner := env.ClientAt(env.URL, server.StatelessRevision, env.Key("read", "write"), "")
	var started struct {
		SessionID string `json:"session_id"`
	}
	owner.Must("start_session", nil, &started)
	for _, rev := range []string{server.StatelessRevision, "2025-03-26"} {
		other := env.ClientAt(env.URL, rev, env.Key("read", "write"), started.SessionID)
		e := other.Fail("create_outlet", M{"name": "intruder " + rev}, "permission_denied")
		if e.Field != tools.SessionHeader {
			t.Errorf("%s: field %q", rev, e.Field)
		}
	}
	var outlets struct{ Total int }
	env.Admin().Must("list_outlets", M{"search": "intruder"}, &outlets)
	if outlets.Total != 0 {
		t.Errorf("%d intruder outlets written", outlets.Total)
	}
}

// TestSessionArgumentsRefused: bad handles and labels are invalid_argument
// naming the field, and nothing is written.
func TestSessionArgumentsRefused(t *testing.T) {
	env := testenv.New(t)
	key := env.Key("read", "write")
	c := env.ClientAt(env.URL, server.StatelessRevision, key, "")
	cases := []struct {
		name  string
		meta  mcp.Meta
		field string
	}{
		{"not a string", mcp.Meta{tools.MetaSessionKey: 42}, "_meta." + tools.MetaSessionKey},
		{"empty", mcp.Meta{tools.MetaSessionKey: " "}, "_meta." + tools.MetaSessionKey},
		{"implicit prefix", mcp.Meta{tools.MetaSessionKey: "auto-x"}, "_meta." + tools.MetaSessionKey},
		{"control characters", mcp.Meta{tools.MetaSessionKey: "a\tb"}, "_meta." + tools.MetaSessionKey},
	}
	for _, tc := range cases {
		res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_outlet", Arguments: M{"name": "bad " + tc.name}, Meta: tc.meta})
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error testenv.Error }
		_ = json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &body)
		if !res.IsError || body.Error.Code != "invalid_argument" || body.Error.Field != tc.field {
			t.Errorf("%s: %+v", tc.name, body.Error)
		}
	}
	h := env.ClientAt(env.URL, server.StatelessRevision, key, "one")
	res, err := h.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_outlet", Arguments: M{"name": "bad both"}, Meta: mcp.Meta{tools.MetaSessionKey: "two"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "invalid_argument") {
		t.Errorf("header and _meta disagreeing: %v %v", err, res)
	}
	e := c.Fail("start_session", M{"label": strings.Repeat("x", repo.MaxLabel+1)}, "invalid_argument")
	if e.Field != "label" {
		t.Errorf("long label: field %q", e.Field)
	}
	var outlets struct{ Total int }
	env.Admin().Must("list_outlets", M{"search": "bad"}, &outlets)
	if outlets.Total != 0 {
		t.Errorf("%d outlets written by refused calls", outlets.Total)
	}
}

// TestOlderRevisionsKeepTheirSessions: on 2025-03-26 (the specification's
// example) and 2024-11-05 a client has an MCP session, changes made without
// a handle belong to it, a _meta handle overrides it, and its rollback
// undoes exactly them.
func TestOlderRevisionsKeepTheirSessions(t *testing.T) {
	env := testenv.New(t)
	for _, rev := range []string{"2025-03-26", "2024-11-05"} {
		c := env.ClientAt(env.URL, rev, env.Key("read", "write"), "")
		if got := c.Session.InitializeResult().ProtocolVersion; got != rev {
			t.Fatalf("negotiated %q, want %s", got, rev)
		}
		mcpID := c.Session.ID()
		if mcpID == "" {
			t.Fatalf("%s: no MCP session", rev)
		}
		a := mk(t, c, "create_outlet", M{"name": "old " + rev})
		var started struct {
			SessionID string `json:"session_id"`
		}
		c.Must("start_session", nil, &started)
		b := testenv.ID(t, callMeta(t, c, "create_outlet", M{"name": "handle " + rev}, mcp.Meta{tools.MetaSessionKey: started.SessionID}))
		got := sessionsOf(t, c, a, b)
		// start_session itself is a call of the MCP session but writes no change.
		if diff := cmp.Diff(got, map[string]string{a: mcpID, b: started.SessionID}); diff != "" {
			t.Errorf("%s sessions (-got +want):\n%s", rev, diff)
		}
		var rb struct {
			Steps []struct {
				RecordID string `json:"record_id"`
			}
		}
		c.Must("rollback_session", M{"session_id": mcpID}, &rb)
		if len(rb.Steps) != 1 || rb.Steps[0].RecordID != a {
			t.Errorf("%s rollback of the MCP session: %+v", rev, rb.Steps)
		}
	}
}

// TestMissingOrUnknownMCPSession: on the stateful revisions a request other
// than initialize without Mcp-Session-Id is 400, and an unknown session 404,
// each with a JSON-RPC error saying what to send.
func TestMissingOrUnknownMCPSession(t *testing.T) {
	env := testenv.New(t)
	post := func(body string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, env.URL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+env.AdminKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	type rpcErr struct {
		ID    any `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	cases := []struct {
		name   string
		body   string
		hdr    map[string]string
		status int
		id     any
		says   string
	}{
		{"tools/list without session", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, nil, 400, float64(7), "Mcp-Session-Id header"},
		{"with a 2025-03-26 version header", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"whoami"}}`, map[string]string{"Mcp-Protocol-Version": "2025-03-26"}, 400, "a", "send initialize first"},
		{"notification without session", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil, 400, nil, "Mcp-Session-Id header"},
		{"unknown session", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{"Mcp-Session-Id": "NOSUCHSESSION", "Mcp-Protocol-Version": "2025-03-26"}, 404, nil, "unknown MCP session"},
	}
	for _, tc := range cases {
		status, body := post(tc.body, tc.hdr)
		var e rpcErr
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			t.Errorf("%s: body %q is not JSON-RPC: %v", tc.name, body, err)
			continue
		}
		if status != tc.status || e.ID != tc.id || e.Error.Code != -32600 || !strings.Contains(e.Error.Message, tc.says) {
			t.Errorf("%s: %d %s; want %d with id %v saying %q", tc.name, status, body, tc.status, tc.id, tc.says)
		}
	}
	// initialize without a session still opens one.
	status, body := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	if status != 200 || !strings.Contains(body, `"protocolVersion":"2025-03-26"`) {
		t.Errorf("initialize: %d %s", status, body)
	}
}

// TestConcurrentFirstCallsShareTheImplicitSession: calls of one key naming no
// session, made at once through two instances, land in one implicit session.
func TestConcurrentFirstCallsShareTheImplicitSession(t *testing.T) {
	env := testenv.New(t)
	endpoint, _ := roundRobin(t, env, 2)
	key := env.Key("read", "write")
	var wg sync.WaitGroup
	ids := make([]string, 6)
	for i := range ids {
		c := env.ClientAt(endpoint, server.StatelessRevision, key, "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			raw, e := c.Call("create_outlet", M{"name": "burst " + string(rune('A'+i))})
			if e != nil {
				t.Errorf("burst %d: %s %s", i, e.Code, e.Message)
				return
			}
			var r struct{ ID string }
			_ = json.Unmarshal(raw, &r)
			ids[i] = r.ID
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	got := sessionsOf(t, env.Admin(), ids...)
	seen := map[string]bool{}
	for _, s := range got {
		seen[s] = true
	}
	// The new session is named after the minute it starts in, so a burst
	// that straddles a minute boundary may split in two; never more.
	if len(seen) < 1 || len(seen) > 2 {
		t.Errorf("burst spread over sessions %v", seen)
	}
}

// TestStatelessRevisionOverRawHTTP: what a client of 2026-07-28 sees on the
// wire. server/discover announces every revision; a call carrying its
// version in _meta and the Mcp-Method/Mcp-Name headers runs without any
// session; the SDK's header checks refuse a mismatch (-32020) and an
// unknown future revision is -32022 naming the supported ones.
func TestStatelessRevisionOverRawHTTP(t *testing.T) {
	env := testenv.New(t)
	post := func(body string, hdr map[string]string) (int, http.Header, string) {
		req, _ := http.NewRequest(http.MethodPost, env.URL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+env.AdminKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	rev := map[string]string{"Mcp-Protocol-Version": "2026-07-28"}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range rev {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}

	status, _, body := post(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`, with(map[string]string{"Mcp-Method": "server/discover"}))
	for _, v := range []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"} {
		if status != 200 || !strings.Contains(body, `"`+v+`"`) {
			t.Errorf("discover: %d %s; want %s among the supported versions", status, body, v)
		}
	}
	status, hdr, body := post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami","arguments":{},`+meta+`}}`,
		with(map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "whoami"}))
	if status != 200 || hdr.Get("Mcp-Session-Id") != "" || !strings.Contains(body, `\"session_id\":\"auto-`) {
		t.Errorf("call: %d session header %q %s", status, hdr.Get("Mcp-Session-Id"), body)
	}
	cases := []struct {
		name string
		body string
		hdr  map[string]string
		code string
	}{
		{"Mcp-Name mismatch", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","arguments":{},` + meta + `}}`, with(map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "list_outlets"}), "-32020"},
		{"no Mcp-Method", `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{` + meta + `}}`, rev, "-32020"},
		{"_meta version differs from header", `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`, with(map[string]string{"Mcp-Method": "tools/list"}), "-32020"},
		{"unknown future revision", `{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`, map[string]string{"Mcp-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"}, "-32022"},
	}
	for _, tc := range cases {
		status, _, body := post(tc.body, tc.hdr)
		if status != 400 || !strings.Contains(body, `"code":`+tc.code) {
			t.Errorf("%s: %d %s; want 400 with code %s", tc.name, status, body, tc.code)
		}
	}
}
