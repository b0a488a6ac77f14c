package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/access"
)

// grant records an approval of client by the admin user for resource, as
// the authorization server does, and returns its access token.
func grant(t *testing.T, env *testenv.Env, client, resource string, in access.OAuthGrantInput) (*access.OAuthGrant, access.OAuthTokens) {
	t.Helper()
	in.UserID, in.ClientID, in.ClientName, in.Resource = env.AdminUserID, client, client+" app", resource
	g, tok, err := access.Of(env.Store).IssueOAuthGrant(audit.WithActor(context.Background(), repo.SystemActor("test-setup")), in)
	if err != nil {
		t.Fatal(err)
	}
	return g, tok
}

// post sends an initialize to /mcp with token (none when empty) and returns
// the response's status and WWW-Authenticate header.
func postInitialize(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// TestOAuthProtectedResource: with OAuth on, the service is an OAuth 2.1
// protected resource as the MCP authorization specification asks: its
// metadata (RFC 9728) at both well-known paths, a 401 that names it, tokens
// bound to its audience (RFC 8707), expired and revoked tokens refused, a
// scope challenge for a call the token's scopes do not cover, and calls made
// as the member through the client's agent. Keys keep working.
func TestOAuthProtectedResource(t *testing.T) {
	env := testenv.NewWith(t, testenv.Options{OAuth: true})
	resource := env.Base + "/mcp"
	metadataURL := env.Base + "/.well-known/oauth-protected-resource/mcp"

	for _, u := range []string{metadataURL, env.Base + "/.well-known/oauth-protected-resource"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		var md struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			ScopesSupported      []string `json:"scopes_supported"`
			BearerMethods        []string `json:"bearer_methods_supported"`
		}
		err = json.NewDecoder(resp.Body).Decode(&md)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v", u, resp.StatusCode, err)
		}
		want := struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			ScopesSupported      []string `json:"scopes_supported"`
			BearerMethods        []string `json:"bearer_methods_supported"`
		}{resource, []string{env.Base}, []string{"read", "write", "admin"}, []string{"header"}}
		if d := cmp.Diff(want, md); d != "" {
			t.Errorf("GET %s (-want +got):\n%s", u, d)
		}
	}

	// No credentials: 401 naming the metadata; bad credentials: invalid_token too.
	code, h := postInitialize(t, env.URL, "")
	if code != 401 || h != `Bearer resource_metadata="`+metadataURL+`"` {
		t.Errorf("no token: %d %q", code, h)
	}
	_, other := grant(t, env, "https://other.example/client", "https://other.example/mcp", access.OAuthGrantInput{Scopes: []string{"read"}})
	code, h = postInitialize(t, env.URL, other.Access)
	if code != 401 || h != `Bearer resource_metadata="`+metadataURL+`", error="invalid_token"` {
		t.Errorf("token for another audience: %d %q", code, h)
	}

	// A read token works as the member, through the client's agent.
	const client = "https://claude.example/oauth/client.json"
	g, tok := grant(t, env, client, resource, access.OAuthGrantInput{Scopes: []string{"read"}})
	reader := env.Client(tok.Access, "")
	var who struct {
		UserID, AgentID, AgentType, KeyName string
		Scopes                              []string
	}
	reader.Must("whoami", nil, &struct {
		UserID    *string   `json:"user_id"`
		AgentID   *string   `json:"agent_id"`
		AgentType *string   `json:"agent_type"`
		KeyName   *string   `json:"key_name"`
		Scopes    *[]string `json:"scopes"`
	}{&who.UserID, &who.AgentID, &who.AgentType, &who.KeyName, &who.Scopes})
	wantWho := struct {
		UserID, AgentID, AgentType, KeyName string
		Scopes                              []string
	}{env.AdminUserID, access.OAuthAgentID(client, env.AdminUserID), access.AgentTypeOAuth, client + " app", []string{"read"}}
	if d := cmp.Diff(wantWho, who); d != "" {
		t.Errorf("whoami with an OAuth token (-want +got):\n%s", d)
	}
	if g.AgentID != wantWho.AgentID {
		t.Errorf("grant's agent %s, want %s", g.AgentID, wantWho.AgentID)
	}

	// A write tool with a read token: 403 with the scopes to ask for.
	var challenged string
	hc := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+tok.Access)
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil && resp.StatusCode == http.StatusForbidden {
			challenged = resp.Header.Get("WWW-Authenticate")
		}
		return resp, err
	})}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: env.URL, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_outlet", Arguments: M{"name": "Nope"}}); err == nil {
		t.Error("create_outlet with a read token succeeded")
	}
	want := `Bearer error="insufficient_scope", scope="read write", resource_metadata="` + metadataURL + `", error_description="create_outlet needs the write scope; this token has: read"`
	if challenged != want {
		t.Errorf("scope challenge:\n got %s\nwant %s", challenged, want)
	}

	// A write token writes as the member and the client's agent.
	_, wtok := grant(t, env, client, resource, access.OAuthGrantInput{Scopes: []string{"read", "write"}})
	writer := env.Client(wtok.Access, "")
	id := mk(t, writer, "create_outlet", M{"name": "Through OAuth"})
	var log struct {
		Entries []struct {
			UserID  string `json:"user_id"`
			AgentID string `json:"agent_id"`
		} `json:"changes"`
	}
	env.Admin().Must("get_change_log", M{"record_id": id}, &log)
	if len(log.Entries) != 1 || log.Entries[0].UserID != env.AdminUserID || log.Entries[0].AgentID != wantWho.AgentID {
		t.Errorf("change log of the OAuth write: %+v, want user %s agent %s", log.Entries, env.AdminUserID, wantWho.AgentID)
	}

	// Revoked and expired tokens are refused.
	if _, err := access.Of(env.Store).RevokeOAuthGrant(audit.WithActor(context.Background(), repo.SystemActor("test")), g.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if code, h := postInitialize(t, env.URL, tok.Access); code != 401 || !strings.Contains(h, `error="invalid_token"`) {
		t.Errorf("revoked token: %d %q", code, h)
	}
	eg, etok := grant(t, env, client, resource, access.OAuthGrantInput{Scopes: []string{"read"}, AccessTTL: time.Millisecond})
	for time.Now().Before(eg.AccessExpiresAt.Add(time.Millisecond)) {
		time.Sleep(time.Millisecond) // the clock, not another goroutine, is what the test waits for
	}
	if code, _ := postInitialize(t, env.URL, etok.Access); code != 401 {
		t.Errorf("expired token: %d", code)
	}

	// The admin key works as before.
	env.Admin().Must("whoami", nil, nil)
}

