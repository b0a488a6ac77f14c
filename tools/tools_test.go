package tools

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
)

var update = flag.Bool("update", false, "rewrite the tool definition snapshots under testdata/tools")

// TestToolDefinitionsSnapshot fails when a tool's definition (name,
// description, annotations, input schema) drifts from its snapshot: a change
// of the public surface must be deliberate (go test ./tools -update).
func TestToolDefinitionsSnapshot(t *testing.T) {
	seen := map[string]bool{}
	for _, tool := range All(nil) {
		b, err := json.MarshalIndent(tool.Def, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, '\n')
		path := filepath.Join("testdata", "tools", tool.Def.Name+".json")
		seen[filepath.Base(path)] = true
		if *update {
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: no snapshot (run go test ./tools -update): %v", tool.Def.Name, err)
			continue
		}
		if diff := cmp.Diff(string(want), string(b)); diff != "" {
			t.Errorf("%s definition drifted (-snapshot +now); if intended, run go test ./tools -update:\n%s", tool.Def.Name, diff)
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "tools", "*.json"))
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("snapshot %s has no tool", f)
		}
	}
}

// TestToolInventory checks the whole list: unique verb_noun names, a
// description on every tool and every parameter (not restating the range
// its schema gives), and annotations that are its kind's, the kind its
// name says.
func TestToolInventory(t *testing.T) {
	name := regexp.MustCompile(`^[a-z]+(_[a-z0-9]+)*$`)
	names := map[string]bool{}
	tools := All(nil)
	if len(tools) < 60 {
		t.Errorf("only %d tools", len(tools))
	}
	for _, tool := range tools {
		d := tool.Def
		if names[d.Name] {
			t.Errorf("duplicate tool %s", d.Name)
		}
		names[d.Name] = true
		if !name.MatchString(d.Name) {
			t.Errorf("%s: not a verb_noun name", d.Name)
		}
		if len(strings.TrimSpace(d.Description)) < 20 {
			t.Errorf("%s: description too short: %q", d.Name, d.Description)
		}
		a := d.Annotations
		if a == nil || a.OpenWorldHint == nil {
			t.Errorf("%s: annotations not explicit", d.Name)
			continue
		}
		if diff := cmp.Diff(a, annotationsOf(tool.kind)); diff != "" {
			t.Errorf("%s: annotations are not its kind's (-got +want):\n%s", d.Name, diff)
		}
		if want := kindByName(d.Name); tool.kind.base() != want {
			t.Errorf("%s: kind %d, but its name says %d", d.Name, tool.kind.base(), want)
		}
		if admin := tool.Toolset == "keys" && d.Name != "list_users"; (tool.Scope == "admin") != admin {
			t.Errorf("%s: scope %s", d.Name, tool.Scope)
		}
		s, ok := d.InputSchema.(*jsonschema.Schema)
		if !ok || s.Type != "object" {
			t.Errorf("%s: input schema is not an object schema", d.Name)
			continue
		}
		if s.AdditionalProperties == nil {
			t.Errorf("%s: unknown arguments are not refused by the schema", d.Name)
		}
		for p, ps := range s.Properties {
			if strings.TrimSpace(ps.Description) == "" {
				t.Errorf("%s.%s: no description", d.Name, p)
			}
			// The schema's minimum and maximum are the range; a description
			// saying it again is bytes in every tools/list, and drifts.
			if ps.Minimum != nil && ps.Maximum != nil && strings.Contains(ps.Description, fmt.Sprintf("%g to %g", *ps.Minimum, *ps.Maximum)) {
				t.Errorf("%s.%s: the description restates the range of its minimum and maximum: %q", d.Name, p, ps.Description)
			}
		}
		for _, r := range s.Required {
			if s.Properties[r] == nil {
				t.Errorf("%s: required %s is not a property", d.Name, r)
			}
		}
	}
	for _, want := range []string{"create_note", "get_note", "list_notes", "update_note", "add_note_link", "remove_note_link",
		"archive_note", "restore_note", "get_interaction_log", "create_agent_key", "list_outlets", "create_outlet", "whoami",
		"sync_emails", "import_email", "list_email_threads", "get_email_thread", "search_emails", "get_contact_emails",
		"link_email_opportunity", "unlink_email_opportunity"} {
		if !names[want] {
			t.Errorf("missing tool %s", want)
		}
	}
	// The catalogue's Notifications and Messaging tools; Messaging reaches
	// outside the service, so its tools say so (openWorldHint).
	messaging := map[string]bool{"send_slack_message": true, "ask_slack": true, "get_slack_answer": true, "list_questions": true}
	for _, want := range []string{"subscribe_opportunity", "unsubscribe_opportunity", "list_subscriptions", "list_notifications",
		"mark_notifications_read", "send_slack_message", "ask_slack", "get_slack_answer", "list_questions"} {
		if !names[want] {
			t.Errorf("missing tool %s", want)
		}
	}
	for _, tool := range tools {
		if a := tool.Def.Annotations; messaging[tool.Def.Name] && (a == nil || a.OpenWorldHint == nil || !*a.OpenWorldHint) {
			t.Errorf("%s: a Messaging tool without openWorldHint true", tool.Def.Name)
		}
	}
}

