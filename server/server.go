// Package server is the HTTP edge: MCP over Streamable HTTP at /mcp behind
// bearer-key authentication, cross-origin protection and a body limit, the
// signed media URLs under /media/, and /healthz.
package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"outreach/audit"
	"outreach/pitchsend"
	"outreach/repo"
	"outreach/server/version"
	"outreach/tools"
)

// MaxBody is the largest request body /mcp accepts (413 above it). It leaves
// room for upload_media's 512 KiB inline files in base64.
const MaxBody = 2 << 20

// Instructions are sent to clients at initialize.
const Instructions = `Outreach keeps a PR team's media pipeline. Groups: outlets and their channels; contacts (journalists, with beats, affiliations to outlets and do_not_contact); campaigns; opportunities (pitches moving through stages: update_opportunity_stage keeps a stage history); coverage (with sentiment and reach), get_coverage_report and media files; guardrails (do-not-contact, double-pitch within a window unless override_reason, embargo_until); import_contacts/import_outlets with dry_run; notes and the interaction log; search, dossiers (get_contact_dossier, get_outlet_dossier), get_opportunity_status and get_agenda; emails (a shared inbox synced over IMAP, threads linkable to opportunities); notifications and Slack messaging; agent keys and users (admin). Start with whoami, get_service_info or search.
Lists are paged (limit, offset; total in the result). Nothing is ever hard-deleted: archive_X hides a record, restore_X brings it back.
Every change is attributed to the key's user and agent and to a session: call start_session (optional label) at the start of a run of work and send its session_id in the X-Agent-Session-Id header or in _meta "outreach/session_id"; without one, the MCP session (revisions up to 2025-11-25) or, on 2026-07-28, the key's implicit session (ends after 30 minutes without a change). list_sessions finds a session to undo. get_change_log shows the changes (filter by session_id, agent_id, record_id, collection or time); rollback_change undoes one change, rollback_session undoes a whole session (dry_run first to see the plan).
Errors are tool results with isError and JSON {"error": {"code", "message", "field", "retryable"}}; codes: invalid_argument (the field says which argument and what is allowed), not_found, conflict (re-read and retry), permission_denied (the key lacks a scope, or the session belongs to another agent), failed_precondition, rate_limited, unavailable, internal.`

// New returns the service's HTTP handler.
func New(store *repo.Store, log zerolog.Logger, opts ...tools.Option) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "outreach", Version: version.Version}, &mcp.ServerOptions{Instructions: Instructions})
	tools.Register(srv, tools.All(store, opts...))
	mcpHandler := revisions(srv)
	verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		k, err := store.Authenticate(ctx, token)
		if errors.Is(err, repo.ErrBadKey) {
			// The reason is the last of the joined errors (errors.Unwrap gives nil for a join).
			reason := err.Error()
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				if errs := j.Unwrap(); len(errs) > 0 {
					reason = errs[len(errs)-1].Error()
				}
			}
			return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, reason)
		}
		if err != nil {
			log.Error().Err(err).Msg("authenticate")
			return nil, errors.New("the key could not be checked; try again")
		}
		info := &auth.TokenInfo{Scopes: k.Scopes, UserID: k.ID, Extra: map[string]any{tools.ActorKey: audit.Actor{
			UserID: k.UserID, AgentID: k.AgentID, KeyID: k.ID, KeyName: k.Name, AgentType: k.AgentType, Scopes: k.Scopes,
		}, tools.BaseURLKey: requestBaseURL(r), tools.ImplicitSessionKey: implicitSession(store)}}
		if k.ExpiresAt != nil {
			info.Expiration = *k.ExpiresAt
		}
		return info, nil
	}
	protected := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(limitRequests(mcpHandler, tools.RateLimitsOf(opts...)))
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.NewCrossOriginProtection().Handler(challenge(withLogger(protected, log))))
	mountMedia(mux, store, log)
	mux.Handle(pitchsend.UnsubscribePath, pitchsend.UnsubscribeHandler(store, log))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if err := store.Ping(ctx); err != nil {
			http.Error(w, "store unavailable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

func withLogger(next http.Handler, log zerolog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(log.WithContext(r.Context())))
	})
}

// challenge adds the WWW-Authenticate header RFC 6750 asks of every 401.
func challenge(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&challenger{ResponseWriter: w}, r)
	})
}

type challenger struct{ http.ResponseWriter }

func (c *challenger) WriteHeader(code int) {
	if code == http.StatusUnauthorized && c.Header().Get("WWW-Authenticate") == "" {
		c.Header().Set("WWW-Authenticate", `Bearer realm="outreach", error="invalid_token"`)
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *challenger) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *challenger) Unwrap() http.ResponseWriter { return c.ResponseWriter }
