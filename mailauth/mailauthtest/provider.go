// Package mailauthtest runs an OAuth 2.0 / OpenID Connect provider for
// tests: zitadel/oidc's provider (package op) over its example storage,
// with its sign-in pages, the device flow, refresh token rotation and
// revocation (RFC 7009), and introspection (RFC 7662), which Dovecot's
// oauth2 passdb asks. Access tokens expire after AccessTTL, which a test
// shortens to see the service refresh across several expiries.
package mailauthtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// User is an account at the provider.
type User struct {
	ID, Email, Password string
}

// Provider is a running test provider.
type Provider struct {
	URL                  string
	ClientID, Secret     string
	AuthURL, TokenURL    string
	DeviceURL, RevokeURL string
	IntrospectURL        string
	store                *tokenStore
	// Refreshes counts the refresh token grants asked; Exchanges the
	// authorization codes.
	Refreshes, Exchanges atomic.Int64
	issued               struct {
		sync.Mutex
		tokens []string
	}
	// Down, when set, makes the token endpoint unreachable (the connection
	// is closed without an answer); Garbage makes it answer 200 with HTML.
	Down, Garbage atomic.Bool
}

// Start runs the provider for the test with users, for a client that
// returns to redirect.
func Start(t testing.TB, redirect string, users ...User) *Provider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	p := &Provider{URL: issuer, ClientID: "outreach-mail", Secret: "test-client-secret"}
	us := userStore{users: map[string]*storage.User{}}
	for _, u := range users {
		us.users[u.ID] = &storage.User{ID: u.ID, Username: u.Email, Password: u.Password, Email: u.Email, EmailVerified: true,
			FirstName: u.ID, LastName: "Test", PreferredLanguage: language.English, IsAdmin: true}
	}
	web := storage.WebClient(p.ClientID, p.Secret, redirect)
	st := &tokenStore{Storage: storage.NewStorageWithClients(us, map[string]*storage.Client{web.GetID(): web}), users: us, clientID: p.ClientID, expiry: map[string]time.Time{}}
	st.ttl.Store(int64(time.Hour))
	p.store = st
	// The example provider logs every request through slog's default.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	router := exampleop.SetupServer(issuer, st, nil, false)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/token" {
			r.ParseForm()
			switch r.PostForm.Get("grant_type") {
			case "refresh_token":
				p.Refreshes.Add(1)
			case "authorization_code":
				p.Exchanges.Add(1)
			}
			if p.Down.Load() {
				if hj, ok := w.(http.Hijacker); ok {
					c, _, _ := hj.Hijack()
					c.Close()
					return
				}
			}
			if p.Garbage.Load() {
				w.Header().Set("Content-Type", "text/html")
				io.WriteString(w, "<html><body>Service temporarily overloaded</body></html>")
				return
			}
			rec := httptest.NewRecorder()
			router.ServeHTTP(rec, r)
			var t struct {
				Access  string `json:"access_token"`
				Refresh string `json:"refresh_token"`
				ID      string `json:"id_token"`
			}
			if json.Unmarshal(rec.Body.Bytes(), &t) == nil {
				p.issued.Lock()
				for _, v := range []string{t.Access, t.Refresh} {
					if v != "" {
						p.issued.tokens = append(p.issued.tokens, v)
					}
				}
				p.issued.Unlock()
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
			return
		}
		router.ServeHTTP(w, r)
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	var d struct {
		Auth       string `json:"authorization_endpoint"`
		Token      string `json:"token_endpoint"`
		Device     string `json:"device_authorization_endpoint"`
		Revoke     string `json:"revocation_endpoint"`
		Introspect string `json:"introspection_endpoint"`
	}
	resp, err := http.Get(issuer + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	p.AuthURL, p.TokenURL, p.DeviceURL, p.RevokeURL, p.IntrospectURL = d.Auth, d.Token, d.Device, d.Revoke, d.Introspect
	return p
}

// Scopes are the scopes a client asks of this provider: the mail scope,
// the account's email in the ID token, and a refresh token.
var Scopes = []string{"custom_scope:mail", "openid", "email", "offline_access"}

// Issued returns every access and refresh token the token endpoint
// handed out.
func (p *Provider) Issued() []string {
	p.issued.Lock()
	defer p.issued.Unlock()
	return append([]string(nil), p.issued.tokens...)
}

// SetRedirect sets the client's redirect URI (when the service's address
// is known only after the provider started).
func (p *Provider) SetRedirect(u string) { p.store.redirect.Store(u) }

// SetAccessTTL sets the lifetime of the access tokens issued from now on.
func (p *Provider) SetAccessTTL(d time.Duration) { p.store.ttl.Store(int64(d)) }

// RevokeAll ends every token of user id (as a password change or a
// withdrawn consent does): its refresh tokens are refused from now on.
func (p *Provider) RevokeAll(userID string) {
	p.store.TerminateSession(context.Background(), userID, p.ClientID)
	if u := p.store.users.GetUserByID(userID); u != nil && u.Username != userID {
		p.store.TerminateSession(context.Background(), u.Username, p.ClientID) // the device flow's subject
	}
}

// Active reports whether the provider holds a refresh token that works
// (used by tests to see a revocation happen).
func (p *Provider) Active(refresh string) bool {
	_, err := p.store.TokenRequestByRefreshToken(context.Background(), refresh)
	return err == nil
}

