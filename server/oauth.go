package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"outreach/audit"
	"outreach/oauth"
	"outreach/repo"
	"outreach/repo/access"
	"outreach/tools"
)

// OAuthKey marks, in a token's Extra, a caller that signed in with OAuth
// (its value: the grant's id).
const OAuthKey = "oauth_grant"

// oauthActor is the actor of an OAuth grant: the member who approved the
// client, as the client's agent (one per client and member).
func oauthActor(g *access.OAuthGrant) audit.Actor {
	return audit.Actor{UserID: g.UserID, AgentID: g.AgentID, KeyID: g.AgentID, KeyName: g.ClientName,
		AgentType: access.AgentTypeOAuth, Scopes: slices.Clone(g.Scopes)}
}

// scopeChallenge answers 403 with an insufficient_scope challenge to a
// tools/call whose tool needs a scope an OAuth token lacks, so that the
// client can ask the member for it (the MCP specification's scope
// challenge). Calls with agent keys are left to the tools, which answer
// permission_denied as they always have.
func scopeChallenge(next http.Handler, cfg oauth.Config, scopes map[string]string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := auth.TokenInfoFromContext(r.Context())
		if info == nil || info.Extra[OAuthKey] == nil || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := peekBody(w, r)
		if !ok {
			return
		}
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '{' && json.Unmarshal(t, &msg) == nil && msg.Method == "tools/call" {
			if need, known := scopes[msg.Params.Name]; known && !slices.Contains(info.Scopes, need) && !slices.Contains(info.Scopes, repo.ScopeAdmin) {
				desc := fmt.Sprintf("%s needs the %s scope; this token has: %s", msg.Params.Name, need, strings.Join(info.Scopes, ", "))
				w.Header().Set("WWW-Authenticate", cfg.ScopeChallenge(info.Scopes, need, desc))
				http.Error(w, desc, http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// oauthVerifier checks an OAuth access token: ErrDisabled when OAuth is
// off, else the grant's actor when the token is good for this resource.
func oauthVerifier(store *repo.Store, cfg *oauth.Config, implicit func(context.Context, audit.Actor) (string, error)) func(r *http.Request, token string) (*auth.TokenInfo, error) {
	return func(r *http.Request, token string) (*auth.TokenInfo, error) {
		if cfg == nil {
			return nil, fmt.Errorf("%w: %w", auth.ErrInvalidToken, oauth.ErrDisabled)
		}
		g, err := access.Of(store).AuthenticateOAuth(r.Context(), token, cfg.Resource())
		if errors.Is(err, repo.ErrBadKey) {
			return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, lastReason(err))
		}
		if err != nil {
			return nil, err
		}
		info := &auth.TokenInfo{Scopes: slices.Clone(g.Scopes), UserID: "oauth:" + g.ID, Expiration: g.AccessExpiresAt,
			Extra: map[string]any{tools.ActorKey: oauthActor(g), OAuthKey: g.ID, tools.BaseURLKey: cfg.PublicURL, tools.ImplicitSessionKey: implicit}}
		return info, nil
	}
}

// lastReason is the reason an authentication error gives: the last of the
// joined errors (errors.Unwrap gives nil for a join).
func lastReason(err error) string {
	reason := err.Error()
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		if errs := j.Unwrap(); len(errs) > 0 {
			reason = errs[len(errs)-1].Error()
		}
	}
	return reason
}
