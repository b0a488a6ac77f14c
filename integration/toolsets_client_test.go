package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/integration/testenv"
	"outreach/server"
	"outreach/tools"
)

// toolsetClient connects to url on revision version with key and extra
// headers; changed, when not nil, receives notifications/tools/list_changed.
func toolsetClient(t *testing.T, url, version, key string, extra map[string]string, changed chan<- struct{}) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: toolsetTransport(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+key)
		for k, v := range extra {
			r.Header.Set(k, v)
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	var opts *mcp.ClientOptions
	if changed != nil {
		opts = &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "outreach-test", Version: "1"}, opts)
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

type toolsetTransport func(*http.Request) (*http.Response, error)

func (f toolsetTransport) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// listedTools is the tools a session's tools/list shows, by name, with whether
// each only reads, and the bytes of the whole list.
func listedTools(t *testing.T, s *mcp.ClientSession) (map[string]bool, int) {
	t.Helper()
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	out := map[string]bool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl.Annotations != nil && tl.Annotations.ReadOnlyHint
	}
	return out, len(b)
}

// toolsetsOf is the toolsets whose tools a list holds.
func toolsetsOf(list map[string]bool) []string {
	var out []string
	for _, tl := range tools.All(nil) {
		if _, ok := list[tl.Def.Name]; ok && !slices.Contains(out, tl.Toolset) {
			out = append(out, tl.Toolset)
		}
	}
	slices.Sort(out)
	return out
}

