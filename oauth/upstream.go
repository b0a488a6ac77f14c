package oauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"outreach/repo/access"
)

// Sign-in through an upstream OpenID Connect provider (Google Workspace,
// Microsoft Entra ID, Okta, Keycloak…): the person signs in there, and the
// service takes their verified email, which must be a team member's (and,
// when the operator names domains, in one of them). The code flow runs with
// PKCE, a state bound to this browser and a nonce; go-oidc verifies the ID
// token against the provider's keys.

// Upstream configures the upstream provider.
type Upstream struct {
	Issuer, ClientID, ClientSecret string
	// Domains, when set, are the only email domains let in.
	Domains []string
	// Name is shown on the sign-in button (default: the issuer's host).
	Name string
}

// PathUpstream and PathUpstreamCallback are the upstream sign-in's start
// and return.
const (
	PathUpstream         = "/oauth/upstream"
	PathUpstreamCallback = "/oauth/upstream/callback"
	upstreamCookie       = "outreach_upstream"
)

type upstream struct {
	cfg      Upstream
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
}

// CheckUpstream checks an upstream provider's configuration and reaches it
// (its discovery document), for serve to refuse a wrong one at start.
func CheckUpstream(ctx context.Context, u Upstream) error {
	switch {
	case u.ClientID == "":
		return errors.New("the OpenID Connect client id is missing (--oidc-client-id)")
	case u.ClientSecret == "":
		return errors.New("the OpenID Connect client secret is missing (OUTREACH_OIDC_CLIENT_SECRET)")
	}
	_, err := newUpstream(ctx, u, "")
	return err
}

// newUpstream discovers the provider (its metadata and keys).
func newUpstream(ctx context.Context, u Upstream, redirect string) (*upstream, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(ctx, u.Issuer)
	if err != nil {
		return nil, fmt.Errorf("OpenID Connect provider %s: %w", u.Issuer, err)
	}
	if u.Name == "" {
		if x, err := url.Parse(u.Issuer); err == nil {
			u.Name = x.Host
		}
	}
	var domains []string
	for _, d := range u.Domains {
		if d = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(d), "@")); d != "" {
			domains = append(domains, d)
		}
	}
	u.Domains = domains
	return &upstream{cfg: u, verifier: p.Verifier(&oidc.Config{ClientID: u.ClientID}), oauth: oauth2.Config{ClientID: u.ClientID,
		ClientSecret: u.ClientSecret, Endpoint: p.Endpoint(), RedirectURL: redirect, Scopes: []string{oidc.ScopeOpenID, "email", "profile"}}}, nil
}

// upstreamStart sends the browser to the provider for an authorization
// request in progress. The state names the request and carries a random
// part; this browser keeps the state, the PKCE verifier and the nonce in a
// cookie, and the request keeps the state's hash.
func (s *Server) upstreamStart(w http.ResponseWriter, r *http.Request) {
	if s.up == nil {
		http.NotFound(w, r)
		return
	}
	ctx := r.Context()
	ar, err := access.Of(s.store).OAuthRequestByID(ctx, r.URL.Query().Get("id"))
	if err != nil {
		s.message(w, http.StatusNotFound, "Sign-in expired", "This sign-in link is unknown or has expired. Start again from your assistant.")
		return
	}
	state, verifier, nonce := ar.ID+"."+random(), oauth2.GenerateVerifier(), random()
	if _, err := access.Of(s.store).UpdateOAuthRequest(actor(ctx, "sign-in"), ar.ID, func(x *access.OAuthRequest) error {
		x.UpstreamHash = access.HashSecret(state)
		return nil
	}); err != nil {
		s.message(w, http.StatusConflict, "Sign-in expired", "This sign-in has expired. Start again from your assistant.")
		return
	}
	u, _ := url.Parse(s.cfg.PublicURL)
	// Lax: the provider's redirect back is a navigation from another site.
	http.SetCookie(w, &http.Cookie{Name: upstreamCookie, Value: state + " " + verifier + " " + nonce, Path: u.Path + PathUpstreamCallback,
		HttpOnly: true, Secure: s.secure(), SameSite: http.SameSiteLaxMode, MaxAge: int(access.OAuthRequestTTL.Seconds())})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, s.up.oauth.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)), http.StatusSeeOther)
}

