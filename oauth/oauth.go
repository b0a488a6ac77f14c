// Package oauth makes the service an OAuth 2.1 protected resource as the MCP
// authorization specification asks: the Protected Resource Metadata (RFC
// 9728) that tells a client where to sign in, the challenge a 401 carries,
// and the scope challenge (insufficient_scope) of a call the token's scopes
// do not cover. The tokens themselves are the grants package repo keeps
// (repo.OAuthGrant): audience-bound (RFC 8707) and stored only as hashes.
// Agent keys keep working beside them; nothing here is served unless the
// operator turns OAuth on.
package oauth

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"outreach/repo"
)

// Scopes are the scopes a token may carry, in the order of their reach.
var Scopes = []string{repo.ScopeRead, repo.ScopeWrite, repo.ScopeAdmin}

// DefaultScopes are granted when a client asks for no scope (as far as the
// member's role allows them).
var DefaultScopes = []string{repo.ScopeRead, repo.ScopeWrite}

// Config is the resource server's setting: the public base URL every
// metadata document names (the MCP endpoint is its /mcp, the issuer of the
// service's own authorization server the base itself).
type Config struct {
	PublicURL string
}

// CheckPublicURL says what is wrong with a public base URL, or nil: an
// absolute http(s) URL without query or fragment. A trailing slash is
// dropped.
func CheckPublicURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q: want http(s)://host[:port][/path], without query, fragment or user", raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// Resource is the resource identifier (RFC 8707) of the MCP endpoint: the
// audience every token must name.
func (c Config) Resource() string { return c.PublicURL + "/mcp" }

// Issuer is the issuer identifier of the service's authorization server.
func (c Config) Issuer() string { return c.PublicURL }

// MetadataPath is where the resource's metadata is served: RFC 9728's
// well-known path with the resource's path appended.
const MetadataPath = "/.well-known/oauth-protected-resource"

// MetadataURL is the URL the 401 challenge names (resource_metadata).
func (c Config) MetadataURL() string {
	u, _ := url.Parse(c.PublicURL)
	return u.Scheme + "://" + u.Host + MetadataPath + u.Path + "/mcp"
}

// Metadata is the Protected Resource Metadata document.
func (c Config) Metadata() *oauthex.ProtectedResourceMetadata {
	return &oauthex.ProtectedResourceMetadata{
		Resource:               c.Resource(),
		AuthorizationServers:   []string{c.Issuer()},
		ScopesSupported:        slices.Clone(Scopes),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Outreach",
	}
}

// Mount serves the metadata at the path-suffixed form for /mcp and at the
// bare well-known path (clients that strip the path look there).
func (c Config) Mount(mux *http.ServeMux) {
	u, _ := url.Parse(c.PublicURL)
	h := auth.ProtectedResourceMetadataHandler(c.Metadata())
	mux.Handle(MetadataPath+u.Path+"/mcp", h)
	mux.Handle(MetadataPath, h)
}

// ErrDisabled refuses an OAuth access token on a server where OAuth is off.
var ErrDisabled = errors.New("OAuth is not turned on on this server (serve --oauth); use an agent key")

// Challenge is the WWW-Authenticate value of a 401: the metadata that says
// where to get a token.
func (c Config) Challenge(errCode, description string) string {
	params := []string{fmt.Sprintf("resource_metadata=%q", c.MetadataURL())}
	if errCode != "" {
		params = append(params, fmt.Sprintf("error=%q", errCode))
	}
	if description != "" {
		params = append(params, fmt.Sprintf("error_description=%q", sanitize(description)))
	}
	return "Bearer " + strings.Join(params, ", ")
}

// ScopeChallenge is the WWW-Authenticate value of a 403 for a call whose
// scope the token lacks: the scopes to ask for (those granted and the one
// needed), so that a client asks for them at its next authorization.
func (c Config) ScopeChallenge(granted []string, need, description string) string {
	want := append(slices.Clone(granted), need)
	want = slices.DeleteFunc(want, func(s string) bool { return !slices.Contains(Scopes, s) })
	slices.SortFunc(want, func(a, b string) int { return slices.Index(Scopes, a) - slices.Index(Scopes, b) })
	want = slices.Compact(want)
	return fmt.Sprintf("Bearer error=\"insufficient_scope\", scope=%q, resource_metadata=%q, error_description=%q",
		strings.Join(want, " "), c.MetadataURL(), sanitize(description))
}

// sanitize keeps a header parameter to printable ASCII without quotes.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return '\''
		}
		return r
	}, s)
}
