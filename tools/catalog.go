package tools

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/audit"
	"outreach/repo"
)

// The catalog and what each client is served. A server offers the
// toolsets the operator enabled (--toolsets; all of them by default), but
// lists to a client that names none only the lean default set (search,
// contacts, opportunities, notes, and audit, which is always on), so the
// first tools/list fits an agent's context. A client names its toolsets in the
// URL (/mcp/x/{toolset,…}, /mcp/readonly, /mcp/x/{toolset,…}/readonly) or
// in the headers X-MCP-Toolsets and X-MCP-Readonly (server/toolsets_route.go),
// and an agent adds toolsets as it goes with list_toolsets and
// enable_toolset. The key's scopes still limit what is listed and called.
//
// On the stateful revisions each MCP session has its own set: enable_toolset
// adds the tools to the session and the client is told with
// notifications/tools/list_changed. On 2026-07-28 (no MCP session) the set
// is the agent session's: the tools a request is served are those its URL
// and headers name plus those enable_toolset enabled for the same key and
// X-Agent-Session-Id (or, without that header, for the key), kept by the
// instance that answered for SessionTimeout after their last use; clients
// behind a pool of instances name their toolsets in the URL or header.

// defaultToolsets are what a client naming no toolsets is served when the
// operator left --toolsets unset: what agents do most (find, read and work
// contacts and the pipeline, log their calls and meetings as notes, and
// check their changes).
var defaultToolsets = []string{"search", "contacts", "opportunities", "notes", alwaysOn}

// ToolsListBudget is the most bytes the default tools/list may take (about
// 15,000 tokens at four characters a token); TestToolsListBudget holds it.
const ToolsListBudget = 60_000

// maxRemembered bounds the agent sessions whose toolsets are kept.
const maxRemembered = 10_000

// rememberFor is how long a stateless agent session's enabled toolsets are
// kept after their last use.
const rememberFor = 30 * time.Minute

// Catalog is every tool a server offers, from which each client's
// selection is served.
type Catalog struct {
	store     *repo.Store
	watch     watcher // resource subscriptions (resources.go)
	tools     []Tool
	scopes    map[string]string
	available []string // the toolsets offered, in toolsets order
	listed    []string // the toolsets a client naming none is served

	mu         sync.Mutex
	remembered map[string]remembered // stateless: key id + agent session -> toolsets
}

type remembered struct {
	toolsets []string
	until    time.Time
}

// NewCatalog builds the catalog of the toolsets opts enable (WithToolsets;
// every toolset without it).
func NewCatalog(s *repo.Store, opts ...Option) *Catalog {
	var o options
	for _, f := range opts {
		f(&o)
	}
	c := &Catalog{store: s, tools: All(s, opts...), scopes: map[string]string{}, remembered: map[string]remembered{}}
	c.watch.c = c
	for _, t := range c.tools {
		c.scopes[t.Def.Name] = t.Scope
		if !slices.Contains(c.available, t.Toolset) {
			c.available = append(c.available, t.Toolset)
		}
	}
	switch {
	case o.listed != nil:
		c.listed = o.listed
	default:
		c.listed = c.available
	}
	return c
}

// Tools is every tool of the catalog.
func (c *Catalog) Tools() []Tool { return c.tools }

// Listed is the toolsets a client naming none is served.
func (c *Catalog) Listed() []string { return slices.Clone(c.listed) }

// Available is every toolset the catalog offers.
func (c *Catalog) Available() []string { return slices.Clone(c.available) }

// ParseToolsets reads a client's comma-separated toolset names (also
// "all", "default" and "core"); a name the server does not offer is an
// error naming those it does.
func (c *Catalog) ParseToolsets(spec string) ([]string, error) {
	var out []string
	for _, n := range strings.Split(spec, ",") {
		switch n = strings.ToLower(strings.TrimSpace(n)); {
		case n == "":
		case n == "all":
			out = append(out, c.available...)
		case n == "default":
			out = append(out, c.listed...)
		case n == "core":
			for _, ts := range toolsetList() {
				if ts.core && slices.Contains(c.available, ts.name) {
					out = append(out, ts.name)
				}
			}
		case slices.Contains(c.available, n):
			out = append(out, n)
		case slices.ContainsFunc(toolsetList(), func(ts toolset) bool { return ts.name == n }):
			return nil, fmt.Errorf("toolset %q is not enabled on this server; its toolsets are %s (or all, default, core)", n, strings.Join(c.available, ", "))
		default:
			return nil, fmt.Errorf("unknown toolset %q; this server's toolsets are %s (or all, default, core)", n, strings.Join(c.available, ", "))
		}
	}
	return c.order(out), nil
}