// errUpstream is a refusal of an upstream sign-in, safe to show.
type errUpstream struct{ msg string }

func (e errUpstream) Error() string { return e.msg }

// upstreamCallback takes the provider's answer: the code is exchanged, the
// ID token verified, and its verified email must be a team member's.
func (s *Server) upstreamCallback(w http.ResponseWriter, r *http.Request) {
	if s.up == nil {
		http.NotFound(w, r)
		return
	}
	ctx := r.Context()
	q := r.URL.Query()
	c, err := r.Cookie(upstreamCookie)
	parts := []string{}
	if err == nil {
		parts = strings.Split(c.Value, " ")
	}
	state := q.Get("state")
	if len(parts) != 3 || state == "" || subtle.ConstantTimeCompare([]byte(parts[0]), []byte(state)) != 1 {
		s.message(w, http.StatusForbidden, "Sign-in refused", "The answer of the sign-in provider does not belong to this browser's sign-in. Start again from your assistant.")
		return
	}
	id, _, _ := strings.Cut(state, ".")
	ar, err := access.Of(s.store).OAuthRequestByID(ctx, id)
	if err != nil || ar.UpstreamHash == "" || subtle.ConstantTimeCompare([]byte(access.HashSecret(state)), []byte(ar.UpstreamHash)) != 1 {
		s.message(w, http.StatusForbidden, "Sign-in expired", "This sign-in has expired or was used. Start again from your assistant.")
		return
	}
	if e := q.Get("error"); e != "" {
		s.message(w, http.StatusForbidden, "Sign-in refused", "The sign-in provider answered: "+e+". Start again from your assistant.")
		return
	}
	email, err := s.upstreamEmail(ctx, q.Get("code"), parts[1], parts[2])
	var refusal errUpstream
	if errors.As(err, &refusal) {
		s.message(w, http.StatusForbidden, "Sign-in refused", refusal.msg)
		return
	}
	if err != nil {
		s.log.Warn().Err(err).Msg("oauth upstream sign-in")
		s.message(w, http.StatusBadGateway, "Sign-in failed", "The sign-in provider's answer could not be checked. Try again.")
		return
	}
	u, err := access.Of(s.store).UserByEmail(ctx, email)
	if err != nil || u.ArchivedAt != nil {
		s.message(w, http.StatusForbidden, "Not a team member", "You signed in as "+email+", which is not a member of this team. Ask an admin to add you.")
		return
	}
	allowed := DefaultScopes
	if si, err := access.Of(s.store).SignInOf(ctx, u.ID); err == nil {
		allowed = si.Scopes
	}
	http.SetCookie(w, &http.Cookie{Name: upstreamCookie, Value: "", Path: c.Path, MaxAge: -1})
	s.signedIn(w, r, ar, u.ID, u.Email, allowed)
}

// upstreamEmail exchanges the code (with the PKCE verifier), verifies the
// ID token (issuer, audience, expiry, signature, nonce) and returns its
// verified email, when its domain is allowed.
func (s *Server) upstreamEmail(ctx context.Context, code, verifier, nonce string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tok, err := s.up.oauth.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return "", err
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok {
		return "", errors.New("the provider's token response has no ID token")
	}
	idt, err := s.up.verifier.Verify(ctx, raw)
	if err != nil {
		return "", err
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return "", errors.New("the ID token's nonce is not this sign-in's")
	}
	var claims struct {
		Email         string `json:"email"`
		EmailVerified *bool  `json:"email_verified"`
	}
	if err := idt.Claims(&claims); err != nil {
		return "", err
	}
	email := strings.ToLower(strings.TrimSpace(claims.Email))
	if email == "" || claims.EmailVerified == nil || !*claims.EmailVerified {
		return "", errUpstream{"Your account at the sign-in provider has no verified email address, which this service needs to know who you are."}
	}
	if len(s.up.cfg.Domains) > 0 {
		_, domain, _ := strings.Cut(email, "@")
		if !slices.Contains(s.up.cfg.Domains, domain) {
			return "", errUpstream{"You signed in as " + email + ", whose domain this service does not let in."}
		}
	}
	return email, nil
}
