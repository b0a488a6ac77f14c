// Package server is the HTTP edge: MCP over Streamable HTTP at /mcp behind
// bearer-key authentication, cross-origin protection and a body limit, the
// signed media URLs under /media/, /healthz and /readyz.
package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/rs/zerolog"

	"outreach/audit"
	"outreach/metrics"
	"outreach/oauth"
	"outreach/pitchsend"
	"outreach/repo"
	"outreach/repo/access"
	"outreach/tools"
)

// MaxBody is the largest request body /mcp accepts (413 above it). It leaves
// room for upload_media's 512 KiB inline files in base64.
const MaxBody = 2 << 20

// Instructions are sent to clients at initialize. They state once what
// holds for every tool, which the tools' schemas then leave out: the
// default limits of a string and an array argument, the rules of a
// free-form object argument, and what a tool that writes a record answers.
var Instructions = `Outreach keeps a PR team's media pipeline. Groups: outlets and their channels; contacts (journalists, with beats, affiliations to outlets and do_not_contact); campaigns; opportunities (pitches moving through stages: update_opportunity_stage keeps a stage history); coverage (with sentiment and reach), get_coverage_report and media files; reports people read (render_report: HTML, PDF, CSV, XLSX, a PNG chart; share_report: a signed, expiring link to a snapshot; get_pipeline_report); guardrails (do-not-contact, double-pitch within a window unless override_reason, embargo_until); import_contacts/import_outlets with dry_run; notes and the interaction log; search, dossiers (get_contact_dossier, get_outlet_dossier), get_opportunity_status and get_agenda; emails (a shared inbox synced over IMAP, threads linkable to opportunities); notifications and Slack messaging; agent keys and users (admin). Start with whoami, get_service_info or search. Not every toolset is listed at first: list_toolsets shows them all, enable_toolset adds one (or name them in the URL /mcp/x/{toolset,…} or the X-MCP-Toolsets header). ` + argumentLimits + `
Lists are paged (limit, offset; total in the result). A tool that writes a record answers with the whole record, as its get_ tool shows it; its output schema names only the id and where the record stands. Nothing is ever hard-deleted: archive_X hides a record, restore_X brings it back.
Every change is attributed to the key's user and agent and to a session: call start_session (optional label) at the start of a run of work and send its session_id in the X-Agent-Session-Id header or in _meta "outreach/session_id"; without one, the MCP session (revisions up to 2025-11-25) or, on 2026-07-28, the key's implicit session (ends after 30 minutes without a change). list_sessions finds a session to undo. get_change_log shows the changes (filter by session_id, agent_id, record_id, collection or time); rollback_change undoes one change, rollback_session undoes a whole session (dry_run first to see the plan).
Errors are tool results with isError and JSON {"error": {"code", "message", "field", "retryable"}}; codes: invalid_argument (the field says which argument and what is allowed), not_found, conflict (re-read and retry), permission_denied (the key lacks a scope, or the session belongs to another agent), failed_precondition, rate_limited, unavailable, internal.`

// argumentLimits is the instructions' sentence on the limits every argument
// has unless its schema says otherwise, from their declarations.
var argumentLimits = fmt.Sprintf("A string argument is at most %d characters and an array at most %d elements unless its schema says otherwise; an object argument is free-form: %s.",
	tools.MaxText, tools.MaxItems, repo.FreeFormRules)

// New returns the service's HTTP handler with the default Config.
func New(store *repo.Store, log zerolog.Logger, opts ...tools.Option) http.Handler {
	return NewWithConfig(store, log, Config{}, opts...)
}