// order sorts toolset names as tools/list shows them, without repeats,
// with the always-on one.
func (c *Catalog) order(names []string) []string {
	var out []string
	for _, ts := range c.available {
		if ts == alwaysOn || slices.Contains(names, ts) {
			out = append(out, ts)
		}
	}
	return out
}

// Selection is what one client is served: its toolsets (nil: the
// catalog's listed ones) and whether only the tools that read.
type Selection struct {
	Toolsets []string
	ReadOnly bool
}

// Resolve is the selection's toolsets, in order.
func (c *Catalog) Resolve(sel Selection) []string {
	if sel.Toolsets == nil {
		return c.order(c.listed)
	}
	return c.order(sel.Toolsets)
}

// Defs are the definitions of the tools a selection serves, as tools/list
// shows them to an admin key.
func (c *Catalog) Defs(sel Selection) []*mcp.Tool {
	var out []*mcp.Tool
	for _, t := range c.tools {
		if c.serves(t, c.Resolve(sel), sel.ReadOnly) {
			def := t.Def
			out = append(out, &def)
		}
	}
	return out
}

func (c *Catalog) serves(t Tool, toolsets []string, readOnly bool) bool {
	return slices.Contains(toolsets, t.Toolset) && (!readOnly || t.kind.readOnly())
}

// Serve registers on srv the tools of sel, for one MCP session (stateless
// false: enable_toolset adds tools to srv) or for requests of the stateless
// revision (enable_toolset remembers the toolsets for the agent session).
// tools/list shows each key only the tools its scopes may call.
func (c *Catalog) Serve(srv *mcp.Server, sel Selection, stateless bool) {
	tb := &toolbox{c: c, srv: srv, readOnly: sel.ReadOnly, stateless: stateless}
	tb.add(c.Resolve(sel))
	srv.AddReceivingMiddleware(filterToolsList(c.scopes))
}

// Remembered is the toolsets enabled for a key's agent session on the
// stateless revision (nil when none are kept).
func (c *Catalog) Remembered(keyID, agentSession string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := keyID + "\x00" + agentSession
	r, ok := c.remembered[k]
	if !ok {
		return nil
	}
	if time.Now().After(r.until) {
		delete(c.remembered, k)
		return nil
	}
	r.until = time.Now().Add(rememberFor)
	c.remembered[k] = r
	return slices.Clone(r.toolsets)
}

func (c *Catalog) remember(keyID, agentSession string, toolsets []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	oldest := ""
	for k, r := range c.remembered { // forget the expired
		if now.After(r.until) {
			delete(c.remembered, k)
		} else if oldest == "" || r.until.Before(c.remembered[oldest].until) {
			oldest = k
		}
	}
	if len(c.remembered) >= maxRemembered {
		delete(c.remembered, oldest) // the one used least recently
	}
	c.remembered[keyID+"\x00"+agentSession] = remembered{toolsets: toolsets, until: now.Add(rememberFor)}
}

// toolbox is the tools one server serves, which enable_toolset widens.
type toolbox struct {
	c         *Catalog
	srv       *mcp.Server
	readOnly  bool
	stateless bool

	mu sync.Mutex
	on []string
}

type toolboxKey struct{}
type callKey struct{}

// add registers the tools of toolsets not yet on, and returns their names.
// On a server with sessions the SDK tells them with
// notifications/tools/list_changed.
func (tb *toolbox) add(toolsets []string) []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var added []string
	for _, t := range tb.c.tools {
		if slices.Contains(tb.on, t.Toolset) || !tb.c.serves(t, toolsets, tb.readOnly) {
			continue
		}
		def := t.Def
		h := handler(t)
		tb.srv.AddTool(&def, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ctx = context.WithValue(ctx, toolboxKey{}, tb)
			ctx = context.WithValue(ctx, callKey{}, req)
			res, err := h(ctx, req)
			if !t.kind.readOnly() {
				tb.c.watch.poke() // subscribers hear of the change now
			}
			return res, err
		})
		added = append(added, def.Name)
	}
	tb.on = tb.c.order(append(tb.on, toolsets...))
	return added
}

func (tb *toolbox) enabled() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return slices.Clone(tb.on)
}

// agentSession is the agent session a stateless call's enabled toolsets
// are kept for: its X-Agent-Session-Id, else none (the key's).
func agentSession(req *mcp.CallToolRequest) string {
	if req == nil || req.Extra == nil {
		return ""
	}
	return strings.TrimSpace(req.Extra.Header.Get(SessionHeader))
}

