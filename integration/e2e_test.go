package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"outreach/tools"
)

// requireNodeClients skips (or, in CI, fails) when the npm clients of the
// end-to-end tests are not installed: scripts/test.sh installs them.
func requireNodeClients(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("e2e")
	if err != nil {
		t.Fatal(err)
	}
	_, errNode := exec.LookPath("node")
	_, errSDK := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	_, errInspector := os.Stat(filepath.Join(dir, "node_modules", ".bin", "mcp-inspector"))
	if errNode == nil && errSDK == nil && errInspector == nil {
		return dir
	}
	msg := "the end-to-end MCP clients are not installed (node and integration/e2e/node_modules); run ./scripts/test.sh, or `npm ci` in integration/e2e"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// TestEndToEndTypeScriptSDK starts the built binary on an empty data
// directory and drives it with the official TypeScript MCP SDK
// (integration/e2e/client.mjs), then checks what the client saw against the
// server's own records.
func TestEndToEndTypeScriptSDK(t *testing.T) {
	dir := requireNodeClients(t)
	srv := startServer(t, dataDir(t))
	if srv.FirstKey == "" {
		t.Fatalf("first start printed no key:\n%s", srv.stdout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "client.mjs", srv.URL, srv.FirstKey)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	var got struct {
		ProtocolPinned string   `json:"protocol_pinned"`
		ProtocolLatest string   `json:"protocol_latest"`
		Tools          []string `json:"tools"`
		Whoami         struct {
			UserID    string   `json:"user_id"`
			AgentID   string   `json:"agent_id"`
			KeyID     string   `json:"key_id"`
			SessionID string   `json:"session_id"`
			Scopes    []string `json:"scopes"`
		} `json:"whoami"`
		User struct {
			ID    string `json:"id"`
			Email string `json:"email"`
		} `json:"user"`
		UnknownArgumentError string `json:"unknown_argument_error"`
		BadKeyStatus         int    `json:"bad_key_status"`
		BadKeySDKCode        int    `json:"bad_key_sdk_code"`
		BadKeyError          string `json:"bad_key_error"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	if got.ProtocolPinned != "2025-03-26" || got.ProtocolLatest < "2025-06-18" {
		t.Errorf("protocol revisions: pinned %q, latest %q", got.ProtocolPinned, got.ProtocolLatest)
	}

	// The TypeScript client saw the same tools, user and change as the server holds.
	c := mustDial(t, srv.URL, srv.FirstKey)
	var tools struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := c.rpc(ctx, "tools/list", map[string]any{}, &tools); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, tl := range tools.Tools {
		want = append(want, tl.Name)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, got.Tools); diff != "" {
		t.Errorf("tools/list over the SDK (-go +ts):\n%s", diff)
	}
	var who struct {
		UserID  string `json:"user_id"`
		AgentID string `json:"agent_id"`
	}
	c.must(t, "whoami", nil, &who)
	if got.Whoami.UserID != who.UserID || got.Whoami.AgentID != who.AgentID || got.Whoami.SessionID == "" {
		t.Errorf("whoami over the SDK = %+v; the key is of user %s, agent %s", got.Whoami, who.UserID, who.AgentID)
	}
	if diff := cmp.Diff([]string{"admin", "read", "write"}, got.Whoami.Scopes); diff != "" {
		t.Errorf("scopes (-want +got):\n%s", diff)
	}
	var log struct {
		Total   int `json:"total"`
		Changes []struct {
			Action    string `json:"action"`
			Tool      string `json:"tool"`
			UserID    string `json:"user_id"`
			AgentID   string `json:"agent_id"`
			SessionID string `json:"session_id"`
		} `json:"changes"`
	}
	c.must(t, "get_change_log", map[string]any{"record_id": got.User.ID}, &log)
	if log.Total != 1 {
		t.Fatalf("change entries of the user created over the SDK: %d, want 1", log.Total)
	}
	e := log.Changes[0]
	if e.Action != "create" || e.Tool != "create_user" || e.UserID != who.UserID || e.AgentID != who.AgentID || e.SessionID != got.Whoami.SessionID {
		t.Errorf("change entry %+v; want create by create_user in session %s", e, got.Whoami.SessionID)
	}
	if got.UnknownArgumentError != "invalid_argument" {
		t.Errorf("unknown argument: %q, want invalid_argument", got.UnknownArgumentError)
	}
	if got.BadKeyStatus != 401 || got.BadKeySDKCode != 401 || !strings.Contains(got.BadKeyError, "checksum") {
		t.Errorf("bad key: status %d, SDK code %d, error %q; want 401 with the reason", got.BadKeyStatus, got.BadKeySDKCode, got.BadKeyError)
	}
}

// TestInspectorCLI lists the tools and calls whoami with the MCP Inspector's
// command line, as an analyst would to look at the service.
func TestInspectorCLI(t *testing.T) {
	dir := requireNodeClients(t)
	srv := startServer(t, dataDir(t))
	inspect := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		base := []string{filepath.Join("node_modules", ".bin", "mcp-inspector"), "--cli", srv.URL, "--transport", "http",
			"--header", "Authorization: Bearer " + srv.FirstKey}
		cmd := exec.CommandContext(ctx, "node", append(base, args...)...)
		cmd.Dir = dir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("inspector %v: %v\n%s\n%s", args, err, out, stderr.String())
		}
		return out
	}
	var list struct {
		Tools []struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Annotations map[string]any `json:"annotations"`
		} `json:"tools"`
	}
	if out := inspect("--method", "tools/list"); json.Unmarshal(out, &list) != nil || len(list.Tools) == 0 {
		t.Fatalf("tools/list: %s", out)
	}
	for _, tl := range list.Tools {
		if tl.Description == "" || tl.Annotations == nil {
			t.Errorf("%s: description %q, annotations %v", tl.Name, tl.Description, tl.Annotations)
		}
	}
	var call struct {
		Content []struct{ Type, Text string } `json:"content"`
	}
	out := inspect("--method", "tools/call", "--tool-name", "whoami")
	if err := json.Unmarshal(out, &call); err != nil || len(call.Content) != 1 || call.Content[0].Type != "text" || !strings.Contains(call.Content[0].Text, `"key_name":"first admin key"`) {
		t.Errorf("whoami through the inspector: %s", out)
	}
}

// TestEndToEndDynamicToolsets starts the binary with its default toolsets
// and has the TypeScript SDK (integration/e2e/discovery.mjs) reach every
// tool through list_toolsets and enable_toolset, told by
// notifications/tools/list_changed, and name toolsets in the URL.
func TestEndToEndDynamicToolsets(t *testing.T) {
	dir := requireNodeClients(t)
	srv := startServer(t, dataDir(t), "OUTREACH_TOOLSETS=")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "discovery.mjs", srv.URL, srv.FirstKey)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node discovery.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	var got struct {
		DefaultTools  []string `json:"default_tools"`
		DefaultBytes  int      `json:"default_bytes"`
		AfterTools    []string `json:"after_tools"`
		ReadonlyTools []string `json:"readonly_tools"`
		Templates     []string `json:"resource_templates"`
		Contact       struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"resource_contact"`
		Listed     []string `json:"resources_listed"`
		Prompts    []string `json:"prompts"`
		Pitch      string   `json:"pitch_prompt"`
		Completion []string `json:"completion"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	var every, notesReads []string
	for _, tl := range tools.All(nil) {
		every = append(every, tl.Def.Name)
		if (tl.Toolset == "notes" || tl.Toolset == "audit") && tl.Def.Annotations.ReadOnlyHint {
			notesReads = append(notesReads, tl.Def.Name)
		}
	}
	slices.Sort(every)
	slices.Sort(notesReads)
	if len(got.DefaultTools) >= len(every) || got.DefaultBytes > tools.ToolsListBudget {
		t.Errorf("default list: %d of %d tools, %d bytes (budget %d)", len(got.DefaultTools), len(every), got.DefaultBytes, tools.ToolsListBudget)
	}
	if diff := cmp.Diff(every, got.AfterTools); diff != "" {
		t.Errorf("after enable_toolset, the tools listed (-every tool +listed):\n%s", diff)
	}
	if diff := cmp.Diff(notesReads, got.ReadonlyTools); diff != "" {
		t.Errorf("/mcp/x/notes/readonly lists (-want +got):\n%s", diff)
	}
	// Resources, prompts and completions, as the TypeScript client saw them.
	if !slices.Contains(got.Templates, "outreach://contacts/{id}") || got.Contact.Name != "Grace Hopper" ||
		!slices.Contains(got.Listed, "outreach://contacts/"+got.Contact.ID) {
		t.Errorf("resources: templates %v, contact %+v, listed %v", got.Templates, got.Contact, got.Listed)
	}
	if !slices.Contains(got.Prompts, "prepare_pitch") || !strings.Contains(got.Pitch, got.Contact.ID) || !cmp.Equal(got.Completion, []string{"Grace Hopper"}) {
		t.Errorf("prompts %v, completion %v, pitch prompt %.300s", got.Prompts, got.Completion, got.Pitch)
	}
}