func callText(t *testing.T, s *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return err.Error(), true
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

// TestToolsetsPerClient: with the default setting a client naming nothing
// is listed the lean default within the budget, notes included (a call is
// logged without enabling a toolset first); the URL and the headers
// choose toolsets and read-only per client, without a restart; an unknown
// name is a 400 naming the toolsets; the key's scopes still limit the list.
func TestToolsetsPerClient(t *testing.T) {
	opt, err := tools.WithToolsets("")
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.NewWith(t, testenv.Options{Tools: []tools.Option{opt}})
	base := strings.TrimSuffix(env.URL, "/mcp")

	first := toolsetClient(t, env.URL, testenv.ClientRevision, env.AdminKey, nil, nil)
	def, size := listedTools(t, first)
	if got, want := toolsetsOf(def), []string{"audit", "contacts", "notes", "opportunities", "search"}; !slices.Equal(got, want) {
		t.Errorf("default list: toolsets %v, want %v", got, want)
	}
	if size > tools.ToolsListBudget {
		t.Errorf("default tools/list is %d bytes, over the budget of %d", size, tools.ToolsListBudget)
	}
	for _, name := range []string{"list_toolsets", "enable_toolset", "search", "create_contact", "create_note", "list_notes", "get_interaction_log"} {
		if _, ok := def[name]; !ok {
			t.Errorf("default list lacks %s", name)
		}
	}
	var jane struct{ ID string }
	if text, isErr := callText(t, first, "create_contact", map[string]any{"first_name": "Jane", "last_name": "Doe"}); isErr || json.Unmarshal([]byte(text), &jane) != nil {
		t.Fatalf("create_contact: %s", text)
	}
	if text, isErr := callText(t, first, "create_note", map[string]any{"type": "phone_call", "content": "called Jane", "contact_ids": []string{jane.ID}}); isErr {
		t.Errorf("create_note on the default list: %s", text)
	}

	for _, tc := range []struct {
		name     string
		path     string
		headers  map[string]string
		key      string
		toolsets []string
		readOnly bool
	}{
		{name: "url", path: "/mcp/x/notes,emails", toolsets: []string{"audit", "emails", "notes"}},
		{name: "url readonly", path: "/mcp/x/notes/readonly", toolsets: []string{"audit", "notes"}, readOnly: true},
		{name: "readonly", path: "/mcp/readonly", toolsets: []string{"audit", "contacts", "notes", "opportunities", "search"}, readOnly: true},
		{name: "headers", path: "/mcp", headers: map[string]string{server.HeaderToolsets: "media, Notes", server.HeaderReadonly: "true"}, toolsets: []string{"audit", "media", "notes"}, readOnly: true},
		{name: "url and header add up", path: "/mcp/x/campaigns", headers: map[string]string{server.HeaderToolsets: "coverage"}, toolsets: []string{"audit", "campaigns", "coverage"}},
		{name: "all", path: "/mcp/x/all", toolsets: tools.ToolsetNames()},
		{name: "read key", path: "/mcp/x/notes", key: env.Key("read"), toolsets: []string{"audit", "notes"}, readOnly: true},
	} {
		key := tc.key
		if key == "" {
			key = env.AdminKey
		}
		got, _ := listedTools(t, toolsetClient(t, base+tc.path, testenv.ClientRevision, key, tc.headers, nil))
		want := slices.Clone(tc.toolsets)
		slices.Sort(want)
		if ts := toolsetsOf(got); !slices.Equal(ts, want) {
			t.Errorf("%s: toolsets %v, want %v", tc.name, ts, want)
		}
		for name, ro := range got {
			if tc.readOnly && !ro {
				t.Errorf("%s: the read-only list has %s, which writes", tc.name, name)
			}
		}
		if !tc.readOnly {
			if _, ok := got["create_note"]; !ok && slices.Contains(tc.toolsets, "notes") {
				t.Errorf("%s: create_note not listed", tc.name)
			}
		}
	}

	// A selection's tools are what the session can call: a tool outside it
	// is not found, and a read-only selection refuses a write.
	ro := toolsetClient(t, base+"/mcp/readonly", testenv.ClientRevision, env.AdminKey, nil, nil)
	if text, isErr := callText(t, ro, "create_contact", map[string]any{"first_name": "A", "last_name": "B"}); !isErr {
		t.Errorf("create_contact on /mcp/readonly ran: %s", text)
	}
	if text, isErr := callText(t, ro, "search", map[string]any{"query": "x"}); isErr {
		t.Errorf("search on /mcp/readonly: %s", text)
	}

	// Unknown names and bad values are 400s that say what is allowed.
	for _, tc := range []struct{ path, header, value, want string }{
		{"/mcp/x/notes,bogus", "", "", `unknown toolset \"bogus\"`},
		{"/mcp", server.HeaderToolsets, "bogus", `unknown toolset \"bogus\"`},
		{"/mcp", server.HeaderReadonly, "maybe", "must be true or false"},
		{"/mcp/y/notes", "", "", "unknown path"},
	} {
		req, _ := http.NewRequest(http.MethodPost, base+tc.path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Authorization", "Bearer "+env.AdminKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.header != "" {
			req.Header.Set(tc.header, tc.value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s %s=%q: %d %s; want 400 with %q", tc.path, tc.header, tc.value, resp.StatusCode, body, tc.want)
		}
		if strings.Contains(tc.want, "toolset") && !strings.Contains(string(body), "notifications, messaging") {
			t.Errorf("%s: the 400 does not name the toolsets: %s", tc.path, body)
		}
	}
}

// TestDynamicToolsets: an agent reaches every tool through list_toolsets
// and enable_toolset. On a stateful revision the toolsets are added to its
// MCP session alone, announced with notifications/tools/list_changed; on
// 2026-07-28 they are kept for the key and its X-Agent-Session-Id.
func TestDynamicToolsets(t *testing.T) {
	opt, err := tools.WithToolsets("")
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.NewWith(t, testenv.Options{Tools: []tools.Option{opt}})
	key := env.Key("read", "write")

	t.Run("stateful", func(t *testing.T) {
		changed := make(chan struct{}, 1)
		s := toolsetClient(t, env.URL, testenv.ClientRevision, key, nil, changed)
		other := toolsetClient(t, env.URL, testenv.ClientRevision, key, nil, nil)
		var view struct {
			Toolsets []struct {
				Name    string `json:"name"`
				Tools   int    `json:"tools"`
				Enabled bool   `json:"enabled"`
			} `json:"toolsets"`
			Added []string `json:"added"`
		}
		text, isErr := callText(t, s, "list_toolsets", map[string]any{})
		if isErr || json.Unmarshal([]byte(text), &view) != nil {
			t.Fatalf("list_toolsets: %s", text)
		}
		var off []string
		for _, ts := range view.Toolsets {
			if !ts.Enabled && ts.Tools > 0 {
				off = append(off, ts.Name)
			}
		}
		if len(off) == 0 || slices.Contains(off, "search") {
			t.Fatalf("list_toolsets: not enabled %v", off)
		}
		if text, isErr := callText(t, s, "create_outlet", map[string]any{"name": "x"}); !isErr {
			t.Fatalf("create_outlet before enable_toolset ran: %s", text)
		}
		text, isErr = callText(t, s, "enable_toolset", map[string]any{"toolsets": off})
		if isErr || json.Unmarshal([]byte(text), &view) != nil || len(view.Added) == 0 {
			t.Fatalf("enable_toolset: %s", text)
		}
		select {
		case <-changed:
		case <-time.After(30 * time.Second):
			t.Fatal("no notifications/tools/list_changed after enable_toolset")
		}
		got, _ := listedTools(t, s)
		for _, tl := range tools.All(nil) {
			if _, ok := got[tl.Def.Name]; !ok && tl.Scope != "admin" {
				t.Errorf("after enabling every toolset, %s is not listed", tl.Def.Name)
			}
		}
		if text, isErr := callText(t, s, "create_outlet", map[string]any{"name": "The Daily Planet"}); isErr {
			t.Errorf("create_outlet after enable_toolset: %s", text)
		}
		// The other MCP session of the same key is not widened.
		if got, _ := listedTools(t, other); slices.Contains(toolsetsOf(got), "outlets") {
			t.Errorf("another MCP session sees the enabled toolsets: %v", toolsetsOf(got))
		}
		// A name the server does not know is refused, naming the toolsets.
		if text, isErr := callText(t, s, "enable_toolset", map[string]any{"toolsets": []string{"bogus"}}); !isErr || !strings.Contains(text, "invalid_argument") || !strings.Contains(text, "notes") {
			t.Errorf("enable_toolset bogus: %s", text)
		}
	})

	t.Run("stateless", func(t *testing.T) {
		a := toolsetClient(t, env.URL, server.StatelessRevision, key, map[string]string{tools.SessionHeader: "run-a"}, nil)
		b := toolsetClient(t, env.URL, server.StatelessRevision, key, map[string]string{tools.SessionHeader: "run-b"}, nil)
		if got, _ := listedTools(t, a); slices.Contains(toolsetsOf(got), "outlets") {
			t.Fatalf("outlets listed before enable_toolset: %v", toolsetsOf(got))
		}
		if text, isErr := callText(t, a, "enable_toolset", map[string]any{"toolsets": []string{"outlets"}}); isErr || !strings.Contains(text, "create_outlet") {
			t.Fatalf("enable_toolset: %s", text)
		}
		got, _ := listedTools(t, a)
		if !slices.Contains(toolsetsOf(got), "outlets") {
			t.Errorf("agent session run-a: outlets not listed after enable_toolset: %v", toolsetsOf(got))
		}
		if text, isErr := callText(t, a, "list_outlets", map[string]any{}); isErr {
			t.Errorf("list_outlets after enable_toolset: %s", text)
		}
		if got, _ := listedTools(t, b); slices.Contains(toolsetsOf(got), "outlets") {
			t.Errorf("agent session run-b sees run-a's toolsets: %v", toolsetsOf(got))
		}
	})
}
