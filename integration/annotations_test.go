package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/integration/testenv"
)

// TestToolAnnotationsByKind reads every tool's annotations from tools/list
// and holds them to one rule, from what the tool's name says it does: a get,
// list or search only reads (readOnlyHint, idempotentHint), a create adds
// (destructiveHint false), a change (update, archive, restore, link,
// unlink, revoke, rollback, import into existing records) is destructive,
// and only what reaches Slack or the inbox is open-world. The admin scope
// changes none of it: list_agent_keys is a read, create_agent_key and
// create_user are creates.
func TestToolAnnotationsByKind(t *testing.T) {
	env := testenv.New(t)
	res, err := env.Admin().Session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	rules := map[string]mcp.ToolAnnotations{
		"read":     {ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no},
		"read out": {ReadOnlyHint: true, OpenWorldHint: &yes},
		"create":   {DestructiveHint: &no, OpenWorldHint: &no},
		"change":   {DestructiveHint: &yes, OpenWorldHint: &no},
		"send":     {DestructiveHint: &no, OpenWorldHint: &yes},
	}
	kinds := map[string]int{}
	for _, tool := range res.Tools {
		kind := kindOfName(tool.Name)
		kinds[kind]++
		if tool.Annotations == nil {
			t.Errorf("%s: no annotations", tool.Name)
			continue
		}
		if diff := cmp.Diff(*tool.Annotations, rules[kind]); diff != "" {
			t.Errorf("%s (a %s): annotations (-got +want):\n%s", tool.Name, kind, diff)
		}
	}
	if len(res.Tools) < 90 || len(kinds) != len(rules) {
		t.Errorf("%d tools of kinds %v", len(res.Tools), kinds)
	}
}

// kindOfName is what a tool's verb says it does.
func kindOfName(name string) string {
	verb, _, _ := strings.Cut(name, "_")
	switch {
	case name == "get_slack_answer" || name == "list_questions":
		return "read out" // they read the team's replies in Slack
	case verb == "search" || verb == "get" || verb == "list" || verb == "render" || name == "whoami" || name == "enable_toolset":
		return "read"
	case verb == "create" || verb == "upload" || verb == "subscribe" || verb == "start" || verb == "share" || name == "import_email":
		return "create"
	case verb == "send" || verb == "ask" || verb == "request" || verb == "sync": // request_pitch_approval posts to Slack
		return "send"
	}
	return "change"
}

// TestListAgentKeysIgnoresIdempotencyKey: list_agent_keys is a read, so an
// idempotency key on it replays nothing; the second call with the same key
// shows the key created in between.
func TestListAgentKeysIgnoresIdempotencyKey(t *testing.T) {
	env := testenv.New(t)
	admin := env.Admin()
	var first struct{ Total int }
	if err := json.Unmarshal(mustKeyed(t, admin, "list_agent_keys", M{}, "list-1"), &first); err != nil {
		t.Fatal(err)
	}
	admin.Must("create_agent_key", M{"name": "made in between"}, nil)
	var second struct{ Total int }
	if err := json.Unmarshal(mustKeyed(t, admin, "list_agent_keys", M{}, "list-1"), &second); err != nil {
		t.Fatal(err)
	}
	if second.Total != first.Total+1 {
		t.Fatalf("list_agent_keys with the same idempotency key: total %d, then %d; want the key made in between listed", first.Total, second.Total)
	}
}