// NewWithConfig returns the service's HTTP handler for a deployment (see Config).
func NewWithConfig(store *repo.Store, log zerolog.Logger, cfg Config, opts ...tools.Option) http.Handler {
	if cfg.Metrics != nil {
		opts = append(slices.Clip(opts), tools.WithCallObserver(cfg.Metrics.ObserveCall))
	}
	catalog := tools.NewCatalog(store, opts...)
	mcpHandler := selectToolsets(catalog, revisions(servers(catalog)))
	var ocfg *oauth.Config
	if cfg.OAuth {
		ocfg = &oauth.Config{PublicURL: cfg.PublicURL}
	}
	implicit := implicitSession(store)
	verifyOAuth := oauthVerifier(store, ocfg, implicit)
	verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		if strings.HasPrefix(token, access.AccessTokenPrefix) {
			return verifyOAuth(r, token)
		}
		k, err := access.Of(store).Authenticate(ctx, token)
		if errors.Is(err, repo.ErrBadKey) {
			return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, lastReason(err))
		}
		if err != nil {
			log.Error().Err(err).Msg("authenticate")
			return nil, errors.New("the key could not be checked; try again")
		}
		info := &auth.TokenInfo{Scopes: k.Scopes, UserID: k.ID, Extra: map[string]any{tools.ActorKey: audit.Actor{
			UserID: k.UserID, AgentID: k.AgentID, KeyID: k.ID, KeyName: k.Name, AgentType: k.AgentType, Scopes: k.Scopes,
		}, tools.BaseURLKey: cfg.baseURL(r), tools.ImplicitSessionKey: implicit}}
		if k.ExpiresAt != nil {
			info.Expiration = *k.ExpiresAt
		}
		return info, nil
	}
	inner := limitRequests(mcpHandler, tools.RateLimitsOf(opts...), cfg.Metrics)
	bopts := &auth.RequireBearerTokenOptions{AllowMissingExpiration: true}
	mux := http.NewServeMux()
	if ocfg != nil {
		scopes := map[string]string{}
		for _, t := range catalog.Tools() {
			scopes[t.Def.Name] = t.Scope
		}
		inner = scopeChallenge(inner, *ocfg, scopes)
		bopts.ResourceMetadataURL = ocfg.MetadataURL()
		ocfg.Mount(mux)
		as, err := oauth.NewServer(store, *ocfg, oauth.Options{ClientMetadata: cfg.ClientMetadata, Upstream: cfg.Upstream, Log: log})
		if err != nil {
			// The configuration is the service's own: a failure here is a bug.
			panic(fmt.Sprintf("oauth: %v", err))
		}
		as.Mount(mux)
	}
	protected := auth.RequireBearerToken(verify, bopts)(inner)
	mux.Handle("/mcp", cfg.crossOrigin().Handler(challenge(withLogger(protected, log), ocfg)))
	mux.Handle("/mcp/", cfg.crossOrigin().Handler(challenge(withLogger(protected, log), ocfg))) // toolsets per client (toolsets_route.go)
	mountMedia(mux, store, log)
	mountReports(mux, store, log, tools.RateLimitsOf(opts...)) // reports.go
	if tools.ServerCardOf(opts...) {
		mountServerCard(mux, store, catalog) // card.go
	}
	mux.Handle(pitchsend.UnsubscribePath, pitchsend.UnsubscribeHandler(store, log))
	if cfg.Mailbox != nil {
		mux.Handle("/mailbox/", cfg.Mailbox)
	}
	mountHealth(mux, store) // health.go
	if cfg.Metrics != nil && cfg.MetricsToken != "" {
		mux.Handle(metrics.Path, cfg.Metrics.Handler(cfg.MetricsToken))
	}
	return cfg.edge(mux)
}

func withLogger(next http.Handler, log zerolog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := log.With().Str("client", ClientIP(r)).Logger()
		next.ServeHTTP(w, r.WithContext(l.WithContext(r.Context())))
	})
}

// challenge adds the WWW-Authenticate header RFC 6750 asks of every 401;
// with OAuth on, it names the protected resource metadata (RFC 9728), which
// tells a client where to sign in.
func challenge(next http.Handler, ocfg *oauth.Config) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&challenger{ResponseWriter: w, oauth: ocfg, token: r.Header.Get("Authorization") != ""}, r)
	})
}

type challenger struct {
	http.ResponseWriter
	oauth *oauth.Config
	token bool // the request carried credentials (RFC 6750 §3.1: then error="invalid_token")
}

func (c *challenger) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		switch {
		case c.oauth != nil && c.token:
			c.Header().Set("WWW-Authenticate", c.oauth.Challenge("invalid_token", ""))
		case c.oauth != nil:
			c.Header().Set("WWW-Authenticate", c.oauth.Challenge("", ""))
		case c.Header().Get("WWW-Authenticate") == "":
			c.Header().Set("WWW-Authenticate", `Bearer realm="outreach", error="invalid_token"`)
		}
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *challenger) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *challenger) Unwrap() http.ResponseWriter { return c.ResponseWriter }
