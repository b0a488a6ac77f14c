package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/server/version"
	"outreach/tools"
)

// Toolsets per client. A client names the toolsets it is served, without a
// restart: in the URL, /mcp/x/{toolset,…} (e.g. /mcp/x/notes,emails),
// /mcp/readonly (only the tools that read) or /mcp/x/{toolset,…}/readonly,
// or in the headers X-MCP-Toolsets (comma-separated names) and
// X-MCP-Readonly (true or false). Names from the URL and the header add up;
// read-only from either holds. A name the server does not offer is a 400
// naming those it does. Without a selection the client is served the
// catalog's listed toolsets (tools/catalog.go); the key's scopes still limit
// what is listed and what may be called.

// Header names of the per-client selection.
const (
	HeaderToolsets = "X-MCP-Toolsets"
	HeaderReadonly = "X-MCP-Readonly"
)

type selectionKey struct{}

// slot keeps the server made for a request's new MCP session, as the SDK
// asks for it twice.
type slot struct{ s *mcp.Server }
type slotKey struct{}

// selectionOf reads a request's toolset selection from its path (under
// /mcp) and headers.
func selectionOf(c *tools.Catalog, r *http.Request) (tools.Selection, error) {
	var sel tools.Selection
	var specs []string
	rest := strings.TrimPrefix(r.URL.Path, "/mcp")
	rest = strings.TrimSuffix(rest, "/")
	if after, ok := strings.CutSuffix(rest, "/readonly"); ok {
		sel.ReadOnly, rest = true, after
	}
	switch {
	case rest == "":
	case strings.HasPrefix(rest, "/x/") && !strings.Contains(rest[len("/x/"):], "/") && rest != "/x/":
		specs = append(specs, rest[len("/x/"):])
	default:
		return sel, fmt.Errorf("unknown path %s: the MCP endpoint is /mcp, /mcp/readonly, /mcp/x/{toolset,…} or /mcp/x/{toolset,…}/readonly; the toolsets are %s", r.URL.Path, strings.Join(c.Available(), ", "))
	}
	if h := r.Header.Values(HeaderToolsets); len(h) > 0 {
		specs = append(specs, strings.Join(h, ","))
	}
	switch v := strings.ToLower(strings.TrimSpace(r.Header.Get(HeaderReadonly))); v {
	case "", "false", "0":
	case "true", "1":
		sel.ReadOnly = true
	default:
		return sel, fmt.Errorf("%s must be true or false, not %q", HeaderReadonly, v)
	}
	if len(specs) > 0 {
		names, err := c.ParseToolsets(strings.Join(specs, ","))
		if err != nil {
			return sel, err
		}
		sel.Toolsets = names
	}
	return sel, nil
}

// selectToolsets answers 400 to a request whose selection names a toolset
// the server does not offer, and passes the selection on to servers().
func selectToolsets(c *tools.Catalog, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sel, err := selectionOf(c, r)
		if err != nil {
			writeRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, err.Error())
			return
		}
		ctx := context.WithValue(r.Context(), selectionKey{}, sel)
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, slotKey{}, new(slot))))
	})
}

// maxSharedServers bounds the stateless servers kept by selection: past it
// (many unusual selections) a request's server is made for it alone.
const maxSharedServers = 64

// servers gives the SDK the MCP server of a request. A new MCP session (a
// stateful revision's initialize) gets a server of its own, with the
// request's selection, which enable_toolset widens for that session alone.
// A request of the stateless revision gets a server of its selection plus
// the toolsets enabled for its key and X-Agent-Session-Id; those servers
// are kept by selection, as nothing of a session lives in them. Any other
// request of a stateful session is answered by the session's own server
// (the SDK asks here only for the protocol versions).
func servers(c *tools.Catalog) func(*http.Request) *mcp.Server {
	newServer := func() *mcp.Server {
		return c.NewServer(&mcp.Implementation{Name: "outreach", Version: version.Version}, Instructions)
	}
	var mu sync.Mutex
	shared := map[string]*mcp.Server{}
	sharedFor := func(sel tools.Selection) *mcp.Server {
		names := c.Resolve(sel)
		k := strings.Join(names, ",") + fmt.Sprintf("|%v", sel.ReadOnly)
		mu.Lock()
		defer mu.Unlock()
		if s := shared[k]; s != nil {
			return s
		}
		s := newServer()
		c.Serve(s, tools.Selection{Toolsets: names, ReadOnly: sel.ReadOnly}, true)
		if len(shared) < maxSharedServers {
			shared[k] = s
		}
		return s
	}
	return func(r *http.Request) *mcp.Server {
		sel, _ := r.Context().Value(selectionKey{}).(tools.Selection)
		switch {
		case r.Header.Get(headerProtocolVersion) >= StatelessRevision:
			if info := auth.TokenInfoFromContext(r.Context()); info != nil {
				if on := c.Remembered(info.UserID, strings.TrimSpace(r.Header.Get(tools.SessionHeader))); on != nil {
					sel.Toolsets = append(c.Resolve(sel), on...)
				}
			}
			return sharedFor(sel)
		case r.Header.Get(headerSessionID) != "":
			return sharedFor(tools.Selection{})
		}
		sl, _ := r.Context().Value(slotKey{}).(*slot)
		if sl != nil && sl.s != nil {
			return sl.s
		}
		s := newServer()
		c.Serve(s, sel, false)
		if sl != nil {
			sl.s = s
		}
		return s
	}
}
