package integration

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/integration/testenv"
)

// TestRevokedKeyFailsAtOnceDespiteTheKeyCache uses a key until it is cached
// as verified, revokes it, and expects its very next request to be refused;
// rolling the revocation back lets it in again at once. The cache is
// emptied by the change to the key itself, not by waiting for its bound.
func TestRevokedKeyFailsAtOnceDespiteTheKeyCache(t *testing.T) {
	env := testenv.New(t)
	admin := env.Admin()
	var k struct {
		Key      string              `json:"key"`
		AgentKey struct{ ID string } `json:"agent_key"`
	}
	admin.Must("create_agent_key", M{"name": "cached", "scopes": []string{"read"}}, &k)
	if k.Key == "" {
		t.Fatal("create_agent_key returned no key")
	}
	c := env.Client(k.Key, "")
	for range 3 {
		c.Must("whoami", nil, nil)
	}
	admin.Must("revoke_agent_key", M{"id": k.AgentKey.ID}, nil)
	if _, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami"}); err == nil {
		t.Fatal("the revoked key's next call succeeded")
	}
	admin.Must("rollback_change", M{"id": lastChange(t, admin, k.AgentKey.ID, "update").ID}, nil)
	again := env.Client(k.Key, "")
	again.Must("whoami", nil, nil)
	// Revoked a second time, refused again on the next call.
	admin.Must("revoke_agent_key", M{"id": k.AgentKey.ID}, nil)
	if _, err := again.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami"}); err == nil {
		t.Fatal("the key revoked a second time still works")
	}
}
