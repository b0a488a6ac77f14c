package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/oauth"
	"outreach/repo"
	"outreach/repo/access"
	"outreach/server"
)

// member invites a team member with scopes and sets their password through
// the invite page, as the person would; it returns the password.
func member(t *testing.T, env *testenv.Env, email string, scopes ...string) string {
	t.Helper()
	return memberVia(t, env, env.Base, nil, email, scopes...)
}

// memberVia is member with the invitation's pages fetched from base over
// rt (nil: the default transport), for a public URL behind a proxy.
func memberVia(t *testing.T, env *testenv.Env, base string, rt http.RoundTripper, email string, scopes ...string) string {
	t.Helper()
	ctx := audit.WithActor(context.Background(), repo.SystemActor("test-setup"))
	_, token, err := access.Of(env.Store).InviteMember(ctx, email, "", scopes)
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	b.hc.Transport = rt
	page := b.get(base + "/oauth/invite?token=" + url.QueryEscape(token))
	const password = "correct horse battery staple"
	res := b.post(formAction(t, page), url.Values{"token": {token}, "csrf": {hidden(t, page, "csrf")}, "password": {password}, "confirm": {password}})
	if res.code != 200 || !strings.Contains(res.body, "Password set") {
		t.Fatalf("setting the password: %d %s", res.code, res.body)
	}
	return password
}

// browser is a plain HTTP client with cookies that stops at a redirect to
// the client's redirect URI, as a browser hands it to the client.
type browser struct {
	t        *testing.T
	hc       *http.Client
	redirect string // a redirect to a URL with this prefix is not followed
	landed   *url.URL
}

type page struct {
	code int
	body string
	hdr  http.Header
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	b := &browser{t: t}
	b.hc = &http.Client{Jar: jar, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if b.redirect != "" && strings.HasPrefix(r.URL.String(), b.redirect) {
			b.landed = r.URL
			return http.ErrUseLastResponse
		}
		return nil
	}}
	return b
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{resp.StatusCode, string(body), resp.Header}
}

func (b *browser) get(u string) string {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	p := b.do(req)
	if p.code != 200 {
		b.t.Fatalf("GET %s: %d %s", u, p.code, p.body)
	}
	return p.body
}

