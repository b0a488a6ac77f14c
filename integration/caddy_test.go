package integration

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/integration/testenv"
	"outreach/server"
	"outreach/slackmsg"
	"outreach/tools"
)

// caddyLongCall is how long the long call through Caddy lasts: past the
// 60 s at which common proxies cut a response that is slow to start.
const caddyLongCall = 61 * time.Second

// requireCaddy finds Caddy (Debian's package); without it the test skips,
// and fails under CI=true (the test command installs it).
func requireCaddy(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("caddy"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("caddy is not installed (scripts/test.sh installs Debian's caddy)")
	}
	t.Skip("caddy is not installed")
	return ""
}

// freePort is a loopback port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	_, port, _ := net.SplitHostPort(freeTCP(t))
	return port
}

// startCaddy runs Caddy with docker/Caddyfile for public, forwarding to
// upstream. A global block before the file (the compose profile has none)
// takes the certificate from Caddy's internal CA, keeps Caddy's ports on
// free ones (its HTTP redirect included), turns the admin endpoint off and
// leaves the system's trust store alone; the CA lives in a temporary
// directory, whose root the returned pool trusts; spki are the base64
// SHA-256 hashes of the CA's root and intermediate public keys.
func startCaddy(t *testing.T, exe, public, upstream string) (roots *x509.CertPool, spki []string) {
	t.Helper()
	dir := t.TempDir()
	project, err := os.ReadFile(filepath.Join("..", "docker", "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	_, httpsPort, _ := net.SplitHostPort(strings.TrimPrefix(public, "https://"))
	global := fmt.Sprintf("{\n\tadmin off\n\tlocal_certs\n\tskip_install_trust\n\thttp_port %s\n\thttps_port %s\n}\n", freePort(t), httpsPort)
	conf := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(conf, append([]byte(global), project...), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "run", "--config", conf, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"OUTREACH_PUBLIC_URL="+public, "OUTREACH_UPSTREAM="+upstream)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	ca := filepath.Join(dir, "data", "caddy", "pki", "authorities", "local")
	rootFile := filepath.Join(ca, "root.crt")
	roots = x509.NewCertPool()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if pem, err := os.ReadFile(rootFile); err == nil && roots.AppendCertsFromPEM(pem) {
			resp, err := (&http.Client{Transport: tlsTransport(roots, "")}).Get(public + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return roots, caKeyHashes(t, rootFile, filepath.Join(ca, "intermediate.crt"))
				}
			}
		}
		select {
		case <-done:
			t.Fatalf("caddy exited at start: %v\n%s", cmd.ProcessState, out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("caddy did not serve %s in time\n%s", public, out)
		}
	}
}

// caKeyHashes are the base64 SHA-256 hashes of the public keys of the
// certificates in files (PEM).
func caKeyHashes(t *testing.T, files ...string) []string {
	t.Helper()
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		if blk == nil {
			t.Fatalf("%s holds no PEM block", f)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
		out = append(out, base64.StdEncoding.EncodeToString(sum[:]))
	}
	return out
}

// fromLoopback is a transport whose connections leave from the loopback
// address src (any of 127.0.0.0/8), so that the service can tell the
// test's own connections from Caddy's, which come from 127.0.0.1. It sends
// key and, when forge is set, forged forwarding headers.
func fromLoopback(src string, roots *x509.CertPool, key string, forge bool) http.RoundTripper {
	tr := tlsTransport(roots, "")
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil && host == "localhost" {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		return d.DialContext(ctx, "tcp4", addr)
	}
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		if forge {
			r.Header.Set("X-Forwarded-For", "198.51.100.66")
			r.Header.Set("X-Forwarded-Host", "evil.example.net")
			r.Header.Set("X-Forwarded-Proto", "https")
		}
		return tr.RoundTrip(r)
	})
}

