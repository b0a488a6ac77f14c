package mailauth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/mailboxes"
)

// The sign-in flows. A flow is started by a signed-in admin (or from a
// one-time link of the command line), lives in this process's memory for
// FlowTTL, and is used once: its state names it, its verifier is the PKCE
// secret, and its browser nonce (a cookie of the browser that started it)
// ties the callback to that browser. A refused callback stores nothing.

// Paths of the connect page and the provider's return.
const (
	ConnectPath  = "/mailbox/connect"
	CallbackPath = "/mailbox/callback"
)

// FlowTTL is how long a started sign-in may take; LinkTTL how long a
// one-time link of the command line may wait to be opened.
const (
	FlowTTL = 10 * time.Minute
	LinkTTL = 15 * time.Minute
)

// without turns guards off, for the tests that show each refusal fails
// without its guard (export_test.go); always false in the service.
var without struct{ spend, nonce, pkce, account bool }

type flow struct {
	verifier, nonce, userID string
	expires                 time.Time
}

type link struct {
	userID  string
	expires time.Time
}

// Refusal is a callback or a sign-in refused, with what to tell the
// person, plainly.
type Refusal struct{ Message string }

func (r *Refusal) Error() string { return r.Message }

func refuse(format string, args ...any) error { return &Refusal{Message: fmt.Sprintf(format, args...)} }

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (m *Mailbox) redirect() string { return strings.TrimRight(m.opts.PublicURL, "/") + CallbackPath }

// Start starts a sign-in for admin userID: it returns the provider's
// authorization URL (with the state and the PKCE challenge) and the nonce
// the starting browser keeps as a cookie.
func (m *Mailbox) Start(userID string) (authURL, nonce string) {
	state, verifier, nonce := randomToken(), oauth2.GenerateVerifier(), randomToken()
	m.fmu.Lock()
	m.gcLocked()
	m.flows[state] = &flow{verifier: verifier, nonce: nonce, userID: userID, expires: time.Now().Add(FlowTTL)}
	m.fmu.Unlock()
	opts := []oauth2.AuthCodeOption{oauth2.SetAuthURLParam("login_hint", m.opts.Address)}
	if !without.pkce {
		opts = append(opts, oauth2.S256ChallengeOption(verifier))
	}
	for k, v := range m.opts.Provider.AuthParams {
		opts = append(opts, oauth2.SetAuthURLParam(k, v))
	}
	return m.cfg.AuthCodeURL(state, opts...), nonce
}

func (m *Mailbox) gcLocked() {
	now := time.Now()
	for k, f := range m.flows {
		if now.After(f.expires) {
			delete(m.flows, k)
		}
	}
	for k, l := range m.links {
		if now.After(l.expires) {
			delete(m.links, k)
		}
	}
}

// NewLink makes a one-time link to the connect page for the operator of
// the command line (userID names them in the change entries).
func (m *Mailbox) NewLink(userID string) string {
	tok := randomToken()
	m.fmu.Lock()
	m.gcLocked()
	m.links[tok] = &link{userID: userID, expires: time.Now().Add(LinkTTL)}
	m.fmu.Unlock()
	return strings.TrimRight(m.opts.PublicURL, "/") + ConnectPath + "?link=" + tok
}

// UseLink spends a one-time link, returning whom it was made for.
func (m *Mailbox) UseLink(tok string) (string, error) {
	m.fmu.Lock()
	defer m.fmu.Unlock()
	m.gcLocked()
	l, ok := m.links[tok]
	if !ok {
		return "", refuse("This link is unknown, already used or expired. Print a new one: outreach mailbox connect --provider %s", m.opts.Provider.Name)
	}
	delete(m.links, tok)
	return l.userID, nil
}

// Finish completes the sign-in named by state with the provider's code, in
// the browser holding nonce: it exchanges the code with the flow's PKCE
// verifier, checks that the account signed in is the team mailbox, and
// keeps the refresh token. A state is used once, whatever the outcome.
func (m *Mailbox) Finish(ctx context.Context, state, code, nonce string) (*mailboxes.Connection, error) {
	m.fmu.Lock()
	f, ok := m.flows[state]
	if ok && !without.spend {
		delete(m.flows, state)
	}
	m.fmu.Unlock()
	switch {
	case !ok || state == "":
		return nil, refuse("This sign-in is unknown, was already used, or has expired; nothing was changed. Start again from the connect page.")
	case time.Now().After(f.expires):
		return nil, refuse("This sign-in took longer than %s and has expired; nothing was changed. Start again from the connect page.", FlowTTL)
	case !without.nonce && (nonce == "" || subtle.ConstantTimeCompare([]byte(nonce), []byte(f.nonce)) != 1):
		return nil, refuse("This sign-in was started in another browser, or by another admin; nothing was changed. Start it again here, from the connect page.")
	case code == "":
		return nil, refuse("The provider sent no authorization code; nothing was changed.")
	}
	var proof []oauth2.AuthCodeOption
	if !without.pkce {
		proof = append(proof, oauth2.VerifierOption(f.verifier))
	}
	t, err := m.cfg.Exchange(m.ctx(ctx), code, proof...)
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode != "" {
			return nil, refuse("The provider refused the sign-in's code (%s: %s): it was already used or has expired, or the PKCE proof did not match. Nothing was changed; start again.", re.ErrorCode, firstLine(re.ErrorDescription))
		}
		return nil, refuse("The provider could not be asked for the tokens (%s). Nothing was changed; start again.", firstLine(err.Error()))
	}
	return m.keep(ctx, t, f.userID)
}