func (b *browser) post(u string, form url.Values) page {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

func mustRequest(t *testing.T, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func hidden(t *testing.T, body, name string) string {
	t.Helper()
	m := regexp.MustCompile(`name="` + name + `" value="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no hidden %s in %s", name, body)
	}
	return html.UnescapeString(m[1])
}

func formAction(t *testing.T, body string) string {
	t.Helper()
	m := regexp.MustCompile(`<form method="post" action="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no form in %s", body)
	}
	return html.UnescapeString(m[1])
}

// authorize signs in as email and approves (or denies) on the consent page
// of authURL, and returns where the browser was sent back to the client.
func (b *browser) authorize(authURL, redirect, email, password, decision string) (*url.URL, string) {
	b.t.Helper()
	b.redirect, b.landed = redirect, nil
	login := b.get(authURL)
	consent := b.post(formAction(b.t, login), url.Values{"id": {hidden(b.t, login, "id")}, "csrf": {hidden(b.t, login, "csrf")}, "email": {email}, "password": {password}})
	if consent.code != 200 {
		b.t.Fatalf("sign-in: %d %s", consent.code, consent.body)
	}
	b.post(formAction(b.t, consent.body), url.Values{"id": {hidden(b.t, consent.body, "id")}, "csrf": {hidden(b.t, consent.body, "csrf")}, "decision": {decision}})
	if b.landed == nil {
		b.t.Fatalf("the consent did not send the browser back to %s", redirect)
	}
	return b.landed, consent.body
}

// TestOAuthGoSDKFlow: the go-sdk's client-side OAuth handler, with Dynamic
// Client Registration, discovers the metadata from the 401, registers, and a
// member signs in and approves; tools/call then works, the change log shows
// the member and the client's agent, and whoami says OAuth. A refresh
// rotates the tokens; reusing the old refresh token revokes the family.
func TestOAuthGoSDKFlow(t *testing.T) {
	env := testenv.NewWith(t, testenv.Options{OAuth: true})
	password := member(t, env, "ada@example.com", "read", "write")
	b := newBrowser(t)
	const redirect = "http://127.0.0.1:9/callback"
	var consentPage string
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "Go Assistant", RedirectURIs: []string{redirect}, GrantTypes: []string{"authorization_code", "refresh_token"}}},
		RedirectURL: redirect,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			var back *url.URL
			back, consentPage = b.authorize(args.URL, redirect, "ada@example.com", password, "approve")
			q := back.Query()
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "go-assistant", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: env.URL, OAuthHandler: h}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, want := range []string{"Go Assistant", "ada@example.com", redirect, "read", "write"} {
		if !strings.Contains(consentPage, html.EscapeString(want)) {
			t.Errorf("the consent page does not name %q:\n%s", want, consentPage)
		}
	}
	c := testenv.WrapClient(t, s)
	var who struct {
		UserID    string   `json:"user_id"`
		AgentID   string   `json:"agent_id"`
		AgentType string   `json:"agent_type"`
		KeyName   string   `json:"key_name"`
		Scopes    []string `json:"scopes"`
		SignedIn  string   `json:"signed_in_with"`
	}
	c.Must("whoami", nil, &who)
	ada, err := access.Of(env.Store).UserByEmail(context.Background(), "ada@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if who.UserID != ada.ID || who.AgentType != access.AgentTypeOAuth || who.KeyName != "Go Assistant" || strings.Join(who.Scopes, ",") != "read,write" || who.SignedIn != "oauth" {
		t.Errorf("whoami: %+v, want ada (%s) through Go Assistant with read,write, signed in with oauth", who, ada.ID)
	}
	id := mk(t, c, "create_outlet", M{"name": "Signed in with OAuth"})
	var log struct {
		Changes []struct {
			UserID  string `json:"user_id"`
			AgentID string `json:"agent_id"`
		} `json:"changes"`
	}
	env.Admin().Must("get_change_log", M{"record_id": id}, &log)
	if len(log.Changes) != 1 || log.Changes[0].UserID != ada.ID || log.Changes[0].AgentID != who.AgentID {
		t.Errorf("change log: %+v, want ada %s and the agent %s", log.Changes, ada.ID, who.AgentID)
	}

	// Refresh rotation and reuse.
	grants, err := access.Of(env.Store).ListOAuthGrants(context.Background(), ada.ID)
	if err != nil || len(grants) != 1 {
		t.Fatalf("grants of ada: %v %v", grants, err)
	}
	ts, err := h.TokenSource(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ts.Token()
	if err != nil {
		t.Fatal(err)
	}
	clientID := grants[0].ClientID
	first := refresh(t, env, clientID, tok.RefreshToken)
	if first.Error != "" || first.AccessToken == "" || first.RefreshToken == tok.RefreshToken {
		t.Fatalf("refresh: %+v", first)
	}
	if code, _ := postInitialize(t, env.URL, tok.AccessToken); code != 401 {
		t.Errorf("the access token a refresh replaced: %d, want 401", code)
	}
	if code, _ := postInitialize(t, env.URL, first.AccessToken); code != 200 {
		t.Errorf("the refreshed access token: %d, want 200", code)
	}
	again := refresh(t, env, clientID, tok.RefreshToken)
	if again.Error != "invalid_grant" {
		t.Errorf("reusing a refresh token: %+v, want invalid_grant", again)
	}
	if code, _ := postInitialize(t, env.URL, first.AccessToken); code != 401 {
		t.Errorf("after a refresh token's reuse, the family's access token: %d, want 401", code)
	}
	if r := refresh(t, env, clientID, first.RefreshToken); r.Error != "invalid_grant" {
		t.Errorf("after a refresh token's reuse, the family's refresh token: %+v, want invalid_grant", r)
	}
}

type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
	Error        string `json:"error"`
	Description  string `json:"error_description"`
}

func tokenRequest(t *testing.T, base string, form url.Values) tokenResponse {
	t.Helper()
	resp, err := http.PostForm(base+"/oauth/token", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out tokenResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("token response: %v", err)
	}
	return out
}

func refresh(t *testing.T, env *testenv.Env, clientID, rt string) tokenResponse {
	return tokenRequest(t, env.Base, url.Values{"grant_type": {"refresh_token"}, "client_id": {clientID}, "refresh_token": {rt}})
}

// register registers a public client by DCR and returns its id.
func register(t *testing.T, base string, name string, redirects ...string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"client_name": name, "redirect_uris": redirects})
	resp, err := http.Post(base+"/oauth/register", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 201 || out.ClientID == "" {
		t.Fatalf("register: %d %v %+v", resp.StatusCode, err, out)
	}
	return out.ClientID
}

