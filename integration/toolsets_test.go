package integration

import (
	"context"
	"sort"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/integration/testenv"
	"outreach/tools"
)

// toolsListed returns the tools a client's tools/list shows, by name, with
// whether each is read-only.
func toolsListed(t *testing.T, c *testenv.Client) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for tool, err := range c.Session.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		out[tool.Name] = tool.Annotations != nil && tool.Annotations.ReadOnlyHint
	}
	return out
}

// TestToolsListByScope: tools/list shows a key only the tools its scopes
// may call; a hidden tool is still refused with permission_denied.
func TestToolsListByScope(t *testing.T) {
	env := testenv.New(t)
	all := toolsListed(t, env.Admin())
	if len(all) != len(tools.All(nil)) {
		t.Errorf("the admin key sees %d tools, want all %d", len(all), len(tools.All(nil)))
	}
	scopeOf := map[string]string{}
	for _, tool := range tools.All(nil) {
		scopeOf[tool.Def.Name] = tool.Scope
	}
	for _, tc := range []struct {
		scopes []string
		allow  map[string]bool
	}{
		{[]string{"read"}, map[string]bool{"read": true}},
		{[]string{"read", "write"}, map[string]bool{"read": true, "write": true}},
	} {
		c := env.Client(env.Key(tc.scopes...), "")
		got := toolsListed(t, c)
		var hidden []string
		for name := range all {
			if _, shown := got[name]; shown != tc.allow[scopeOf[name]] {
				t.Errorf("key %v: %s (scope %s) shown %v", tc.scopes, name, scopeOf[name], shown)
			}
			if !tc.allow[scopeOf[name]] {
				hidden = append(hidden, name)
			}
		}
		if tc.scopes[len(tc.scopes)-1] == "read" {
			for name, readOnly := range got {
				if !readOnly {
					t.Errorf("a read-only key sees the mutating tool %s", name)
				}
			}
		}
		sort.Strings(hidden)
		if len(hidden) == 0 {
			t.Fatalf("key %v: nothing hidden", tc.scopes)
		}
		// A hidden tool is refused as before.
		if !tc.allow["write"] {
			c.Fail("create_outlet", M{"name": "Hidden"}, "permission_denied")
		}
		if !tc.allow["admin"] {
			c.Fail("create_user", M{"name": "X", "email": "x@example.com"}, "permission_denied")
		}
	}
}

// TestToolsets: a server started with some toolsets lists and serves only
// their tools (and the always-on audit toolset).
func TestToolsets(t *testing.T) {
	opt, err := tools.WithToolsets("notes")
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.NewWith(t, testenv.Options{Tools: []tools.Option{opt}})
	c := env.Admin()
	got := toolsListed(t, c)
	for _, want := range []string{"create_note", "list_notes", "get_change_log", "rollback_session", "whoami"} {
		if _, ok := got[want]; !ok {
			t.Errorf("toolsets notes: %s not listed", want)
		}
	}
	for _, absent := range []string{"create_outlet", "list_email_threads", "send_slack_message"} {
		if _, ok := got[absent]; ok {
			t.Errorf("toolsets notes: %s listed", absent)
		}
	}
	res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_outlet", Arguments: M{"name": "Off"}})
	if err == nil && !res.IsError {
		t.Errorf("a tool outside the enabled toolsets ran: %v", res.Content)
	}
}
