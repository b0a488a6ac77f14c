package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sessionRevisions are the revisions the clients are driven on: the
// stateless one, and the specification's example of the stateful ones.
var sessionRevisions = []string{"2026-07-28", "2025-03-26"}

// checkSessionWork checks, with a Go client of its own, what a client did in
// a session: each record of inSession was created in session and is archived
// now (rolled back), and outside was created in another session and stands.
func checkSessionWork(t *testing.T, c *mcpConn, session string, inSession []string, outside string) {
	t.Helper()
	type entry struct {
		Action    string `json:"action"`
		SessionID string `json:"session_id"`
	}
	for _, id := range append(slices.Clone(inSession), outside) {
		var log struct {
			Changes []entry `json:"changes"`
		}
		c.must(t, "get_change_log", map[string]any{"record_id": id}, &log)
		var got []entry
		for i := len(log.Changes) - 1; i >= 0; i-- { // oldest first
			got = append(got, log.Changes[i])
		}
		if id == outside {
			if len(got) != 1 || got[0].Action != "create" || got[0].SessionID == session {
				t.Errorf("outside record %s: %+v; want one create outside session %s", id, got, session)
			}
			continue
		}
		// The rollback belongs to the session of the call that made it (the
		// rolling-back call named no handle).
		if len(got) != 2 || got[0] != (entry{"create", session}) || got[1].Action != "rollback" || got[1].SessionID == session {
			t.Errorf("record %s: %+v; want a create in %s, then a rollback outside it", id, got, session)
		}
		var o struct {
			ArchivedAt *string `json:"archived_at"`
		}
		c.must(t, "get_outlet", map[string]any{"id": id}, &o)
		if o.ArchivedAt == nil {
			t.Errorf("record %s of the rolled-back session is not archived", id)
		}
	}
}

