package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"outreach/integration/testenv"
	"outreach/repo/access"
)

// chromium finds Debian's Chromium; without it the test skips, and fails
// under CI=true (the test command installs it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (scripts/test.sh installs Debian's chromium)")
	}
	t.Skip("chromium is not installed")
	return ""
}

// TestOAuthBrowser: a real headless Chromium, driven over the DevTools
// protocol, is the member's browser. The go-sdk's client-side OAuth handler
// discovers the metadata from the 401 and registers (DCR); Chromium opens
// the authorization URL, signs in on the sign-in page, approves on the
// consent page and is redirected to the client's own loopback callback,
// which hands the code to the handler. Then tools/call works, and the change
// log shows the member and the client's agent.
func TestOAuthBrowser(t *testing.T) {
	exe := chromium(t)
	env := testenv.NewWith(t, testenv.Options{OAuth: true})
	browserSignIn(t, exe, env, "fay@example.com", env.URL, http.DefaultClient)
}

// browserSignIn is TestOAuthBrowser's sign-in, by the member email, of a
// client of endpoint (the service's MCP URL, or a proxy's in front of it)
// that makes its own requests with hc; Chromium trusts the certificates
// of the keys in spki too (base64 SHA-256 of a certificate's public key).
func browserSignIn(t *testing.T, exe string, env *testenv.Env, email, endpoint string, hc *http.Client, spki ...string) {
	t.Helper()
	password := memberVia(t, env, strings.TrimSuffix(endpoint, "/mcp"), hc.Transport, email, "read", "write")

	// The client's callback: a loopback listener, as a desktop client has.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	redirect := "http://" + ln.Addr().String() + "/callback"
	results := make(chan url.Values, 1)
	cb := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case results <- r.URL.Query():
		default:
		}
		w.Write([]byte("<!doctype html><title>done</title><p id=done>You may close this window.</p>"))
	})}
	go cb.Serve(ln)
	defer cb.Close()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()))
	if len(spki) > 0 {
		opts = append(opts, chromedp.Flag("ignore-certificate-errors-spki-list", strings.Join(spki, ",")))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}

	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "Browser Assistant", RedirectURIs: []string{redirect}}},
		RedirectURL: redirect,
		Client:      hc,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
			defer cancel()
			err := chromedp.Do(ctx,
				chromedp.Navigate(args.URL),
				chromedp.WaitVisible(chromedp.ID("email")),
				chromedp.SendKeys(chromedp.ID("email"), email),
				chromedp.SendKeys(chromedp.ID("password"), password),
				chromedp.Click(chromedp.CSS(`button[type=submit]`)),
				chromedp.WaitVisible(chromedp.CSS(`button[value=approve]`)),
				chromedp.Click(chromedp.CSS(`button[value=approve]`)),
				chromedp.WaitVisible(chromedp.ID("done")),
			)
			if err != nil {
				body, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("body")))
				return nil, fmt.Errorf("the browser's sign-in: %w\npage: %s", err, body)
			}
			q := <-results
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "browser-assistant", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: endpoint, OAuthHandler: h, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := testenv.WrapClient(t, s)
	var who struct {
		UserID   string `json:"user_id"`
		AgentID  string `json:"agent_id"`
		KeyName  string `json:"key_name"`
		SignedIn string `json:"signed_in_with"`
	}
	c.Must("whoami", nil, &who)
	fay, err := access.Of(env.Store).UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	if who.UserID != fay.ID || who.KeyName != "Browser Assistant" || who.SignedIn != "oauth" {
		t.Errorf("whoami after the browser's sign-in: %+v", who)
	}
	id := mk(t, c, "create_outlet", M{"name": "Approved in a browser"})
	var log struct {
		Changes []struct {
			UserID  string `json:"user_id"`
			AgentID string `json:"agent_id"`
		} `json:"changes"`
	}
	env.Admin().Must("get_change_log", M{"record_id": id}, &log)
	if len(log.Changes) != 1 || log.Changes[0].UserID != fay.ID || log.Changes[0].AgentID != who.AgentID {
		t.Errorf("change log: %+v, want fay %s and the client's agent %s", log.Changes, fay.ID, who.AgentID)
	}
}

// TestOAuthTypeScriptSDK: the TypeScript SDK's OAuth client provider
// (integration/e2e/oauth.mjs) discovers, registers, authorizes with PKCE
// and exchanges the code; the member signs in and approves in the test's
// browser; then its tools/call acts as the member through its agent.
func TestOAuthTypeScriptSDK(t *testing.T) {
	dir := requireNodeClients(t)
	env := testenv.NewWith(t, testenv.Options{OAuth: true})
	password := member(t, env, "gus@example.com", "read", "write")
	const redirect = "http://127.0.0.1:9/ts-callback"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "oauth.mjs", env.URL, redirect)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewScanner(stdout)
	out.Buffer(nil, 1<<20)
	next := func(v any) {
		t.Helper()
		if !out.Scan() {
			cmd.Wait()
			t.Fatalf("node oauth.mjs ended early: %v\nstderr:\n%s", out.Err(), stderr.String())
		}
		if err := json.Unmarshal(out.Bytes(), v); err != nil {
			t.Fatalf("node oauth.mjs printed %q: %v", out.Text(), err)
		}
	}
	var step struct {
		Authorize string `json:"authorize"`
	}
	next(&step)
	back, _ := newBrowser(t).authorize(step.Authorize, redirect, "gus@example.com", password, "approve")
	if back.Query().Get("iss") != env.Base {
		t.Errorf("iss in the authorization response: %s", back)
	}
	fmt.Fprintf(stdin, "{\"code\": %q}\n", back.Query().Get("code"))
	var got struct {
		Whoami struct {
			UserID   string `json:"user_id"`
			AgentID  string `json:"agent_id"`
			KeyName  string `json:"key_name"`
			SignedIn string `json:"signed_in_with"`
		} `json:"whoami"`
		Outlet struct {
			ID string `json:"id"`
		} `json:"outlet"`
		ClientID string `json:"client_id"`
		Refresh  bool   `json:"refresh"`
	}
	next(&got)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node oauth.mjs: %v\nstderr:\n%s", err, stderr.String())
	}
	gus, err := access.Of(env.Store).UserByEmail(context.Background(), "gus@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if got.Whoami.UserID != gus.ID || got.Whoami.KeyName != "TypeScript Assistant" || got.Whoami.SignedIn != "oauth" || !got.Refresh {
		t.Errorf("the TypeScript client: %+v", got)
	}
	var log struct {
		Changes []struct {
			UserID  string `json:"user_id"`
			AgentID string `json:"agent_id"`
		} `json:"changes"`
	}
	env.Admin().Must("get_change_log", M{"record_id": got.Outlet.ID}, &log)
	if len(log.Changes) != 1 || log.Changes[0].UserID != gus.ID || log.Changes[0].AgentID != got.Whoami.AgentID {
		t.Errorf("change log of the TypeScript client's write: %+v", log.Changes)
	}
}
