package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/audit"
	"outreach/repo"
)

// StatelessRevision is the first MCP revision without an initialize
// handshake or Mcp-Session-Id: each request carries its version, client info
// and capabilities in _meta.
const StatelessRevision = "2026-07-28"

// SessionTimeout closes an MCP session (the stateful revisions) after this
// long without a request.
const SessionTimeout = 30 * time.Minute

// Header names of the Streamable HTTP transport.
const (
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerSessionID       = "Mcp-Session-Id"
)

// revisions serves every revision the SDK knows through one endpoint: a
// request whose Mcp-Protocol-Version is 2026-07-28 or later goes to a
// stateless handler (nothing kept between requests, so any instance of a
// round-robin pool can answer it), every other request to the stateful
// handler of 2024-11-05 … 2025-11-25, where an MCP session lives in this
// process. The Host check against DNS rebinding is the edge's (Config.edge),
// which knows the public URL's host. The SDK checks the revision's headers (Mcp-Method, Mcp-Name, the
// version in _meta against the header) in both.
func revisions(get func(*http.Request) *mcp.Server) http.Handler {
	stateful := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{MaxRequestBodyBytes: MaxBody, SessionTimeout: SessionTimeout, DisableLocalhostProtection: true})
	stateless := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{MaxRequestBodyBytes: MaxBody, Stateless: true, DisableLocalhostProtection: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(headerProtocolVersion) >= StatelessRevision {
			stateless.ServeHTTP(w, r)
			return
		}
		if r.Header.Get(headerSessionID) == "" && r.Method == http.MethodPost {
			body, ok := peekBody(w, r)
			if !ok {
				return
			}
			if id, need := needsSession(body); need {
				writeRPCError(w, http.StatusBadRequest, id, "this request needs the Mcp-Session-Id header: on protocol revisions 2024-11-05 to 2025-11-25, send initialize first (without Mcp-Session-Id), then send the Mcp-Session-Id of its response on every request; or use revision "+StatelessRevision+", which has no MCP session (send Mcp-Protocol-Version: "+StatelessRevision+" and the version in each request's _meta)")
				return
			}
		}
		if r.Header.Get(headerSessionID) != "" {
			w = &unknownSession{ResponseWriter: w}
		}
		stateful.ServeHTTP(w, r)
	})
}

// peekBody reads the request body (at most MaxBody bytes, 413 beyond) and
// puts it back for the SDK.
func peekBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		http.Error(w, "request body exceeds the limit or could not be read", http.StatusRequestEntityTooLarge)
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, true
}

// needsSession reports whether a POST without Mcp-Session-Id carries only
// messages that need a session (anything but initialize and server/discover),
// and the id of the first request, for the error.
func needsSession(body []byte) (jsonrpc.ID, bool) {
	type msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	var msgs []msg
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if json.Unmarshal(trimmed, &msgs) != nil {
			return jsonrpc.ID{}, false // the SDK answers malformed bodies
		}
	} else {
		var m msg
		if json.Unmarshal(trimmed, &m) != nil {
			return jsonrpc.ID{}, false
		}
		msgs = []msg{m}
	}
	var id jsonrpc.ID
	for _, m := range msgs {
		if m.Method == "initialize" || m.Method == "server/discover" || m.Method == "" {
			return jsonrpc.ID{}, false
		}
		if !id.IsValid() && len(m.ID) > 0 {
			var raw any
			if json.Unmarshal(m.ID, &raw) == nil {
				if v, err := jsonrpc.MakeID(raw); err == nil {
					id = v
				}
			}
		}
	}
	return id, true
}

func writeRPCError(w http.ResponseWriter, status int, id jsonrpc.ID, message string) {
	resp := map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32600, "message": message}}
	if id.IsValid() {
		resp["id"] = id.Raw()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(resp)
}

// unknownSession replaces the SDK's bare "session not found" (404) with a
// message that says what to do.
type unknownSession struct {
	http.ResponseWriter
	replaced bool
}

func (u *unknownSession) WriteHeader(code int) {
	if code == http.StatusNotFound && !u.replaced {
		u.replaced = true
		u.ResponseWriter.Header().Del("X-Content-Type-Options")
		writeRPCError(u.ResponseWriter, http.StatusNotFound, jsonrpc.ID{}, "unknown MCP session: the Mcp-Session-Id names no open session of this server (it ended after "+SessionTimeout.String()+" without requests, was closed, or was opened on another instance). Send initialize again without Mcp-Session-Id to open a new one; your changes stay attributed to the session they were made in, and an X-Agent-Session-Id header or the outreach/session_id _meta field keeps one agent session across MCP sessions")
		return
	}
	u.ResponseWriter.WriteHeader(code)
}

func (u *unknownSession) Write(b []byte) (int, error) {
	if u.replaced {
		return len(b), nil
	}
	return u.ResponseWriter.Write(b)
}

func (u *unknownSession) Flush() {
	if f, ok := u.ResponseWriter.(http.Flusher); ok && !u.replaced {
		f.Flush()
	}
}

func (u *unknownSession) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// implicitSession gives a call of the stateless revision that names no agent
// session the key's implicit session (see repo.Store.ImplicitSession). An
// answer is kept per key for as long as the store says it stands, so a busy
// key costs one change-log query per idle period, not one per call. One
// resolver serves every request of a handler (NewWithConfig makes it once):
// made per request, its answers would never be asked for again.
func implicitSession(store *repo.Store) func(context.Context, audit.Actor) (string, error) {
	type answer struct {
		id    string
		until time.Time
	}
	var mu sync.Mutex
	cache := map[string]answer{} // key id -> answer
	return func(ctx context.Context, a audit.Actor) (string, error) {
		mu.Lock()
		v, ok := cache[a.KeyID]
		mu.Unlock()
		if ok && time.Now().Before(v.until) {
			return v.id, nil
		}
		id, until, err := store.ImplicitSession(ctx, a)
		if err != nil {
			return "", err
		}
		mu.Lock()
		defer mu.Unlock()
		if until.IsZero() {
			delete(cache, a.KeyID)
			return id, nil
		}
		if len(cache) >= maxImplicitAnswers {
			// Bounded: answers past their time go first, all of them if
			// that is not enough (each is read again on its key's next call).
			t := time.Now()
			for k, v := range cache {
				if !t.Before(v.until) {
					delete(cache, k)
				}
			}
			if len(cache) >= maxImplicitAnswers {
				clear(cache)
			}
		}
		cache[a.KeyID] = answer{id, until}
		return id, nil
	}
}

// maxImplicitAnswers bounds implicitSession's answers: one per key (or
// OAuth grant) calling within an idle period.
const maxImplicitAnswers = 4096
