package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"outreach/repo"
	"outreach/repo/pipeline"
	"outreach/server/version"
	"outreach/tools"
)

// The server card (/.well-known/mcp/server-card.json): what a client that
// discovers servers needs before it connects (the endpoint, its transport
// and revisions, that it needs a bearer key, the toolsets and how to choose
// them, the resources and prompts). It is served only when the operator
// turns it on (--server-card), without a key, as discovery documents are;
// it names no record and no key. The endpoint's URL is OUTREACH_PUBLIC_URL's,
// else the one the request came to.

// ServerCardPath is where the card is served.
const ServerCardPath = "/.well-known/mcp/server-card.json"

// StatefulRevisions are the revisions served with an MCP session.
var StatefulRevisions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

func mountServerCard(mux *http.ServeMux, store *repo.Store, c *tools.Catalog) {
	mux.HandleFunc("GET "+ServerCardPath, func(w http.ResponseWriter, r *http.Request) {
		base := pipeline.Of(store).MediaOptions().PublicURL
		if base == "" {
			base = requestBaseURL(r)
		}
		base = strings.TrimSuffix(base, "/")
		var prompts []string
		for _, p := range c.Prompts() {
			prompts = append(prompts, p.Name)
		}
		card := map[string]any{
			"name":             "outreach",
			"title":            "Outreach",
			"version":          version.Version,
			"description":      "A PR team's media pipeline: outlets, contacts, campaigns, opportunities, coverage, notes, a shared inbox, with a change log and rollback.",
			"remotes":          []map[string]any{{"type": "streamable-http", "url": base + "/mcp"}},
			"protocolVersions": append(append([]string{}, StatefulRevisions...), StatelessRevision),
			"authentication":   map[string]any{"required": true, "schemes": []string{"bearer"}},
			"capabilities":     map[string]any{"tools": map[string]any{"listChanged": true}, "resources": map[string]any{"subscribe": true}, "prompts": map[string]any{}, "completions": map[string]any{}},
			"toolsets": map[string]any{
				"available": c.Available(),
				"default":   c.Listed(),
				"select":    []string{base + "/mcp/x/{toolset,…}", base + "/mcp/readonly", "header " + HeaderToolsets, "header " + HeaderReadonly, "tools list_toolsets and enable_toolset"},
			},
			"resourceTemplates": c.ResourceTemplates(),
			"prompts":           prompts,
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_ = json.NewEncoder(w).Encode(card)
	})
}
