package integration

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/oauth2-proxy/mockoidc"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/oauth"
	"outreach/repo"
	"outreach/repo/access"
	"outreach/server"
)

// TestOAuthUpstreamOIDC: members sign in through an upstream OpenID Connect
// provider (a test provider, mockoidc, run here): a member's verified email
// signs them in, and the consent page follows; an unverified email, an
// email that is no member's, a domain not let in, and the provider's answer
// arriving in another browser are refused.
func TestOAuthUpstreamOIDC(t *testing.T) {
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	env := testenv.NewWith(t, testenv.Options{OAuth: true, Server: server.Config{Upstream: &oauth.Upstream{Issuer: m.Issuer(),
		ClientID: m.ClientID, ClientSecret: m.ClientSecret, Domains: []string{"example.com"}, Name: "Mock Workspace"}}})
	ctx := audit.WithActor(context.Background(), repo.SystemActor("test-setup"))
	jane, err := access.Of(env.Store).CreateUser(ctx, "Jane", "jane@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := access.Of(env.Store).CreateUser(ctx, "Olga", "olga@other.org", ""); err != nil {
		t.Fatal(err)
	}
	const redirect = "http://127.0.0.1:9/upstream"
	clientID := register(t, env.Base, "Upstream Client", redirect)
	verifier, challenge := pkce()
	pk := url.Values{"code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	upstreamLink := regexp.MustCompile(`<a href="([^"]+)">Sign in with Mock Workspace</a>`)
	start := func(b *browser, user *mockoidc.MockUser) page {
		t.Helper()
		login := b.get(authURL(env.Base, clientID, redirect, pk))
		l := upstreamLink.FindStringSubmatch(login)
		if l == nil {
			t.Fatalf("the sign-in page has no link to the provider:\n%s", login)
		}
		m.QueueUser(user)
		return b.do(mustRequest(t, html.UnescapeString(l[1])))
	}

	b := newBrowser(t)
	b.redirect = redirect
	consent := start(b, &mockoidc.MockUser{Subject: "jane", Email: "Jane@Example.com", EmailVerified: true})
	if consent.code != 200 || !strings.Contains(consent.body, "jane@example.com") || !strings.Contains(consent.body, "Upstream Client") {
		t.Fatalf("after the provider's sign-in: %d\n%s", consent.code, consent.body)
	}
	if p := b.post(formAction(t, consent.body), url.Values{"id": {hidden(t, consent.body, "id")}, "csrf": {hidden(t, consent.body, "csrf")}, "decision": {"approve"}}); b.landed == nil {
		t.Fatalf("the approval did not return to the client: %d %s", p.code, p.body)
	}
	tok := tokenRequest(t, env.Base, url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID}, "code": {b.landed.Query().Get("code")},
		"redirect_uri": {redirect}, "code_verifier": {verifier}})
	var who struct {
		UserID string `json:"user_id"`
	}
	env.Client(tok.AccessToken, "").Must("whoami", nil, &who)
	if who.UserID != jane.ID {
		t.Errorf("signed in through the provider as %s, want jane %s", who.UserID, jane.ID)
	}

	for name, c := range map[string]struct {
		user *mockoidc.MockUser
		why  string
	}{
		"unverified email":  {&mockoidc.MockUser{Subject: "u", Email: "jane@example.com", EmailVerified: false}, "no verified email"},
		"not a member":      {&mockoidc.MockUser{Subject: "n", Email: "nobody@example.com", EmailVerified: true}, "not a member of this team"},
		"domain not let in": {&mockoidc.MockUser{Subject: "o", Email: "olga@other.org", EmailVerified: true}, "whose domain this service does not let in"},
	} {
		t.Run(name, func(t *testing.T) {
			b := newBrowser(t)
			b.redirect = redirect
			if p := start(b, c.user); p.code != http.StatusForbidden || strings.Contains(p.body, "Approve") || !strings.Contains(html.UnescapeString(p.body), c.why) {
				t.Errorf("%s: %d, want 403 saying %q\n%s", name, p.code, c.why, p.body)
			}
		})
	}
	t.Run("answer in another browser", func(t *testing.T) {
		b := newBrowser(t)
		// Stop at the provider's redirect back, and hand it to another browser.
		b.redirect = env.Base + oauth.PathUpstreamCallback
		start(b, &mockoidc.MockUser{Subject: "jane", Email: "jane@example.com", EmailVerified: true})
		if b.landed == nil {
			t.Fatal("the provider did not redirect back")
		}
		other := newBrowser(t)
		if p := other.do(mustRequest(t, b.landed.String())); p.code != http.StatusForbidden {
			t.Errorf("the provider's answer in another browser: %d", p.code)
		}
	})
}
