package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/rs/zerolog"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/access"
)

// The authorization server: zitadel/oidc's OpenID provider (package op)
// does the protocol (the authorization endpoint's validation, the code and
// refresh grants with PKCE, revocation); this file is its storage, over the
// write path, and the edges the library leaves to its user: RFC 8707's
// resource, PKCE with S256 made mandatory, exact redirect URIs, the iss
// parameter (RFC 9207), the metadata (RFC 8414), Dynamic Client Registration
// (RFC 7591) and Client ID Metadata Documents. The sign-in and consent
// pages are in pages.go.

// Paths of the authorization server, under the public URL.
const (
	PathAuthorize = "/oauth/authorize"
	PathCallback  = "/oauth/authorize/callback"
	PathToken     = "/oauth/token"
	PathRevoke    = "/oauth/revoke"
	PathRegister  = "/oauth/register"
	PathLogin     = "/oauth/login"
	PathConsent   = "/oauth/consent"
	PathInvite    = "/oauth/invite"
	// The library's other endpoints, which the service does not offer
	// (no ID tokens, no user info): answered by the library, unlisted.
	pathUserinfo   = "/oauth/userinfo"
	pathEndSession = "/oauth/end_session"
	pathKeys       = "/oauth/keys"
)

// Options tune the authorization server.
type Options struct {
	// ClientMetadata says which Client ID Metadata Documents may be fetched.
	ClientMetadata FetchOptions
	// Upstream, when set, lets members sign in with an OpenID Connect
	// provider as well.
	Upstream *Upstream
	Log      zerolog.Logger
}

// Server is the service's authorization server.
type Server struct {
	cfg      Config
	store    *repo.Store
	provider *op.Provider
	meta     *clientMetadata
	signins  *attempts
	idKey    idKey
	writes   perAddress
	up       *upstream
	log      zerolog.Logger
}

// actor attributes the authorization server's writes.
func actor(ctx context.Context, tool string) context.Context {
	return audit.WithActor(ctx, repo.SystemActor("oauth "+tool))
}

// NewServer builds the authorization server of cfg.
func NewServer(store *repo.Store, cfg Config, o Options) (*Server, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, store: store, meta: newClientMetadata(o.ClientMetadata), signins: newAttempts(), log: o.Log, idKey: idKey{random()[:16], key}}
	opts := []op.Option{
		op.WithCustomEndpoints(op.NewEndpoint(PathAuthorize), op.NewEndpoint(PathToken), op.NewEndpoint(pathUserinfo),
			op.NewEndpoint(PathRevoke), op.NewEndpoint(pathEndSession), op.NewEndpoint(pathKeys)),
		op.WithCrypto(tokenIDs{store}),
	}
	if strings.HasPrefix(cfg.Issuer(), "http://") {
		opts = append(opts, op.WithAllowInsecure())
	}
	p, err := op.NewProvider(&op.Config{CodeMethodS256: true, GrantTypeRefreshToken: true, SupportedScopes: Scopes},
		&storage{s}, op.StaticIssuer(cfg.Issuer()), opts...)
	if err != nil {
		return nil, err
	}
	s.provider = p
	if o.Upstream != nil {
		// serve checked the provider (CheckUpstream); if it went away since,
		// the local sign-in still works and the log says why the other is missing.
		if s.up, err = newUpstream(context.Background(), *o.Upstream, cfg.PublicURL+PathUpstreamCallback); err != nil {
			o.Log.Error().Err(err).Msg("OpenID Connect sign-in is off")
		}
	}
	return s, nil
}

// Mount serves the authorization server's endpoints and metadata.
func (s *Server) Mount(mux *http.ServeMux) {
	// With a path in the public URL, the reverse proxy forwards {path}/…
	// without it (as it does {path}/mcp), and /.well-known/… unchanged: the
	// endpoints are served at the root, the metadata at the path-suffixed
	// well-known URLs.
	u, _ := url.Parse(s.cfg.PublicURL)
	prefix := u.Path
	inner := http.Handler(s.provider)
	issuerCtx := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(op.ContextWithIssuer(r.Context(), s.cfg.Issuer())))
		})
	}
	mux.Handle(PathAuthorize, s.withIss(issuerCtx(http.HandlerFunc(s.authorize))))
	mux.Handle(PathCallback, s.withIss(inner))
	mux.Handle(PathToken, noStore(inner))
	mux.Handle(PathRevoke, inner)
	mux.HandleFunc(PathRegister, s.register)
	mux.HandleFunc(PathLogin, s.login)
	mux.HandleFunc(PathConsent, s.consent)
	mux.HandleFunc(PathInvite, s.invite)
	mux.HandleFunc(PathUpstream, s.upstreamStart)
	mux.HandleFunc(PathUpstreamCallback, s.upstreamCallback)
	md := http.HandlerFunc(s.metadata)
	mux.Handle("/.well-known/oauth-authorization-server"+prefix, md)
	mux.Handle("/.well-known/openid-configuration"+prefix, md)
}