// TestCaddy runs the real Caddy (Debian's package) with docker/Caddyfile
// in front of the service, which has the public URL Caddy serves and
// trusts Caddy's address alone. Through Caddy: a call lasting longer than
// a minute is answered, not cut; a resource notification arrives on the
// open event stream (Caddy passes events on as they come, not when the
// stream ends); forged X-Forwarded-* are replaced by Caddy's, and sent to
// the service directly they are ignored; every metadata document names
// the public URL; a member signs in with OAuth in headless Chromium (as in
// TestOAuthBrowser) through Caddy.
func TestCaddy(t *testing.T) {
	exe := requireCaddy(t)
	parallelOnEmbedded(t)
	public := "https://localhost:" + freePort(t)

	// A Slack Web API that answers after caddyLongCall: send_slack_message
	// is the long call (the client has no timeout of its own here).
	slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(caddyLongCall):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true,"channel":"C0TEAM","ts":"1700000000.000100"}`)
	}))
	t.Cleanup(slack.Close)
	sc := slackmsg.New(slackmsg.Config{BotToken: "xoxb-test", Channel: "C0TEAM", APIURL: slack.URL, HTTP: &http.Client{}})

	log := &lockedBuffer{}
	env := testenv.NewWith(t, testenv.Options{OAuth: true, Log: log, Tools: []tools.Option{tools.WithSlack(sc), tools.WithServerCard(true)},
		Server: server.Config{PublicURL: public, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}})
	roots, spki := startCaddy(t, exe, public, strings.TrimPrefix(env.Base, "http://"))

	connect := func(rt http.RoundTripper, url string, opts *mcp.ClientOptions) *mcp.ClientSession {
		t.Helper()
		s, err := mcp.NewClient(&mcp.Implementation{Name: "caddy-test", Version: "1"}, opts).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: rt}}, &mcp.ClientSessionOptions{ProtocolVersion: testenv.ClientRevision})
		if err != nil {
			t.Fatalf("connect to %s: %v", url, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), caddyLongCall+60*time.Second)
	defer cancel()

	// The long call runs while the other checks do.
	long := make(chan error, 1)
	go func() {
		s, err := mcp.NewClient(&mcp.Implementation{Name: "caddy-test", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: public + "/mcp", HTTPClient: &http.Client{Transport: fromLoopback("127.0.0.1", roots, env.AdminKey, false)}}, nil)
		if err != nil {
			long <- err
			return
		}
		defer s.Close()
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "send_slack_message", Arguments: M{"text": "a slow Slack", "confirm": true}})
		if err == nil && res.IsError {
			err = fmt.Errorf("send_slack_message failed: %+v", res.Content)
		}
		long <- err
	}()
	started := time.Now()

	t.Run("event stream unbuffered", func(t *testing.T) {
		updated := make(chan string, 4)
		s := connect(fromLoopback("127.0.0.1", roots, env.AdminKey, false), public+"/mcp", &mcp.ClientOptions{
			ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updated <- req.Params.URI }})
		contact := mk(t, env.Admin(), "create_contact", M{"first_name": "Cady", "last_name": "Proxy"})
		uri := "outreach://contacts/" + contact
		if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
		env.Admin().Must("update_contact", M{"id": contact, "title": "Editor"}, nil)
		// The notification travels on the session's event stream, which
		// stays open as long as the session: held back until the stream
		// ends, it would never arrive.
		select {
		case got := <-updated:
			if got != uri {
				t.Errorf("notifications/resources/updated for %s, want %s", got, uri)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no notifications/resources/updated through Caddy while the stream is open")
		}
	})

	card := func(t *testing.T, rt http.RoundTripper, base string) string {
		t.Helper()
		resp, err := (&http.Client{Transport: rt}).Get(base + server.ServerCardPath)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var c struct {
			Remotes []struct {
				URL string `json:"url"`
			} `json:"remotes"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || len(c.Remotes) != 1 {
			t.Fatalf("server card: %d %v %+v", resp.StatusCode, err, c)
		}
		return c.Remotes[0].URL
	}
	whoami := func(t *testing.T, rt http.RoundTripper, url string) {
		t.Helper()
		res, err := connect(rt, url, nil).CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: M{}})
		if err != nil || res.IsError {
			t.Fatalf("whoami: %v %+v", err, res)
		}
	}

	t.Run("forwarded headers believed from Caddy alone", func(t *testing.T) {
		// Sent to the service directly (from 127.0.0.2, not Caddy's
		// address), forged headers are ignored: the card is under the
		// address the client reached, the log names the real peer.
		direct := fromLoopback("127.0.0.2", nil, env.AdminKey, true)
		if got, want := card(t, direct, env.Base), env.Base+"/mcp"; got != want {
			t.Errorf("server card reached directly with forged headers: %s, want %s", got, want)
		}
		whoami(t, direct, env.URL)
		// Through Caddy (from 127.0.0.3), Caddy replaces them with its own.
		via := fromLoopback("127.0.0.3", roots, env.AdminKey, true)
		if got, want := card(t, via, public), public+"/mcp"; got != want {
			t.Errorf("server card through Caddy with forged headers: %s, want %s", got, want)
		}
		whoami(t, via, public+"/mcp")
		l := log.String()
		if !strings.Contains(l, `"client":"127.0.0.2"`) || !strings.Contains(l, `"client":"127.0.0.3"`) || strings.Contains(l, "198.51.100.66") {
			t.Errorf("the log does not name the clients 127.0.0.2 (direct) and 127.0.0.3 (through Caddy), or names the forged one:\n%s", l)
		}
	})

	t.Run("metadata names the public URL", func(t *testing.T) {
		hc := &http.Client{Transport: fromLoopback("127.0.0.1", roots, "", false)}
		for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource",
			"/.well-known/oauth-authorization-server", server.ServerCardPath} {
			resp, err := hc.Get(public + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), public) || strings.Contains(string(body), env.Base) {
				t.Errorf("%s through Caddy: %d, want the public URL %s and not the service's own address:\n%s", path, resp.StatusCode, public, body)
			}
		}
		// A 401 points at the resource metadata under the public URL.
		resp, err := hc.Post(public+"/mcp", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if h := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(h, public+"/.well-known/oauth-protected-resource") {
			t.Errorf("401 through Caddy: %d %q", resp.StatusCode, h)
		}
	})

	t.Run("OAuth sign-in in a browser", func(t *testing.T) {
		exe := chromium(t)
		hc := &http.Client{Transport: tlsTransport(roots, "")}
		browserSignIn(t, exe, env, "cady@example.com", public+"/mcp", hc, spki...)
	})

	if err := <-long; err != nil {
		t.Errorf("the long call through Caddy: %v", err)
	} else if d := time.Since(started); d < caddyLongCall-5*time.Second {
		t.Errorf("the long call ended after %v, before the upstream answered", d)
	}
}