// userStore holds the test's users.
type userStore struct{ users map[string]*storage.User }

// GetUserByID finds a user by id, or by username: the example's device
// flow names the user by the username signed in with.
func (u userStore) GetUserByID(id string) *storage.User {
	if x, ok := u.users[id]; ok {
		return x
	}
	return u.GetUserByUsername(id)
}
func (u userStore) GetUserByUsername(name string) *storage.User {
	for _, x := range u.users {
		if x.Username == name {
			return x
		}
	}
	return nil
}
func (u userStore) ExampleClientID() string { return "" }

// tokenStore is the example storage with access tokens that expire after
// ttl, and ID tokens that carry the email claim.
type tokenStore struct {
	*storage.Storage
	users    userStore
	redirect atomic.Value
	clientID string
	ttl      atomic.Int64
	mu       sync.Mutex
	expiry   map[string]time.Time
}

func (s *tokenStore) short(id string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp := time.Now().Add(time.Duration(s.ttl.Load()))
	s.expiry[id] = exp
	return exp
}

func (s *tokenStore) expired(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.expiry[id]
	return ok && time.Now().After(exp)
}

func (s *tokenStore) CreateAccessToken(ctx context.Context, r op.TokenRequest) (string, time.Time, error) {
	id, _, err := s.Storage.CreateAccessToken(ctx, r)
	if err != nil {
		return "", time.Time{}, err
	}
	return id, s.short(id), nil
}

func (s *tokenStore) CreateAccessAndRefreshTokens(ctx context.Context, r op.TokenRequest, cur string) (string, string, time.Time, error) {
	switch r.(type) {
	case *storage.AuthRequest, *storage.RefreshTokenRequest:
	default:
		// The example storage loses the client of a device flow's tokens
		// (so they could be neither refreshed nor revoked): name it.
		r = storage.RefreshTokenRequestFromBusiness(&storage.RefreshToken{ApplicationID: s.clientID, UserID: r.GetSubject(),
			Audience: r.GetAudience(), Scopes: r.GetScopes(), AuthTime: time.Now()})
	}
	id, rt, _, err := s.Storage.CreateAccessAndRefreshTokens(ctx, r, cur)
	if err != nil {
		return "", "", time.Time{}, err
	}
	return id, rt, s.short(id), nil
}

func (s *tokenStore) SetUserinfoFromToken(ctx context.Context, ui *oidc.UserInfo, tokenID, subject, origin string) error {
	if s.expired(tokenID) {
		return errors.New("token is expired")
	}
	return s.Storage.SetUserinfoFromToken(ctx, ui, tokenID, subject, origin)
}

func (s *tokenStore) SetIntrospectionFromToken(ctx context.Context, in *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	if s.expired(tokenID) {
		return errors.New("token is expired")
	}
	if err := s.Storage.SetIntrospectionFromToken(ctx, in, tokenID, subject, clientID); err != nil {
		return err
	}
	s.mu.Lock()
	in.Expiration = oidc.FromTime(s.expiry[tokenID])
	s.mu.Unlock()
	return nil
}

func (s *tokenStore) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return claimsClient{c, s}, nil
}

// claimsClient puts the user's claims (the email) in the ID token, as
// Google and Microsoft do.
type claimsClient struct {
	op.Client
	s *tokenStore
}

// RedirectURIs: the one set last (SetRedirect), or the one Start was given.
func (c claimsClient) RedirectURIs() []string {
	if u, _ := c.s.redirect.Load().(string); u != "" {
		return []string{u}
	}
	return c.Client.RedirectURIs()
}

func (claimsClient) IDTokenUserinfoClaimsAssertion() bool { return true }

// GrantTypes: the client may also use the device flow.
func (c claimsClient) GrantTypes() []oidc.GrantType {
	return append(c.Client.GrantTypes(), oidc.GrantTypeDeviceCode)
}

// SignIn follows authURL as a browser would, signing in as email with
// password, and returns the URL the provider sends the browser back to
// (the service's callback, with code and state), without opening it.
func (p *Provider) SignIn(authURL, email, password string) (string, error) {
	jar, _ := cookiejar.New(nil)
	var back string
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if !strings.HasPrefix(r.URL.String(), p.URL) {
			back = r.URL.String()
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := c.Get(authURL)
	if err != nil {
		return "", err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if back != "" {
		return back, nil // the provider answered at once (an error)
	}
	m := regexp.MustCompile(`name="id" value="([^"]*)"`).FindSubmatch(body)
	if m == nil {
		return "", fmt.Errorf("the provider's sign-in page has no request id: %s", body)
	}
	resp, err = c.PostForm(p.URL+"/login/username", url.Values{"id": {string(m[1])}, "username": {email}, "password": {password}})
	if err != nil {
		return "", err
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if back == "" {
		return "", fmt.Errorf("the provider did not send the browser back (%s): %s", resp.Status, body)
	}
	return back, nil
}

// ApproveDevice signs in on the device page with the user code and allows
// the device, as the person at a browser would.
func (p *Provider) ApproveDevice(userCode, email, password string) error {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := c.PostForm(p.URL+"/device/login", url.Values{"user_code": {userCode}, "username": {email}, "password": {password}})
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp, err = c.PostForm(p.URL+"/device/confirm", url.Values{"action": {"allowed"}})
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "allowed") {
		return fmt.Errorf("the device was not allowed: %s", body)
	}
	return nil
}