// TestOAuthOff: without --oauth no discovery metadata is served (a client
// configured with a key would switch to OAuth on finding it), the 401 is the
// plain bearer challenge, and an OAuth access token is refused.
func TestOAuthOff(t *testing.T) {
	env := testenv.New(t)
	resp, err := http.Get(env.Base + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("metadata with OAuth off: %d, want 404", resp.StatusCode)
	}
	if code, h := postInitialize(t, env.URL, ""); code != 401 || strings.Contains(h, "resource_metadata") {
		t.Errorf("401 with OAuth off: %d %q", code, h)
	}
	_, tok := grant(t, env, "https://c.example/c.json", env.Base+"/mcp", access.OAuthGrantInput{Scopes: []string{"read"}})
	if code, _ := postInitialize(t, env.URL, tok.Access); code != 401 {
		t.Errorf("OAuth token with OAuth off: %d, want 401", code)
	}
	env.Admin().Must("whoami", nil, nil)
}

// TestConnectedClientsTools: a member lists and revokes their own connected
// clients through the tools; another member's need the admin scope.
func TestConnectedClientsTools(t *testing.T) {
	env := testenv.NewWith(t, testenv.Options{OAuth: true})
	ctx := audit.WithActor(context.Background(), repo.SystemActor("test-setup"))
	eve, err := access.Of(env.Store).CreateUser(ctx, "Eve", "eve@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	adminGrant, _ := grant(t, env, "https://a.example/c.json", env.URL, access.OAuthGrantInput{Scopes: []string{"read"}})
	eveGrant, eveTok, err := access.Of(env.Store).IssueOAuthGrant(ctx, access.OAuthGrantInput{UserID: eve.ID, ClientID: "https://e.example/c.json", ClientName: "Eve's assistant",
		Resource: env.URL, Scopes: []string{"read", "write"}})
	if err != nil {
		t.Fatal(err)
	}
	c := env.Client(eveTok.Access, "")
	var listed struct {
		Total   int `json:"total"`
		Clients []struct {
			ID, ClientName string
		} `json:"connected_clients"`
	}
	raw := c.Must("list_connected_clients", nil, &listed)
	if listed.Total != 1 || listed.Clients[0].ID != eveGrant.ID || strings.Contains(string(raw), eveTok.Access) || strings.Contains(string(raw), "hash") {
		t.Errorf("eve's connected clients: %s", raw)
	}
	c.Fail("list_connected_clients", M{"all": true}, "permission_denied")
	c.Fail("list_connected_clients", M{"user_id": env.AdminUserID}, "permission_denied")
	c.Fail("revoke_connected_client", M{"id": adminGrant.ID}, "permission_denied")
	env.Admin().Must("list_connected_clients", M{"all": true}, &listed)
	if listed.Total != 2 {
		t.Errorf("an admin's list of every member's clients: %d, want 2", listed.Total)
	}
	c.Must("revoke_connected_client", M{"id": eveGrant.ID}, nil)
	if code, _ := postInitialize(t, env.URL, eveTok.Access); code != 401 {
		t.Errorf("eve's token after she revoked its grant: %d, want 401", code)
	}
}