// kindByName is what a tool's verb says it does, held apart from the
// kinds the tools declare: a tool filed under the wrong kind (a list as a
// change, a create as destructive) fails TestToolInventory.
func kindByName(name string) kind {
	verb, _, _ := strings.Cut(name, "_")
	switch {
	case name == "get_slack_answer" || name == "list_questions":
		return readOut // they read Slack's replies
	case verb == "search" || name == "whoami" || verb == "get" || verb == "list" || verb == "render" || name == "enable_toolset":
		return read
	case verb == "create" || verb == "upload" || verb == "subscribe" || verb == "start" || verb == "share" || name == "import_email":
		return create
	case verb == "send" || verb == "ask" || verb == "request" || verb == "sync":
		return send
	}
	return change // update, archive, restore, add, remove, link, unlink, attach, mark, revoke, rollback, import
}

// TestToolOutputSchemas checks that every tool declares the schema of its
// real result type (outputs.go), an object as MCP requires, and that the
// table names no tool that does not exist.
func TestToolOutputSchemas(t *testing.T) {
	names := map[string]bool{}
	for _, tool := range All(nil) {
		names[tool.Def.Name] = true
		if outputs[tool.Def.Name] == nil {
			t.Errorf("%s: no result type in outputs.go", tool.Def.Name)
		}
		s, ok := tool.Def.OutputSchema.(*jsonschema.Schema)
		if !ok || s.Type != "object" {
			t.Errorf("%s: output schema is not an object schema: %v", tool.Def.Name, tool.Def.OutputSchema)
		}
	}
	for name := range outputs {
		if !names[name] {
			t.Errorf("outputs.go names %s, which is no tool", name)
		}
	}
}

// TestToolsets checks the toolset setting: names, core, all, the
// always-on audit toolset, and refusal of unknown names.
func TestToolsets(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		want    []string
		wantErr bool
	}{
		{spec: "", want: ToolsetNames()},
		{spec: "core", want: CoreToolsets()},
		{spec: "all", want: ToolsetNames()},
		{spec: "notes", want: []string{"audit", "notes"}},
		{spec: " Notes , emails,notes", want: []string{"audit", "emails", "notes"}},
		{spec: "core,messaging", want: append(CoreToolsets(), "messaging")},
		{spec: "notes,bogus", wantErr: true},
	} {
		opt, err := WithToolsets(tc.spec)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: error %v, want error %v", tc.spec, err, tc.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		got := map[string]bool{}
		for _, tool := range All(nil, opt) {
			got[tool.Toolset] = true
		}
		want := map[string]bool{}
		for _, n := range tc.want {
			want[n] = true
		}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("%q: toolsets served (-got +want):\n%s", tc.spec, diff)
		}
	}
	if n, all := len(All(nil, must(WithToolsets("core")))), len(All(nil)); n >= all || n == 0 {
		t.Errorf("the core set has %d of %d tools", n, all)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestParseRateLimits checks the RATE[,BURST] settings.
func TestParseRateLimits(t *testing.T) {
	for _, tc := range []struct {
		calls, requests string
		want            RateLimits
		wantErr         bool
	}{
		{calls: DefaultCallRate, requests: DefaultRequestRate, want: RateLimits{Calls: 10, CallBurst: 100, Requests: 50, RequestBurst: 500}},
		{calls: "2", requests: "0", want: RateLimits{Calls: 2, CallBurst: 20, Requests: 0, RequestBurst: 1}},
		{calls: " 0.5 , 3 ", requests: "1,1", want: RateLimits{Calls: 0.5, CallBurst: 3, Requests: 1, RequestBurst: 1}},
		{calls: "-1", requests: "1", wantErr: true},
		{calls: "fast", requests: "1", wantErr: true},
		{calls: "1,0", requests: "1", wantErr: true},
		{calls: "1", requests: "1,x", wantErr: true},
	} {
		got, err := ParseRateLimits(tc.calls, tc.requests)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q %q: error %v, want error %v", tc.calls, tc.requests, err, tc.wantErr)
			continue
		}
		if err == nil {
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("%q %q (-got +want):\n%s", tc.calls, tc.requests, diff)
			}
		}
	}
}
