package integration

import (
	"encoding/json"
	"fmt"
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

// TestNewcomerFiguresAreTheMeasuredOnes holds what a newcomer is told in
// the first minutes to what was measured: the first build's times that
// scripts/serve.sh prints are those of docs/clients.md's newcomer table,
// and the Node version the README and docs/clients.md ask for the
// Inspector is the one the pinned Inspector declares (its engines, in the
// end-to-end tests' lock file), at the version they pin.
func TestNewcomerFiguresAreTheMeasuredOnes(t *testing.T) {
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	script, readme, clients := read("../scripts/serve.sh"), read("../README.md"), read("../docs/clients.md")
	m := regexp.MustCompile(`serving took (\d+) s on 2 idle cores and (\d+) s on 2 busy ones`).FindStringSubmatch(script)
	if m == nil {
		t.Fatal("serve.sh does not say how long the first build took, idle and busy")
	}
	newcomer := clients[strings.Index(clients, "## A newcomer's first minutes"):]
	row := regexp.MustCompile("(?m)^\\| `./scripts/serve.sh --demo` until `/healthz` answers[^|]*\\| ([^|]*) \\| ([^|]*) \\|$").FindStringSubmatch(newcomer)
	if row == nil {
		t.Fatal("docs/clients.md's newcomer table has no row for serve.sh until /healthz")
	}
	if row[1] != m[1]+" s" || row[2] != m[2]+" s" {
		t.Errorf("serve.sh says %s s idle and %s s busy; the measured table says %q and %q", m[1], m[2], row[1], row[2])
	}

	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	var lock struct {
		Packages map[string]struct {
			Version string            `json:"version"`
			Engines map[string]string `json:"engines"`
		} `json:"packages"`
	}
	if err := json.Unmarshal([]byte(read("e2e/package.json")), &pkg); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(read("e2e/package-lock.json")), &lock); err != nil {
		t.Fatal(err)
	}
	const name = "@modelcontextprotocol/inspector"
	version, inspector := pkg.Dependencies[name], lock.Packages["node_modules/"+name]
	if version == "" || inspector.Version != version {
		t.Fatalf("the end-to-end tests pin %s %q, their lock file holds %q", name, version, inspector.Version)
	}
	engine := regexp.MustCompile(`^>=(\d+)\.(\d+)\.0$`).FindStringSubmatch(inspector.Engines["node"])
	if engine == nil {
		t.Fatalf("%s %s declares node %q: not a plain minimum", name, version, inspector.Engines["node"])
	}
	node := fmt.Sprintf("Node %s.%s or later", engine[1], engine[2])
	for doc, text := range map[string]string{"README.md": readme, "docs/clients.md": clients} {
		if !strings.Contains(text, name+"@"+version) {
			t.Errorf("%s does not call the pinned %s@%s", doc, name, version)
		}
		if !strings.Contains(text, node) {
			t.Errorf("%s does not ask for %s, which %s@%s declares", doc, node, name, version)
		}
		if regexp.MustCompile(`Node \d+ or later`).MatchString(text) {
			t.Errorf("%s still asks for another Node version: %q", doc, regexp.MustCompile(`Node \d+ or later`).FindString(text))
		}
	}
}
