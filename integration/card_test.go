package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"outreach/integration/testenv"
	"outreach/server"
	"outreach/tools"
)

// TestServerCard: the card is served only when turned on, without a key,
// and names the endpoint, the toolsets, resources and prompts; the
// registry's server.json names the transport and the key it needs.
func TestServerCard(t *testing.T) {
	get := func(env *testenv.Env) (int, map[string]any) {
		resp, err := http.Get(strings.TrimSuffix(env.URL, "/mcp") + server.ServerCardPath)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var card map[string]any
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(body, &card); err != nil {
				t.Fatalf("card %s: %v", body, err)
			}
		}
		return resp.StatusCode, card
	}
	if code, _ := get(testenv.New(t)); code != http.StatusNotFound {
		t.Errorf("card without --server-card: %d, want 404", code)
	}
	env := testenv.NewWith(t, testenv.Options{Tools: []tools.Option{tools.WithServerCard(true)}})
	code, card := get(env)
	if code != http.StatusOK {
		t.Fatalf("card with --server-card: %d", code)
	}
	remotes, _ := card["remotes"].([]any)
	if len(remotes) != 1 || remotes[0].(map[string]any)["url"] != env.URL || remotes[0].(map[string]any)["type"] != "streamable-http" {
		t.Errorf("card remotes %v, want %s", remotes, env.URL)
	}
	b, _ := json.Marshal(card)
	for _, want := range []string{`"bearer"`, `"list_toolsets and enable_toolset"`, `"outreach://contacts/{id}"`, `"prepare_pitch"`, `"` + server.StatelessRevision + `"`} {
		if !strings.Contains(strings.ReplaceAll(string(b), `tools list_toolsets`, `list_toolsets`), want) {
			t.Errorf("card lacks %s: %s", want, b)
		}
	}

	raw, err := os.ReadFile("../server.json")
	if err != nil {
		t.Fatal(err)
	}
	var reg struct {
		Schema  string `json:"$schema"`
		Name    string `json:"name"`
		Version string `json:"version"`
		Remotes []struct {
			Type    string `json:"type"`
			URL     string `json:"url"`
			Headers []struct {
				Name string `json:"name"`
			} `json:"headers"`
		} `json:"remotes"`
	}
	if err := json.Unmarshal(raw, &reg); err != nil {
		t.Fatalf("server.json: %v", err)
	}
	if !strings.Contains(reg.Schema, "server.schema.json") || reg.Name == "" || reg.Version == "" || len(reg.Remotes) != 1 ||
		reg.Remotes[0].Type != "streamable-http" || !strings.HasSuffix(reg.Remotes[0].URL, "/mcp") ||
		!slices.ContainsFunc(reg.Remotes[0].Headers, func(h struct {
			Name string `json:"name"`
		}) bool {
			return h.Name == "Authorization"
		}) {
		t.Errorf("server.json: %+v", reg)
	}
}