// toolsetView is one toolset as list_toolsets shows it.
type toolsetView struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Tools       int    `json:"tools"`
	Enabled     bool   `json:"enabled"`
}

type toolsetsResult struct {
	Toolsets []toolsetView `json:"toolsets"`
	ReadOnly bool          `json:"read_only"`
	Added    []string      `json:"added,omitempty"`
	Note     string        `json:"note,omitempty"`
}

// toolsetList and allTools break the initialization cycle of the toolsets
// table, whose audit toolset holds the tools that describe it.
var (
	toolsetList func() []toolset
	allTools    func() []Tool
)

func init() {
	toolsetList = func() []toolset { return toolsets }
	allTools = func() []Tool { return All(nil) }
}

type listToolsetsIn struct{}

type enableToolsetIn struct {
	Toolsets []string `json:"toolsets" jsonschema:"the toolsets to add, by name (list_toolsets names them)"`
}

// Discovery is list_toolsets and enable_toolset: how an agent finds and
// adds the toolsets it was not served at first.
func Discovery() []Tool {
	return []Tool{
		newTool("list_toolsets", "List the toolsets this server offers and which are enabled for you; enable_toolset adds one.", read,
			func(ctx context.Context, _ *listToolsetsIn) (any, error) {
				tb, _ := ctx.Value(toolboxKey{}).(*toolbox)
				return toolsetsView(ctx, tb, nil), nil
			}),
		newTool("enable_toolset", "Add toolsets to the tools you are served (list_toolsets names them); list the tools again to see them.", read,
			func(ctx context.Context, in *enableToolsetIn) (any, error) {
				tb, _ := ctx.Value(toolboxKey{}).(*toolbox)
				if tb == nil {
					return nil, &repo.Error{Code: repo.CodeFailedPrecondition, Message: "this server's toolsets are fixed"}
				}
				if len(in.Toolsets) == 0 {
					return nil, repo.Invalid("toolsets", "is empty; name at least one of: %s", strings.Join(tb.c.available, ", "))
				}
				names, err := tb.c.ParseToolsets(strings.Join(in.Toolsets, ","))
				if err != nil {
					return nil, repo.Invalid("toolsets", "%s", err.Error())
				}
				if !tb.stateless {
					added := tb.add(names)
					return toolsetsView(ctx, tb, orEmpty(added), "the added tools are listed by tools/list now"), nil
				}
				// The stateless revision: the server is shared by every
				// request of the same selection, so the toolsets are kept
				// for the agent session and served from its next request.
				req, _ := ctx.Value(callKey{}).(*mcp.CallToolRequest)
				actor, _ := audit.ActorFrom(ctx)
				on := tb.c.order(append(tb.enabled(), names...))
				tb.c.remember(actor.KeyID, agentSession(req), on)
				var added []string
				for _, t := range tb.c.tools {
					if !tb.c.serves(t, tb.enabled(), tb.readOnly) && tb.c.serves(t, on, tb.readOnly) {
						added = append(added, t.Def.Name)
					}
				}
				view := toolsetsView(ctx, tb, orEmpty(added), "kept for this key and its X-Agent-Session-Id for 30 minutes after their last use: list the tools again to see them (across a pool of instances, name the toolsets in the X-MCP-Toolsets header instead)")
				for i := range view.Toolsets {
					view.Toolsets[i].Enabled = slices.Contains(on, view.Toolsets[i].Name)
				}
				return view, nil
			}),
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func toolsetsView(ctx context.Context, tb *toolbox, added []string, note ...string) toolsetsResult {
	var scopes []string
	if a, ok := audit.ActorFrom(ctx); ok {
		scopes = a.Scopes
	}
	res := toolsetsResult{Toolsets: []toolsetView{}, Added: added}
	if len(note) > 0 {
		res.Note = note[0]
	}
	var all []Tool
	var on []string
	if tb != nil {
		all, on, res.ReadOnly = tb.c.tools, tb.enabled(), tb.readOnly
	} else {
		all = allTools()
		for _, ts := range toolsetList() {
			on = append(on, ts.name)
		}
	}
	for _, ts := range toolsetList() {
		v := toolsetView{Name: ts.name, Description: ts.description, Enabled: slices.Contains(on, ts.name)}
		offered := false
		for _, t := range all {
			if t.Toolset != ts.name {
				continue
			}
			offered = true
			if (!res.ReadOnly || t.kind.readOnly()) && visible(scopes, t.Scope) {
				v.Tools++
			}
		}
		if offered {
			res.Toolsets = append(res.Toolsets, v)
		}
	}
	return res
}
