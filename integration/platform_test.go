package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/access"
)

type M = testenv.M

func TestWhoamiAttributesUserAgentAndSession(t *testing.T) {
	env := testenv.New(t)
	c := env.Client(env.AdminKey, "sess-42")
	var who struct {
		UserID    string   `json:"user_id"`
		AgentID   string   `json:"agent_id"`
		KeyID     string   `json:"key_id"`
		SessionID string   `json:"session_id"`
		Scopes    []string `json:"scopes"`
	}
	c.Must("whoami", nil, &who)
	if who.UserID != env.AdminUserID || who.AgentID == "" || who.SessionID != "sess-42" {
		t.Fatalf("whoami = %+v", who)
	}
	if diff := cmp.Diff([]string{"admin", "read", "write"}, who.Scopes); diff != "" {
		t.Errorf("scopes (-want +got):\n%s", diff)
	}
	// Without the header, the MCP session names the session.
	var who2 struct {
		SessionID string `json:"session_id"`
	}
	env.Admin().Must("whoami", nil, &who2)
	if who2.SessionID == "" || who2.SessionID == "sess-42" {
		t.Errorf("session without header = %q", who2.SessionID)
	}
}

func TestScopesAreEnforced(t *testing.T) {
	env := testenv.New(t)
	ro := env.Client(env.Key("read"), "")
	ro.Must("whoami", nil, nil)
	e := ro.Fail("create_user", M{"name": "Eve", "email": "eve@example.com"}, repo.CodePermissionDenied)
	if !strings.Contains(e.Message, "admin") {
		t.Errorf("message %q does not name the scope", e.Message)
	}
	var users struct{ Total int }
	ro.Must("list_users", nil, &users)
	if users.Total != 1 {
		t.Errorf("users = %d, want 1 (nothing written)", users.Total)
	}
}

func TestRevokedKeyFailsOnNextRequest(t *testing.T) {
	env := testenv.New(t)
	key := env.Key("read", "write")
	agent := env.Client(key, "")
	var who struct {
		KeyID string `json:"key_id"`
	}
	agent.Must("whoami", nil, &who)
	env.Admin().Must("revoke_agent_key", M{"id": who.KeyID}, nil)
	_, err := agent.Session.CallTool(context.Background(), nil)
	if err == nil {
		t.Fatal("call after revocation succeeded")
	}
	status := post(t, env.URL, key, initialize)
	if status != http.StatusUnauthorized {
		t.Errorf("revoked key: status %d, want 401", status)
	}
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func post(t *testing.T, url, key, body string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestBadKeysAreRefusedWith401(t *testing.T) {
	env := testenv.New(t)
	good := env.AdminKey
	cases := map[string]string{
		"missing":   "",
		"malformed": "hello",
		"checksum":  good[:len(good)-1] + string("ab"[(strings.IndexByte("ab", good[len(good)-1])+1)&1]),
		"unknown":   access.NewKey(),
	}
	for name, key := range cases {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", env.URL, strings.NewReader(initialize))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("status %d, WWW-Authenticate %q; want 401 with a Bearer challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
	if got := post(t, env.URL, good, initialize); got != http.StatusOK {
		t.Errorf("good key: %d", got)
	}
}

func TestChangeLogRecordsEveryMutationWithoutSecrets(t *testing.T) {
	env := testenv.New(t)
	c := env.Client(env.AdminKey, "s-1")
	var u struct{ ID string }
	c.Must("create_user", M{"name": "Ann", "email": "Ann@Example.com"}, &u)
	var k struct {
		Key      string
		AgentKey struct{ ID string } `json:"agent_key"`
	}
	c.Must("create_agent_key", M{"user_id": u.ID, "name": "ann's agent", "scopes": []string{"read"}}, &k)
	var log struct {
		Total   int
		Changes []struct {
			Collection string         `json:"collection"`
			Action     string         `json:"action"`
			Tool       string         `json:"tool"`
			After      map[string]any `json:"after"`
		}
	}
	raw := c.Must("get_change_log", M{"session_id": "s-1"}, &log)
	if strings.Contains(string(raw), k.Key) || strings.Contains(string(raw), "key_hash\":\"") && !strings.Contains(string(raw), "[redacted]") {
		t.Fatalf("change log leaks the key: %s", raw)
	}
	if log.Total != 2 {
		t.Fatalf("total %d, want 2: %s", log.Total, raw)
	}
	got := []string{log.Changes[0].Collection + "/" + log.Changes[0].Action + "/" + log.Changes[0].Tool, log.Changes[1].Collection + "/" + log.Changes[1].Action + "/" + log.Changes[1].Tool}
	want := []string{"agent_keys/create/create_agent_key", "users/create/create_user"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if log.Changes[1].After["email"] != "ann@example.com" || log.Changes[0].After["key_hash"] != "[redacted]" || log.Changes[0].After["scram"] != "[redacted]" {
		t.Errorf("after states: %v / %v", log.Changes[1].After, log.Changes[0].After)
	}
	b, _ := json.Marshal(log.Changes[0].After)
	if strings.Contains(string(b), k.Key[9:20]) {
		t.Errorf("after holds part of the key: %s", b)
	}
}

// TestDatabaseHoldsNoRawKey looks through every document of every collection
// for the keys the service handed out.
func TestDatabaseHoldsNoRawKey(t *testing.T) {
	env := testenv.New(t)
	var k struct {
		Key string `json:"key"`
	}
	env.Admin().Must("create_agent_key", M{"name": "scanner", "scopes": []string{"read"}}, &k)
	db := env.Store.RawCollections().Database
	ctx := context.Background()
	names, err := db.ListCollectionNames(ctx, bson.M{})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 3 {
		t.Fatalf("collections: %v", names)
	}
	for _, name := range names {
		cur, err := db.Collection(name).Find(ctx, bson.M{})
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.M
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			raw, _ := bson.MarshalExtJSON(d, false, false)
			for _, key := range []string{env.AdminKey, k.Key} {
				if strings.Contains(string(raw), key[len("outreach_"):len(key)-6]) {
					t.Errorf("%s holds a raw key: %s", name, raw)
				}
			}
		}
	}
}