// noStore marks token responses uncacheable (RFC 6749 §5.1), which the
// library leaves out.
func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Pragma", "no-cache")
		next.ServeHTTP(w, r)
	})
}

// AuthorizationServerMetadata is the RFC 8414 document.
func (s *Server) AuthorizationServerMetadata() map[string]any {
	iss := s.cfg.Issuer()
	return map[string]any{
		"issuer":                                         iss,
		"authorization_endpoint":                         iss + PathAuthorize,
		"token_endpoint":                                 iss + PathToken,
		"registration_endpoint":                          iss + PathRegister,
		"revocation_endpoint":                            iss + PathRevoke,
		"scopes_supported":                               Scopes,
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"revocation_endpoint_auth_methods_supported":     []string{"none"},
		"code_challenge_methods_supported":               []string{"S256"},
		"authorization_response_iss_parameter_supported": true,
		"client_id_metadata_document_supported":          true,
	}
}

func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "GET the metadata", http.StatusMethodNotAllowed)
		return
	}
	writeJSON(w, http.StatusOK, s.AuthorizationServerMetadata())
}

type resourceKey struct{}

// authorize hands the authorization request to the library, with the
// resource parameters (RFC 8707) where the validation can read them.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	if !s.writes.allow(w, r) {
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "the authorization request could not be read", http.StatusBadRequest)
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), resourceKey{}, r.Form["resource"]))
	op.Authorize(w, r, authorizer{s.provider, s})
}

// authorizer is the library's provider with the service's validation.
type authorizer struct {
	*op.Provider
	s *Server
}

// ValidateAuthRequest checks what the library leaves open: the client is
// known, the redirect URI is one of its own exactly, PKCE with S256 is
// used, and the resource, when named, is this service's MCP endpoint.
func (a authorizer) ValidateAuthRequest(ctx context.Context, ar *oidc.AuthRequest, st op.Storage, v *op.IDTokenHintVerifier) (string, error) {
	c, err := st.GetClientByClientID(ctx, ar.ClientID)
	if err != nil {
		return "", oidc.ErrInvalidRequestRedirectURI().WithDescription("unknown client_id: %s", err.Error())
	}
	if !slices.Contains(c.RedirectURIs(), ar.RedirectURI) {
		return "", oidc.ErrInvalidRequestRedirectURI().WithDescription("redirect_uri %s is not one of the client's registered redirect URIs (compared exactly)", ar.RedirectURI)
	}
	if len(ar.Scopes) == 0 {
		// No scope asked (RFC 6749 §3.3 lets the server choose): read and
		// write, as far as the member's role allows; admin only when asked.
		ar.Scopes = slices.Clone(DefaultScopes)
	}
	sub, err := op.ValidateAuthRequestClient(ctx, ar, c, v)
	if err != nil {
		return "", err
	}
	if ar.ResponseType != oidc.ResponseTypeCode {
		return "", &oidc.Error{ErrorType: "unsupported_response_type", Description: "only response_type=code is served"}
	}
	if ar.CodeChallenge == "" {
		return "", oidc.ErrInvalidRequest().WithDescription("code_challenge is required: PKCE with code_challenge_method=S256")
	}
	if ar.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return "", oidc.ErrInvalidRequest().WithDescription("code_challenge_method must be S256")
	}
	if res, _ := ctx.Value(resourceKey{}).([]string); len(res) > 1 || (len(res) == 1 && res[0] != a.s.cfg.Resource()) {
		return "", &oidc.Error{ErrorType: "invalid_target", Description: "resource must be " + a.s.cfg.Resource() + ", the only resource this server issues tokens for"}
	}
	if len(ourScopes(ar.Scopes)) == 0 {
		return "", oidc.ErrInvalidScope().WithDescription("ask for at least one of the scopes read, write, admin")
	}
	return sub, nil
}