// keep checks that t is the team mailbox's and keeps its refresh token
// through the write path, connecting the mailbox.
func (m *Mailbox) keep(ctx context.Context, t *oauth2.Token, userID string) (*mailboxes.Connection, error) {
	who, err := accountOf(t)
	if err != nil {
		return nil, refuse("%s; nothing was changed.", err.Error())
	}
	if !strings.EqualFold(who, m.opts.Address) && !without.account {
		return nil, refuse("You signed in as %s, but the team mailbox is %s. Nothing was changed: sign in at the provider as %s.", who, m.opts.Address, m.opts.Address)
	}
	if t.RefreshToken == "" {
		return nil, refuse("The provider gave no refresh token, so the service could not keep the mailbox connected (Google: the consent must be given again; Microsoft: offline_access must be granted). Nothing was changed.")
	}
	ctx = audit.WithActor(ctx, audit.Actor{UserID: userID, AgentID: "outreach", SessionID: "mailbox-connect-" + randomToken()[:12], Tool: "mailbox_connect"})
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := mailboxes.Of(m.store).Connect(ctx, m.opts.Provider.Name, m.opts.Address, m.opts.Key.Seal(m.opts.Address, t.RefreshToken), scopesOf(t, m.opts.Provider.Scopes))
	if err != nil {
		return nil, err
	}
	m.tok, m.obtained = t, time.Now()
	m.setProblem("")
	m.poke()
	m.opts.Log.Info().Str("mailbox", m.opts.Address).Str("provider", m.opts.Provider.Name).Str("by", userID).Msg("mailbox connected")
	return c, nil
}

func scopesOf(t *oauth2.Token, asked []string) []string {
	if s, ok := t.Extra("scope").(string); ok && s != "" {
		return strings.Fields(s)
	}
	return append([]string{}, asked...)
}

// accountOf reads the account a token was issued to from the ID token
// that came with it. The ID token comes straight from the provider's token
// endpoint over TLS, which vouches for it (OpenID Connect Core 3.1.3.7), so
// its signature is not checked again here.
func accountOf(t *oauth2.Token) (string, error) {
	raw, _ := t.Extra("id_token").(string)
	if raw == "" {
		return "", errors.New("the provider did not say which account signed in (no ID token: the scopes must include openid and email)")
	}
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return "", errors.New("the provider's ID token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return "", errors.New("the provider's ID token is not a JWT")
	}
	var claims struct {
		Email             string `json:"email"`
		PreferredUsername string `json:"preferred_username"`
		UPN               string `json:"upn"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return "", errors.New("the provider's ID token is not a JWT")
	}
	for _, v := range []string{claims.Email, claims.PreferredUsername, claims.UPN} {
		if strings.Contains(v, "@") {
			return strings.ToLower(v), nil
		}
	}
	return "", errors.New("the provider's ID token names no email address (the scopes must include email)")
}

// DeviceStart starts the device code flow (for a server with no browser at
// hand): the person opens the returned verification URL anywhere and
// enters the user code.
func (m *Mailbox) DeviceStart(ctx context.Context) (*oauth2.DeviceAuthResponse, error) {
	if m.opts.Provider.DeviceAuthURL == "" {
		return nil, fmt.Errorf("the mailbox provider %s has no device authorization endpoint configured (OUTREACH_MAILBOX_DEVICE_AUTH_URL)", m.opts.Provider.Name)
	}
	return m.cfg.DeviceAuth(m.ctx(ctx))
}

// DeviceFinish waits for the person to sign in on the device flow da,
// then keeps the refresh token as Finish does, for userID.
func (m *Mailbox) DeviceFinish(ctx context.Context, da *oauth2.DeviceAuthResponse, userID string) (*mailboxes.Connection, error) {
	t, err := m.cfg.DeviceAccessToken(m.ctx(ctx), da)
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode != "" {
			return nil, refuse("the provider ended the device sign-in: %s %s; nothing was changed", re.ErrorCode, firstLine(re.ErrorDescription))
		}
		return nil, err
	}
	return m.keep(ctx, t, userID)
}

// ErrNotAdmin refuses a sign-in of a member who is not an admin.
var ErrNotAdmin = repo.Errorf(repo.CodePermissionDenied, "only an admin connects the team mailbox")
