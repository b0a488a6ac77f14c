package integration

import (
	"context"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/integration/testenv"
	"outreach/server"
)

// forwarding is a client transport that sends the key and extra headers
// (a proxy's, or a client's forged ones) and, when host is set, that Host.
type forwarding struct {
	key, host string
	header    http.Header
}

func (f forwarding) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+f.key)
	for k, v := range f.header {
		r.Header[k] = v
	}
	if f.host != "" {
		r.Host = f.host
	}
	return http.DefaultTransport.RoundTrip(r)
}

// callVia connects with the forwarding transport and calls upload_media_url,
// returning the signed URL the service built.
func callVia(t *testing.T, env *testenv.Env, f forwarding) string {
	t.Helper()
	f.key = env.AdminKey
	c := mcp.NewClient(&mcp.Implementation{Name: "proxy-test", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: env.URL, HTTPClient: &http.Client{Transport: f}}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer s.Close()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_coverage", Arguments: M{"title": "proxy", "url": "https://example.com/proxy",
		"published_at": "2026-01-02T03:04:05Z", "type": "article"}})
	if err != nil || res.IsError {
		t.Fatalf("create_coverage: %v %v", err, res)
	}
	cov := resultMap(t, res)["id"].(string)
	res, err = s.CallTool(context.Background(), &mcp.CallToolParams{Name: "upload_media_url", Arguments: M{"coverage_id": cov, "filename": "a.pdf", "mime_type": "application/pdf"}})
	if err != nil || res.IsError {
		t.Fatalf("upload_media_url: %v %v", err, res)
	}
	return resultMap(t, res)["upload_url"].(string)
}

func resultMap(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	m, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("no structured content: %#v", res.StructuredContent)
	}
	return m
}

// TestForwardedHeadersOnlyFromTrustedProxies sends a proxy's headers to the
// service: from a peer that is not a configured proxy they are forgeries and
// change nothing (the signed URL keeps the connection's scheme and host, the
// log the peer's address); from a trusted proxy they give the client's
// address (the first one, walking back, that is not a trusted proxy), the
// scheme and the host.
func TestForwardedHeadersOnlyFromTrustedProxies(t *testing.T) {
	xff := http.Header{
		"X-Forwarded-For":   {"198.51.100.1, 203.0.113.7"}, // the client forged the first; the proxy appended the second
		"X-Forwarded-Proto": {"https"},
		"X-Forwarded-Host":  {"outreach.example.com"},
	}
	rfc7239 := http.Header{"Forwarded": {`for=198.51.100.1;proto=http, for="203.0.113.9:4711";proto=https;host=fwd.example.com`}}
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	for _, tc := range []struct {
		name       string
		trusted    []netip.Prefix
		header     http.Header
		wantBase   string // "" = the connection's own
		wantClient string
	}{
		{"X-Forwarded from an untrusted peer", nil, xff, "", "127.0.0.1"},
		{"Forwarded from an untrusted peer", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, rfc7239, "", "127.0.0.1"},
		{"X-Forwarded from a trusted proxy", loopback, xff, "https://outreach.example.com", "203.0.113.7"},
		{"Forwarded from a trusted proxy", loopback, rfc7239, "https://fwd.example.com", "203.0.113.9"},
		// The client forged Forwarded; the proxy (as Caddy does) set X-Forwarded-*: those count.
		{"forged Forwarded beside a trusted proxy's X-Forwarded", loopback, http.Header{"Forwarded": rfc7239["Forwarded"],
			"X-Forwarded-For": {"203.0.113.7"}, "X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"outreach.example.com"}}, "https://outreach.example.com", "203.0.113.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log lockedBuffer
			env := testenv.NewWith(t, testenv.Options{Server: server.Config{TrustedProxies: tc.trusted}, Log: &log})
			base := tc.wantBase
			if base == "" {
				base = strings.TrimSuffix(env.URL, "/mcp")
			}
			u := callVia(t, env, forwarding{header: tc.header})
			if !strings.HasPrefix(u, base+"/media/") {
				t.Errorf("upload_url %q, want it under %s", u, base)
			}
			if !strings.Contains(log.String(), `"client":"`+tc.wantClient+`"`) || !strings.Contains(log.String(), `"tool":"upload_media_url"`) {
				t.Errorf("the log does not name the client %s:\n%s", tc.wantClient, log.String())
			}
			for _, forged := range []string{"198.51.100.1", "203.0.113.7", "203.0.113.9"} {
				if forged != tc.wantClient && strings.Contains(log.String(), `"client":"`+forged+`"`) {
					t.Errorf("the log names the forged client %s:\n%s", forged, log.String())
				}
			}
		})
	}
}