// ourScopes keeps the service's scopes of a request, in their order.
func ourScopes(scopes []string) []string {
	var out []string
	for _, sc := range Scopes {
		if slices.Contains(scopes, sc) {
			out = append(out, sc)
		}
	}
	return out
}

// withIss adds the iss parameter (RFC 9207) to every redirect back to a
// client: the code, an error, a denial.
func (s *Server) withIss(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&issWriter{ResponseWriter: w, s: s}, r)
	})
}

type issWriter struct {
	http.ResponseWriter
	s *Server
}

func (w *issWriter) WriteHeader(code int) {
	if code >= 300 && code < 400 {
		if loc := w.Header().Get("Location"); loc != "" && !strings.HasPrefix(loc, w.s.cfg.PublicURL+"/") {
			w.Header().Set("Location", addIss(loc, w.s.cfg.Issuer()))
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func addIss(loc, iss string) string {
	u, err := url.Parse(loc)
	if err != nil {
		return loc
	}
	q := u.Query()
	if q.Get("iss") == "" {
		q.Set("iss", iss)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// storage is the library's storage over the service's write path.
type storage struct{ s *Server }

var _ op.Storage = (*storage)(nil)

// notFound tells the library a record does not exist.
type notFound struct{ error }

func (notFound) IsNotFound() {}

func (st *storage) CreateAuthRequest(ctx context.Context, ar *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	c, err := st.GetClientByClientID(ctx, ar.ClientID)
	if err != nil {
		return nil, err
	}
	r := &access.OAuthRequest{ClientID: ar.ClientID, ClientName: clientName(c), RedirectURI: ar.RedirectURI, State: ar.State, Nonce: ar.Nonce,
		ResponseMode: string(ar.ResponseMode), Scopes: ourScopes(ar.Scopes), CodeChallenge: ar.CodeChallenge,
		CodeChallengeMethod: string(ar.CodeChallengeMethod), Resource: st.s.cfg.Resource()}
	if err := access.Of(st.s.store).CreateOAuthRequest(actor(ctx, "authorize"), r); err != nil {
		return nil, err
	}
	return authRequest{r}, nil
}

func (st *storage) AuthRequestByID(ctx context.Context, id string) (op.AuthRequest, error) {
	r, err := access.Of(st.s.store).OAuthRequestByID(ctx, id)
	if err != nil {
		return nil, notFound{err}
	}
	return authRequest{r}, nil
}

func (st *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	r, err := access.Of(st.s.store).OAuthRequestByCode(ctx, code)
	if err != nil {
		return nil, notFound{err}
	}
	return authRequest{r}, nil
}

func (st *storage) SaveAuthCode(ctx context.Context, id, code string) error {
	return access.Of(st.s.store).SetOAuthCode(actor(ctx, "authorize"), id, code)
}

func (st *storage) DeleteAuthRequest(ctx context.Context, id string) error {
	return access.Of(st.s.store).EndOAuthRequest(actor(ctx, "token"), id)
}

func (st *storage) CreateAccessToken(ctx context.Context, tr op.TokenRequest) (string, time.Time, error) {
	id, _, exp, err := st.CreateAccessAndRefreshTokens(ctx, tr, "")
	return id, exp, err
}

// CreateAccessAndRefreshTokens records a grant at the code's exchange, or
// rotates one at a refresh: the ids it returns are the tokens themselves
// (see tokenIDs), and the store keeps their hashes.
func (st *storage) CreateAccessAndRefreshTokens(ctx context.Context, tr op.TokenRequest, current string) (string, string, time.Time, error) {
	ctx = actor(ctx, "token")
	if current != "" {
		var clientID string
		if rr, ok := tr.(*refreshRequest); ok {
			clientID = rr.g.ClientID
		}
		g, tok, err := access.Of(st.s.store).RefreshOAuthGrant(ctx, current, clientID)
		if err != nil {
			return "", "", time.Time{}, oauthErr(err)
		}
		return tok.Access, tok.Refresh, g.AccessExpiresAt, nil
	}
	ar, ok := tr.(authRequest)
	if !ok {
		return "", "", time.Time{}, oidc.ErrUnsupportedGrantType()
	}
	g, tok, err := access.Of(st.s.store).IssueOAuthGrant(ctx, access.OAuthGrantInput{UserID: ar.r.UserID, ClientID: ar.r.ClientID, ClientName: ar.r.ClientName,
		Resource: ar.r.Resource, Scopes: ar.r.Scopes})
	if err != nil {
		return "", "", time.Time{}, err
	}
	return tok.Access, tok.Refresh, g.AccessExpiresAt, nil
}

// oauthErr turns a refused refresh into the grant error the client reads.
func oauthErr(err error) error {
	if errors.Is(err, repo.ErrBadKey) {
		return oidc.ErrInvalidGrant().WithDescription("%s", lastReason(err))
	}
	return err
}

func lastReason(err error) string {
	reason := err.Error()
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		if errs := j.Unwrap(); len(errs) > 0 {
			reason = errs[len(errs)-1].Error()
		}
	}
	return reason
}

func (st *storage) TokenRequestByRefreshToken(ctx context.Context, rt string) (op.RefreshTokenRequest, error) {
	g, err := access.Of(st.s.store).OAuthGrantForRefresh(actor(ctx, "token"), rt)
	if err != nil {
		return nil, oauthErr(err)
	}
	return &refreshRequest{g: g}, nil
}

func (st *storage) TerminateSession(context.Context, string, string) error { return nil }

// RevokeToken revokes the grant a token belongs to (RFC 7009): a token
// unknown or of another client changes nothing.
func (st *storage) RevokeToken(ctx context.Context, token, _, clientID string) *oidc.Error {
	g, err := access.Of(st.s.store).OAuthGrantByToken(ctx, token)
	if err != nil {
		if repo.ErrorCode(err) == repo.CodeNotFound {
			return nil
		}
		return oidc.ErrServerError()
	}
	if g.ClientID != clientID {
		return oidc.ErrInvalidClient().WithDescription("the token was issued to another client")
	}
	if _, err := access.Of(st.s.store).RevokeOAuthGrant(actor(ctx, "revoke"), g.ID, "revoked by the client"); err != nil {
		return oidc.ErrServerError()
	}
	return nil
}

func (st *storage) GetRefreshTokenInfo(ctx context.Context, clientID, token string) (string, string, error) {
	g, err := access.Of(st.s.store).OAuthGrantByToken(ctx, token)
	if err != nil || g.ClientID != clientID || !strings.HasPrefix(token, access.RefreshTokenPrefix) {
		return "", "", op.ErrInvalidRefreshToken
	}
	return g.UserID, token, nil
}

var errNoIDTokens = errors.New("this server offers no user info, introspection or JWT profile")

// idKey signs the ID token the library puts in every token response (the
// service's clients use the access token; nothing reads the ID token). The
// key lives in this process only, made at start: nothing to keep secret at
// rest, and nothing that verifies with it outlives a restart.
type idKey struct {
	id  string
	key *ecdsa.PrivateKey
}

func (k idKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.ES256 }
func (k idKey) Algorithm() jose.SignatureAlgorithm          { return jose.ES256 }
func (k idKey) Key() any                                    { return k.key }
func (k idKey) ID() string                                  { return k.id }
func (k idKey) Use() string                                 { return "sig" }

type publicKey struct{ idKey }

func (k publicKey) Key() any { return &k.key.PublicKey }

func (st *storage) SigningKey(context.Context) (op.SigningKey, error) { return st.s.idKey, nil }
func (st *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.ES256}, nil
}
func (st *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{st.s.idKey}}, nil
}

func (st *storage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	if strings.HasPrefix(id, "https://") {
		doc, err := st.s.meta.get(ctx, id)
		if err != nil {
			return nil, notFound{err}
		}
		return client{id: id, name: doc.ClientName, redirects: doc.RedirectURIs, loginURL: st.s.cfg.Issuer() + PathLogin}, nil
	}
	c, err := access.Of(st.s.store).OAuthClientByID(ctx, id)
	if err != nil {
		return nil, notFound{err}
	}
	return client{id: c.ID, name: c.ClientName, redirects: c.RedirectURIs, loginURL: st.s.cfg.Issuer() + PathLogin}, nil
}

func (st *storage) AuthorizeClientIDSecret(context.Context, string, string) error {
	return oidc.ErrInvalidClient().WithDescription("clients here are public: no secret, PKCE instead")
}
func (st *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}
func (st *storage) SetUserinfoFromToken(context.Context, *oidc.UserInfo, string, string, string) error {
	return errNoIDTokens
}
func (st *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errNoIDTokens
}
func (st *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}
func (st *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errNoIDTokens
}
func (st *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errNoIDTokens
}
func (st *storage) Health(ctx context.Context) error { return st.s.store.Ping(ctx) }

// tokenIDs stands where the library encrypts an access token's id (with
// its subject) into the token, and an authorization request's id into its
// code: here the id is the token (a random value the store keeps only
// hashed), so "encrypting" drops the subject and "decrypting" finds it by
// the token's hash; and a code is a fresh random value, whose hash
// SaveAuthCode records. No key exists that could be stolen to forge or read
// tokens or codes.
type tokenIDs struct{ store *repo.Store }

// CodePrefix starts every authorization code.
const CodePrefix = "outreach_ac_"

func (t tokenIDs) Encrypt(s string) (string, error) {
	if id, _, ok := strings.Cut(s, ":"); ok && strings.HasPrefix(id, access.AccessTokenPrefix) {
		return id, nil
	}
	return CodePrefix + random(), nil
}

func (t tokenIDs) Decrypt(token string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g, err := access.Of(t.store).OAuthGrantByToken(ctx, token)
	if err != nil {
		return "", err
	}
	return token + ":" + g.UserID, nil
}

// authRequest is a stored authorization request as the library sees it.
type authRequest struct{ r *access.OAuthRequest }

func (a authRequest) GetID() string          { return a.r.ID }
func (a authRequest) GetACR() string         { return "" }
func (a authRequest) GetAMR() []string       { return []string{"pwd"} }
func (a authRequest) GetAudience() []string  { return []string{a.r.Resource} }
func (a authRequest) GetAuthTime() time.Time { return a.r.UpdatedAt }
func (a authRequest) GetClientID() string    { return a.r.ClientID }
func (a authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	return &oidc.CodeChallenge{Challenge: a.r.CodeChallenge, Method: oidc.CodeChallengeMethod(a.r.CodeChallengeMethod)}
}
func (a authRequest) GetNonce() string                   { return a.r.Nonce }
func (a authRequest) GetRedirectURI() string             { return a.r.RedirectURI }
func (a authRequest) GetResponseType() oidc.ResponseType { return oidc.ResponseTypeCode }
func (a authRequest) GetResponseMode() oidc.ResponseMode { return oidc.ResponseMode(a.r.ResponseMode) }

// GetScopes adds offline_access, which the library asks for before it
// issues a refresh token: every grant here has one.
func (a authRequest) GetScopes() []string {
	return append(slices.Clone(a.r.Scopes), oidc.ScopeOfflineAccess)
}
func (a authRequest) GetState() string   { return a.r.State }
func (a authRequest) GetSubject() string { return a.r.UserID }
func (a authRequest) Done() bool         { return a.r.ApprovedAt != nil && a.r.UserID != "" }

// refreshRequest is a grant at a refresh, as the library sees it.
type refreshRequest struct{ g *access.OAuthGrant }

func (r *refreshRequest) GetAMR() []string       { return []string{"pwd"} }
func (r *refreshRequest) GetAudience() []string  { return []string{r.g.Resource} }
func (r *refreshRequest) GetAuthTime() time.Time { return r.g.CreatedAt }
func (r *refreshRequest) GetClientID() string    { return r.g.ClientID }
func (r *refreshRequest) GetScopes() []string {
	return append(slices.Clone(r.g.Scopes), oidc.ScopeOfflineAccess)
}
func (r *refreshRequest) GetSubject() string        { return r.g.UserID }
func (r *refreshRequest) SetCurrentScopes([]string) {} // a refresh keeps the grant's scopes

// client is a registered or metadata-document client as the library sees
// it: public, code flow only, its redirect URIs compared exactly (see
// ValidateAuthRequest).
type client struct {
	id, name, loginURL string
	redirects          []string
}

func clientName(c op.Client) string {
	if cc, ok := c.(client); ok && cc.name != "" {
		return cc.name
	}
	return c.GetID()
}

func (c client) GetID() string                       { return c.id }
func (c client) RedirectURIs() []string              { return c.redirects }
func (c client) PostLogoutRedirectURIs() []string    { return nil }
func (c client) ApplicationType() op.ApplicationType { return op.ApplicationTypeNative }
func (c client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodNone }
func (c client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c client) LoginURL(id string) string            { return c.loginURL + "?id=" + url.QueryEscape(id) }
func (c client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (c client) IDTokenLifetime() time.Duration       { return time.Hour }
func (c client) DevMode() bool                        { return false }
func (c client) IsScopeAllowed(scope string) bool     { return slices.Contains(Scopes, scope) }
func (c client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c client) ClockSkew() time.Duration             { return 0 }
func (c client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}
func (c client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