func pkce() (verifier, challenge string) {
	verifier = rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

func authURL(base, clientID, redirect string, extra url.Values) string {
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect}, "state": {"st"}, "scope": {"read write"},
		"resource": {base + "/mcp"}}
	for k, v := range extra {
		if len(v) == 0 {
			q.Del(k)
		} else {
			q[k] = v
		}
	}
	return base + "/oauth/authorize?" + q.Encode()
}

// TestOAuthRefusals: each refusal the authorization server owes, through its
// real endpoints.
func TestOAuthRefusals(t *testing.T) {
	env := testenv.NewWith(t, testenv.Options{OAuth: true})
	password := member(t, env, "bo@example.com", "read", "write")
	const redirect = "http://127.0.0.1:9/cb"
	clientID := register(t, env.Base, "Refusal Client", redirect)
	verifier, challenge := pkce()
	s256 := url.Values{"code_challenge": {challenge}, "code_challenge_method": {"S256"}}

	t.Run("metadata", func(t *testing.T) {
		resp, err := http.Get(env.Base + "/.well-known/oauth-authorization-server")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var md map[string]any
		json.NewDecoder(resp.Body).Decode(&md)
		if md["issuer"] != env.Base || md["authorization_response_iss_parameter_supported"] != true || md["client_id_metadata_document_supported"] != true ||
			fmt.Sprint(md["code_challenge_methods_supported"]) != "[S256]" || md["registration_endpoint"] != env.Base+"/oauth/register" {
			t.Errorf("authorization server metadata: %v", md)
		}
	})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	authorizeStatus := func(t *testing.T, u string) (int, string, string) {
		t.Helper()
		resp, err := noRedirect.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location"), string(body)
	}
	t.Run("pkce missing", func(t *testing.T) {
		code, loc, _ := authorizeStatus(t, authURL(env.Base, clientID, redirect, nil))
		if code != 302 || !strings.Contains(loc, "error=invalid_request") || !strings.Contains(loc, "code_challenge") || !strings.Contains(loc, "iss=") {
			t.Errorf("no PKCE: %d %s", code, loc)
		}
	})
	t.Run("pkce plain", func(t *testing.T) {
		code, loc, _ := authorizeStatus(t, authURL(env.Base, clientID, redirect, url.Values{"code_challenge": {verifier}, "code_challenge_method": {"plain"}}))
		if code != 302 || !strings.Contains(loc, "error=invalid_request") {
			t.Errorf("plain PKCE: %d %s", code, loc)
		}
	})
	t.Run("redirect not registered", func(t *testing.T) {
		code, loc, body := authorizeStatus(t, authURL(env.Base, clientID, "http://127.0.0.1:9/cb/other", s256))
		if code != 400 || loc != "" || !strings.Contains(body, "redirect_uri") {
			t.Errorf("unregistered redirect URI: %d %q %s", code, loc, body)
		}
		code, loc, _ = authorizeStatus(t, authURL(env.Base, clientID, "http://127.0.0.1:10/cb", s256))
		if code != 400 || loc != "" {
			t.Errorf("a loopback redirect URI on another port: %d %q (matching is exact)", code, loc)
		}
	})
	t.Run("another resource", func(t *testing.T) {
		code, loc, _ := authorizeStatus(t, authURL(env.Base, clientID, redirect, url.Values{"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "resource": {"https://elsewhere.example/mcp"}}))
		if code != 302 || !strings.Contains(loc, "error=invalid_target") {
			t.Errorf("another resource: %d %s", code, loc)
		}
	})

	b := newBrowser(t)
	back, _ := b.authorize(authURL(env.Base, clientID, redirect, s256), redirect, "bo@example.com", password, "approve")
	q := back.Query()
	if q.Get("iss") != env.Base || q.Get("state") != "st" || q.Get("code") == "" {
		t.Fatalf("authorization response: %s", back)
	}
	code := q.Get("code")
	exchange := func(code, verifier string) tokenResponse {
		return tokenRequest(t, env.Base, url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID}, "code": {code}, "redirect_uri": {redirect},
			"code_verifier": {verifier}, "resource": {env.URL}})
	}
	t.Run("pkce wrong", func(t *testing.T) {
		if r := exchange(code, verifier+"x"); r.Error != "invalid_grant" || r.AccessToken != "" {
			t.Errorf("wrong verifier: %+v", r)
		}
	})
	tok := exchange(code, verifier)
	t.Run("code", func(t *testing.T) {
		if tok.AccessToken == "" || tok.RefreshToken == "" {
			t.Fatalf("exchange: %+v", tok)
		}
		if r := exchange(code, verifier); r.Error != "invalid_grant" {
			t.Errorf("the code replayed: %+v", r)
		}
	})
	t.Run("revocation", func(t *testing.T) {
		if c, _ := postInitialize(t, env.URL, tok.AccessToken); c != 200 {
			t.Fatalf("the token before revocation: %d", c)
		}
		resp, err := http.PostForm(env.Base+"/oauth/revoke", url.Values{"token": {tok.RefreshToken}, "client_id": {clientID}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("revoke: %d", resp.StatusCode)
		}
		if c, _ := postInitialize(t, env.URL, tok.AccessToken); c != 401 {
			t.Errorf("the access token after its refresh token's revocation: %d, want 401", c)
		}
	})
	t.Run("deny", func(t *testing.T) {
		back, _ := newBrowser(t).authorize(authURL(env.Base, clientID, redirect, s256), redirect, "bo@example.com", password, "deny")
		if q := back.Query(); q.Get("error") != "access_denied" || q.Get("iss") != env.Base || q.Get("state") != "st" {
			t.Errorf("denied: %s", back)
		}
	})
	t.Run("consent without csrf", func(t *testing.T) {
		b := newBrowser(t)
		b.redirect = redirect
		login := b.get(authURL(env.Base, clientID, redirect, s256))
		consent := b.post(formAction(t, login), url.Values{"id": {hidden(t, login, "id")}, "csrf": {hidden(t, login, "csrf")}, "email": {"bo@example.com"}, "password": {password}})
		id := hidden(t, consent.body, "id")
		for name, form := range map[string]url.Values{
			"no token":    {"id": {id}, "decision": {"approve"}},
			"wrong token": {"id": {id}, "decision": {"approve"}, "csrf": {"forged"}},
		} {
			if r := b.post(formAction(t, consent.body), form); r.code != 403 || b.landed != nil {
				t.Errorf("consent with %s: %d, landed %v", name, r.code, b.landed)
			}
		}
		// Nor from another browser that holds the right form but not the sign-in's cookie.
		other := newBrowser(t)
		other.redirect = redirect
		if r := other.post(formAction(t, consent.body), url.Values{"id": {id}, "decision": {"approve"}, "csrf": {hidden(t, consent.body, "csrf")}}); r.code != 403 || other.landed != nil {
			t.Errorf("consent from another browser: %d", r.code)
		}
		if r := b.post(formAction(t, login), url.Values{"id": {id}, "email": {"bo@example.com"}, "password": {password}}); r.code != 403 {
			t.Errorf("sign-in without its CSRF token: %d", r.code)
		}
	})
	t.Run("admin without the role", func(t *testing.T) {
		back, consent := newBrowser(t).authorize(authURL(env.Base, clientID, redirect, url.Values{"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "scope": {"read write admin"}}),
			redirect, "bo@example.com", password, "approve")
		if !strings.Contains(consent, "not given") {
			t.Errorf("the consent page does not say admin is not given:\n%s", consent)
		}
		tok := exchange(back.Query().Get("code"), verifier)
		if tok.AccessToken == "" || strings.Contains(tok.Scope, "admin") {
			t.Fatalf("a member without admin asking for it: %+v", tok)
		}
		g, err := access.Of(env.Store).OAuthGrantByToken(context.Background(), tok.AccessToken)
		if err != nil || strings.Join(g.Scopes, ",") != "read,write" {
			t.Errorf("grant scopes: %v %v, want read,write", g, err)
		}
	})
	t.Run("lockout", func(t *testing.T) {
		b := newBrowser(t)
		login := b.get(authURL(env.Base, clientID, redirect, s256))
		try := func(pw string) int {
			return b.post(formAction(t, login), url.Values{"id": {hidden(t, login, "id")}, "csrf": {hidden(t, login, "csrf")}, "email": {"bo@example.com"}, "password": {pw}}).code
		}
		for i := 0; i < 5; i++ {
			if c := try("wrong password " + fmt.Sprint(i)); c != 401 {
				t.Fatalf("failed sign-in %d: %d", i, c)
			}
		}
		if c := try(password); c != 429 {
			t.Errorf("the right password after 5 failures: %d, want 429 (locked)", c)
		}
	})
	// Last: it spends this address's allowance of unauthenticated writes.
	t.Run("registration flood", func(t *testing.T) {
		// Registrations and authorization requests write without credentials:
		// an address gets a burst of them, then one a second.
		body := `{"client_name": "flood", "redirect_uris": ["http://127.0.0.1:9/f"]}`
		for i := 0; i <= oauth.ClientWriteBurst; i++ {
			resp, err := http.Post(env.Base+"/oauth/register", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				if resp.Header.Get("Retry-After") == "" {
					t.Error("429 without Retry-After")
				}
				return
			}
		}
		t.Errorf("%d registrations from one address in a burst were all accepted", oauth.ClientWriteBurst+1)
	})
}

// TestOAuthServeCLI: the binary with OUTREACH_OAUTH=true serves the
// metadata; `outreach users invite` prints a link where the member sets a
// password; they sign in and approve; `users clients` lists the grant
// without any token, and `users disconnect` cuts it off. No secret of the
// flow (invite token, password, code, consent nonce, access and refresh
// tokens, the rotated ones too) is in any collection, any file of the data
// directory, or the log.
func TestOAuthServeCLI(t *testing.T) {
	data := dataDir(t)
	s := startServer(t, data, "OUTREACH_OAUTH=true")
	if resp, err := http.Get(s.Base + "/.well-known/oauth-protected-resource/mcp"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("metadata of the binary with OUTREACH_OAUTH=true: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	out := mustCLI(t, "users", "invite", "--email", "cy@example.com", "--scopes", "read,write", "--data", data, "--public-url", s.Base)
	link := regexp.MustCompile(`http://\S+/oauth/invite\?token=\S+`).FindString(out)
	if link == "" {
		t.Fatalf("users invite printed no link:\n%s", out)
	}
	b := newBrowser(t)
	page := b.get(link)
	const password = "a long enough password"
	if r := b.post(formAction(t, page), url.Values{"token": {hidden(t, page, "token")}, "csrf": {hidden(t, page, "csrf")}, "password": {password}, "confirm": {password}}); r.code != 200 {
		t.Fatalf("set password: %d %s", r.code, r.body)
	}
	if r := b.do(mustRequest(t, link)); r.code != 404 {
		t.Errorf("the invite link a second time: %d, want 404", r.code)
	}
	const redirect = "http://127.0.0.1:9/cli"
	clientID := register(t, s.Base, "CLI Client", redirect)
	verifier, challenge := pkce()
	back, consent := newBrowser(t).authorize(authURL(s.Base, clientID, redirect, url.Values{"code_challenge": {challenge}, "code_challenge_method": {"S256"}}), redirect, "cy@example.com", password, "approve")
	tok := tokenRequest(t, s.Base, url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID}, "code": {back.Query().Get("code")},
		"redirect_uri": {redirect}, "code_verifier": {verifier}})
	rotated := tokenRequest(t, s.Base, url.Values{"grant_type": {"refresh_token"}, "client_id": {clientID}, "refresh_token": {tok.RefreshToken}})
	if rotated.AccessToken == "" {
		t.Fatalf("refresh: %+v", rotated)
	}
	secrets := map[string]string{"the invite token": link[strings.Index(link, "token=")+6:], "the password": password,
		"the code": back.Query().Get("code"), "the consent nonce": hidden(t, consent, "csrf"), "the first access token": tok.AccessToken,
		"the first refresh token": tok.RefreshToken, "the access token": rotated.AccessToken, "the refresh token": rotated.RefreshToken}
	tok = rotated
	if code, _ := postInitialize(t, s.URL, tok.AccessToken); code != 200 {
		t.Fatalf("the token from the binary: %d (%+v)", code, tok)
	}
	listed := mustCLI(t, "users", "clients", "--email", "cy@example.com", "--data", data)
	for _, secret := range []string{tok.AccessToken, tok.RefreshToken} {
		if strings.Contains(listed, secret) {
			t.Fatalf("users clients shows a token:\n%s", listed)
		}
	}
	var g struct {
		ID         string `json:"id"`
		ClientName string `json:"client_name"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(listed)), &g); err != nil || g.ClientName != "CLI Client" {
		t.Fatalf("users clients: %v\n%s", err, listed)
	}
	mustCLI(t, "users", "disconnect", "--data", data, g.ID)
	if code, _ := postInitialize(t, s.URL, tok.AccessToken); code != 401 {
		t.Errorf("the token after users disconnect: %d, want 401", code)
	}

	look := func(where string, text []byte) {
		t.Helper()
		for what, v := range secrets {
			if v == "" {
				t.Fatalf("%s is empty", what)
			}
			if bytes.Contains(text, []byte(v)) {
				t.Errorf("%s is in %s", what, where)
			}
		}
	}
	scanFiles(t, data, look)
	if code := s.term(30 * time.Second); code != 0 {
		t.Fatalf("server exit code %d\nstderr:\n%s", code, s.stderr)
	}
	look("the server's log", []byte(s.stderr.String()+s.stdout.String()))
	scanFiles(t, data, look)
	if docs, _, _ := scanCollections(t, data, look); docs < 10 {
		t.Fatalf("only %d documents: the scan read the wrong database", docs)
	}
}

// TestOAuthClientMetadataDocuments: a client named by the URL of its
// metadata document (the go-sdk's handler, as a hosted assistant does)
// signs in without registering; documents too big, too slow, not naming
// themselves, or on a loopback address while that is not allowed, are
// refused and no sign-in page is shown.
func TestOAuthClientMetadataDocuments(t *testing.T) {
	const redirect = "http://127.0.0.1:9/cimd"
	var docURL string
	docs := http.NewServeMux()
	docs.HandleFunc("/client.json", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"client_id": docURL + "/client.json", "client_name": "Metadata Assistant",
			"redirect_uris": []string{redirect}, "token_endpoint_auth_method": "none"})
	})
	docs.HandleFunc("/big.json", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"client_id": "` + docURL + `/big.json", "client_name": "` + strings.Repeat("x", 70<<10) + `", "redirect_uris": ["` + redirect + `"]}`))
	})
	docs.HandleFunc("/slow.json", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // answers only when the fetcher gives up
	})
	docs.HandleFunc("/other.json", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"client_id": "https://elsewhere.example/client.json", "redirect_uris": []string{redirect}})
	})
	ts := httptest.NewTLSServer(docs)
	defer ts.Close()
	docURL = ts.URL
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())

	env := testenv.NewWith(t, testenv.Options{OAuth: true, Server: server.Config{ClientMetadata: oauth.FetchOptions{AllowPrivate: true, RootCAs: pool, Timeout: 500 * time.Millisecond}}})
	password := member(t, env, "di@example.com", "read")
	b := newBrowser(t)
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		ClientIDMetadataDocumentConfig: &auth.ClientIDMetadataDocumentConfig{URL: docURL + "/client.json"},
		RedirectURL:                    redirect,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			back, _ := b.authorize(args.URL, redirect, "di@example.com", password, "approve")
			q := back.Query()
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "cimd", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: env.URL, OAuthHandler: h}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var who struct {
		KeyName string `json:"key_name"`
	}
	testenv.WrapClient(t, s).Must("whoami", nil, &who)
	if who.KeyName != "Metadata Assistant" {
		t.Errorf("the client's name from its metadata document: %q", who.KeyName)
	}

	_, challenge := pkce()
	pk := url.Values{"code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	refused := func(t *testing.T, env *testenv.Env, clientID, why string) {
		t.Helper()
		resp, err := http.Get(authURL(env.Base, clientID, redirect, pk))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || strings.Contains(string(body), "Sign in") || !strings.Contains(string(body), why) {
			t.Errorf("client %s: %d %s, want 400 saying %q and no sign-in page", clientID, resp.StatusCode, body, why)
		}
	}
	for name, why := range map[string]string{"big": "larger than 65536 bytes", "slow": "Timeout exceeded", "other": "not its own URL"} {
		t.Run(name, func(t *testing.T) { refused(t, env, docURL+"/"+name+".json", why) })
	}
	t.Run("loopback", func(t *testing.T) {
		strict := testenv.NewWith(t, testenv.Options{OAuth: true, Server: server.Config{ClientMetadata: oauth.FetchOptions{RootCAs: pool}}})
		refused(t, strict, docURL+"/client.json", "loopback, private or link-local address")
	})
}