// TestEndToEndSessionsTypeScriptSDK drives the built binary with the
// official TypeScript SDK (v2, integration/e2e/sessions.mjs) on 2026-07-28
// and on 2025-03-26: its changes under a start_session handle (in _meta and
// in the header) are attributed to that session, a change without a handle
// is not, and rollback_session undoes exactly the handle's changes.
func TestEndToEndSessionsTypeScriptSDK(t *testing.T) {
	dir := requireNodeClients(t)
	srv := startServer(t, dataDir(t))
	c := mustDial(t, srv.URL, srv.FirstKey)
	for _, rev := range sessionRevisions {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "node", "sessions.mjs", srv.URL, srv.FirstKey, rev)
		cmd.Dir = dir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		cancel()
		if err != nil {
			t.Fatalf("node sessions.mjs %s: %v\nstdout:\n%s\nstderr:\n%s", rev, err, out, stderr.String())
		}
		var got struct {
			Negotiated     string   `json:"negotiated"`
			MCPSession     string   `json:"mcp_session"`
			Session        string   `json:"session"`
			InSession      []string `json:"in_session"`
			Outside        string   `json:"outside"`
			UnnamedSession string   `json:"unnamed_session"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: client output %q: %v", rev, out, err)
		}
		if got.Negotiated != rev || len(got.InSession) != 3 {
			t.Fatalf("%s: %+v", rev, got)
		}
		// Without a handle: the MCP session on 2025-03-26, the key's
		// implicit session on 2026-07-28.
		if rev == "2025-03-26" && got.UnnamedSession != got.MCPSession {
			t.Errorf("%s: unnamed call in %q, want the MCP session %q", rev, got.UnnamedSession, got.MCPSession)
		}
		if rev == "2026-07-28" && (got.MCPSession != "" || !strings.HasPrefix(got.UnnamedSession, "auto-")) {
			t.Errorf("%s: MCP session %q, unnamed call in %q; want none and an implicit session", rev, got.MCPSession, got.UnnamedSession)
		}
		checkSessionWork(t, c, got.Session, got.InSession, got.Outside)
	}
}

// versionProxy forwards to target and records the Mcp-Protocol-Version of
// every request after the handshake; with downgrade set, it makes an
// initialize ask for that revision (the Inspector always offers its newest).
type versionProxy struct {
	mu   sync.Mutex
	seen map[string]int
}

func newVersionProxy(t *testing.T, target, downgrade string) (string, *versionProxy) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	vp := &versionProxy{seen: map[string]int{}}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(&url.URL{Scheme: u.Scheme, Host: u.Host})
		pr.Out.URL.Path = u.Path
	}, FlushInterval: -1}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg map[string]any
		if json.Unmarshal(body, &msg) == nil && msg["method"] == "initialize" {
			if downgrade != "" {
				msg["params"].(map[string]any)["protocolVersion"] = downgrade
				body, _ = json.Marshal(msg)
			}
		} else if r.Method == http.MethodPost {
			vp.mu.Lock()
			vp.seen[r.Header.Get("Mcp-Protocol-Version")]++
			vp.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + u.Path, vp
}

func (vp *versionProxy) versions() []string {
	vp.mu.Lock()
	defer vp.mu.Unlock()
	var out []string
	for v := range vp.seen {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// TestInspectorSessions drives the built binary with the MCP Inspector's
// command line on 2026-07-28 (--protocol-era modern) and on 2025-03-26 (its
// legacy handshake, asked down to 2025-03-26 by a proxy): each CLI call is a
// new connection, so the work of a run is held together by a start_session
// handle, sent as --tool-metadata outreach/session_id and as the
// X-Agent-Session-Id header; rollback_session through the Inspector undoes
// exactly that work.
func TestInspectorSessions(t *testing.T) {
	dir := requireNodeClients(t)
	srv := startServer(t, dataDir(t))
	c := mustDial(t, srv.URL, srv.FirstKey)
	for _, rev := range sessionRevisions {
		args := []string{"--protocol-era", "modern"}
		downgrade := ""
		if rev < "2026-07-28" {
			args, downgrade = []string{"--protocol-era", "legacy"}, rev
		}
		endpoint, vp := newVersionProxy(t, srv.URL, downgrade)
		inspect := func(header []string, extra ...string) map[string]any {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			base := []string{filepath.Join("node_modules", ".bin", "mcp-inspector"), "--cli", endpoint, "--transport", "http",
				"--header", "Authorization: Bearer " + srv.FirstKey}
			base = append(append(base, header...), args...)
			cmd := exec.CommandContext(ctx, "node", append(append(base, "--method", "tools/call"), extra...)...)
			cmd.Dir = dir
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("inspector %s %v: %v\n%s\n%s", rev, extra, err, out, stderr.String())
			}
			var res struct {
				IsError bool                          `json:"isError"`
				Content []struct{ Type, Text string } `json:"content"`
			}
			if err := json.Unmarshal(out, &res); err != nil || res.IsError || len(res.Content) == 0 {
				t.Fatalf("inspector %s %v: %s", rev, extra, out)
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(res.Content[0].Text), &v); err != nil {
				t.Fatalf("inspector %s %v: %s", rev, extra, res.Content[0].Text)
			}
			return v
		}
		started := inspect(nil, "--tool-name", "start_session", "--tool-args-json", `{"label":"inspector `+rev+`"}`)
		session, _ := started["session_id"].(string)
		if !strings.HasPrefix(session, "s-") {
			t.Fatalf("%s: start_session: %v", rev, started)
		}
		var inSession []string
		o := inspect(nil, "--tool-name", "create_outlet", "--tool-args-json", `{"name":"Inspector meta `+rev+`"}`, "--tool-metadata", "outreach/session_id="+session)
		inSession = append(inSession, o["id"].(string))
		o = inspect([]string{"X-Agent-Session-Id: " + session}, "--tool-name", "create_outlet", "--tool-args-json", `{"name":"Inspector header `+rev+`"}`)
		inSession = append(inSession, o["id"].(string))
		outside := inspect(nil, "--tool-name", "create_outlet", "--tool-args-json", `{"name":"Inspector unnamed `+rev+`"}`)["id"].(string)
		rb := inspect(nil, "--tool-name", "rollback_session", "--tool-args-json", `{"session_id":"`+session+`"}`)
		if rb["applied"] != true {
			t.Errorf("%s: rollback: %v", rev, rb)
		}
		if diff := cmp.Diff(vp.versions(), []string{rev}); diff != "" {
			t.Errorf("%s: Mcp-Protocol-Version of the Inspector's requests (-got +want):\n%s", rev, diff)
		}
		checkSessionWork(t, c, session, inSession, outside)
	}
}
