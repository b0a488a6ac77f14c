package integration

import (
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"outreach/integration/testenv"
	"outreach/server"
	"outreach/tools"
)

// TestClientsDocNamesRevisionsAndSessions holds docs/clients.md, the page a
// client author reads first, to the running service: it names every
// protocol revision server/discover announces, and the agent-session rules
// by the names a client sends (the header, the _meta field, start_session's
// handle) and the answers it gets (implicit sessions, permission_denied).
func TestClientsDocNamesRevisionsAndSessions(t *testing.T) {
	b, err := os.ReadFile("../docs/clients.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	env := testenv.New(t)
	req, _ := http.NewRequest(http.MethodPost, env.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{`+
		`"io.modelcontextprotocol/protocolVersion":"`+server.StatelessRevision+`","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`))
	req.Header.Set("Authorization", "Bearer "+env.AdminKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", server.StatelessRevision)
	req.Header.Set("Mcp-Method", "server/discover")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	revisions := regexp.MustCompile(`"(\d{4}-\d{2}-\d{2})"`).FindAllStringSubmatch(string(body), -1)
	if resp.StatusCode != http.StatusOK || len(revisions) < 2 {
		t.Fatalf("server/discover: %d %s", resp.StatusCode, body)
	}
	for _, r := range revisions {
		if !strings.Contains(doc, r[1]) {
			t.Errorf("docs/clients.md does not name revision %s, which the service serves", r[1])
		}
	}
	for _, name := range []string{tools.SessionHeader, tools.MetaSessionKey, "start_session", "auto-", "permission_denied", "30 minutes", "rollback_session"} {
		if !strings.Contains(doc, name) {
			t.Errorf("docs/clients.md does not say how sessions work with %s", name)
		}
	}
}