// hostOriginStatus posts an initialize to env with the given Host and Origin and
// returns the HTTP status.
func hostOriginStatus(t *testing.T, env *testenv.Env, host, origin string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, err := http.NewRequest(http.MethodPost, env.URL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+env.AdminKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestPublicHostBehindProxy: on a loopback listener (a proxy on the same
// machine) the DNS-rebinding check refuses a Host that is not loopback,
// unless it is the public URL's host; a browser's Origin is accepted when it
// is the public URL's origin, and refused otherwise.
func TestPublicHostBehindProxy(t *testing.T) {
	plain := testenv.New(t)
	if got := hostOriginStatus(t, plain, "outreach.example.com", ""); got != http.StatusForbidden {
		t.Errorf("Host outreach.example.com without a public URL: %d, want 403", got)
	}
	if got := hostOriginStatus(t, plain, "", "https://outreach.example.com"); got != http.StatusForbidden {
		t.Errorf("Origin https://outreach.example.com without a public URL: %d, want 403", got)
	}
	if got := hostOriginStatus(t, plain, "", ""); got != http.StatusOK {
		t.Errorf("a loopback Host: %d, want 200", got)
	}

	env := testenv.NewWith(t, testenv.Options{Server: server.Config{PublicURL: "https://outreach.example.com"}})
	for _, tc := range []struct {
		host, origin string
		want         int
	}{
		{"outreach.example.com", "", http.StatusOK},
		{"OUTREACH.example.com:443", "", http.StatusOK},
		{"outreach.example.com", "https://outreach.example.com", http.StatusOK},
		{"", "https://outreach.example.com", http.StatusOK},
		{"evil.example.net", "", http.StatusForbidden},
		{"outreach.example.com.evil.example.net", "", http.StatusForbidden},
		{"outreach.example.com", "https://evil.example.net", http.StatusForbidden},
		{"", "http://outreach.example.com:8443", http.StatusForbidden},
	} {
		if got := hostOriginStatus(t, env, tc.host, tc.origin); got != tc.want {
			t.Errorf("public URL set, Host %q Origin %q: %d, want %d", tc.host, tc.origin, got, tc.want)
		}
	}
	if u := callVia(t, env, forwarding{host: "outreach.example.com"}); !strings.HasPrefix(u, "https://outreach.example.com/media/") {
		t.Errorf("upload_url %q is not under the public URL", u)
	}
}

// TestComposePublicProfile holds docker-compose.yml's profile "public" to
// what the service needs behind Caddy: the service trusts exactly the
// proxy's fixed address (in the edge network's subnet), takes its public
// URL from the same variable Caddy's site address does, and Caddy passes
// event streams on unbuffered.
func TestComposePublicProfile(t *testing.T) {
	compose, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	caddyfile, err := os.ReadFile("../docker/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	find := func(pattern string) string {
		m := regexp.MustCompile(pattern).FindSubmatch(compose)
		if m == nil {
			t.Fatalf("docker-compose.yml has no %s", pattern)
		}
		return string(m[1])
	}
	trusted := find(`OUTREACH_TRUSTED_PROXIES: (\S+)`)
	proxy := find(`ipv4_address: (\S+)`)
	subnet := find(`subnet: (\S+)`)
	if _, err := server.ParseTrustedProxies("OUTREACH_TRUSTED_PROXIES", trusted); err != nil || trusted != proxy {
		t.Errorf("the service trusts %q (%v), the proxy's address is %q", trusted, err, proxy)
	}
	if p, err := netip.ParsePrefix(subnet); err != nil || !p.Contains(netip.MustParseAddr(proxy)) {
		t.Errorf("the proxy's address %s is not in the edge subnet %s (%v)", proxy, subnet, err)
	}
	if !regexp.MustCompile(`profiles: \["public"\]`).Match(compose) || !strings.Contains(find(`(?s)outreach:\n    build:(.*?)\n\n`), "OUTREACH_PUBLIC_URL: ${OUTREACH_PUBLIC_URL") {
		t.Errorf("the service does not take OUTREACH_PUBLIC_URL, or Caddy is not in the profile public")
	}
	// The upstream is the compose service unless OUTREACH_UPSTREAM names
	// another (the tests run Caddy in front of a service on loopback).
	for _, want := range []string{"{$OUTREACH_PUBLIC_URL} {", "reverse_proxy {$OUTREACH_UPSTREAM:outreach:8080}", "flush_interval -1"} {
		if !strings.Contains(string(caddyfile), want) {
			t.Errorf("docker/Caddyfile lacks %q", want)
		}
	}
}
