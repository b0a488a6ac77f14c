package server

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// TestResolveOrigin reads forwarding headers as the proxies in front write
// them: chains of trusted hops, IPv6 and ports, quoted RFC 7239 values,
// obfuscated hops and values that are not a scheme or a host.
func TestResolveOrigin(t *testing.T) {
	trusted, err := ParseTrustedProxies("t", "10.0.0.0/8, ::1, 192.0.2.5")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, peer           string
		header               http.Header
		client, scheme, host string
	}{
		{"untrusted peer", "198.51.100.1:1000", http.Header{"X-Forwarded-For": {"203.0.113.1"}, "X-Forwarded-Proto": {"https"}}, "198.51.100.1", "http", "svc"},
		{"two trusted hops", "10.0.0.2:1000", http.Header{"X-Forwarded-For": {"6.6.6.6, 203.0.113.1", "10.0.0.3"}}, "203.0.113.1", "http", "svc"},
		{"all hops trusted", "10.0.0.2:1000", http.Header{"X-Forwarded-For": {"10.0.0.9"}}, "10.0.0.9", "http", "svc"},
		{"IPv6 peer and client", "[::1]:1000", http.Header{"X-Forwarded-For": {"2001:db8::7"}, "X-Forwarded-Proto": {"HTTPS"}}, "2001:db8::7", "https", "svc"},
		{"garbage hop stops the walk", "10.0.0.2:1000", http.Header{"X-Forwarded-For": {"203.0.113.1, nonsense"}}, "10.0.0.2", "http", "svc"},
		{"bad scheme and host ignored", "192.0.2.5:1000", http.Header{"X-Forwarded-For": {"203.0.113.1"}, "X-Forwarded-Proto": {"javascript"}, "X-Forwarded-Host": {"evil.example/path"}}, "203.0.113.1", "http", "svc"},
		{"RFC 7239 quoted IPv6 with port", "10.0.0.2:1000", http.Header{"Forwarded": {`for="[2001:db8:cafe::17]:4711";proto=https;host="outreach.example.com"`}}, "2001:db8:cafe::17", "https", "outreach.example.com"},
		{"RFC 7239 over two lines and two hops", "10.0.0.2:1000", http.Header{"Forwarded": {"for=203.0.113.1;proto=https;host=a.example.com", "for=10.0.0.3;proto=http;host=internal"}}, "203.0.113.1", "https", "a.example.com"},
		{"RFC 7239 obfuscated client", "10.0.0.2:1000", http.Header{"Forwarded": {"for=_hidden;proto=https"}}, "10.0.0.2", "http", "svc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "http://svc/mcp", nil)
			r.RemoteAddr, r.Header = tc.peer, tc.header
			o := resolveOrigin(r, trusted)
			if o.client != netip.MustParseAddr(tc.client) || o.scheme != tc.scheme || o.host != tc.host {
				t.Errorf("got client %s scheme %s host %s, want %s %s %s", o.client, o.scheme, o.host, tc.client, tc.scheme, tc.host)
			}
		})
	}
}

// TestParsePublicURL refuses what is not a base URL, naming the setting.
func TestParsePublicURL(t *testing.T) {
	for in, want := range map[string]string{"https://outreach.example.com/": "https://outreach.example.com", "http://127.0.0.1:8080": "http://127.0.0.1:8080",
		"https://example.com/outreach": "https://example.com/outreach", "": ""} {
		if got, err := ParsePublicURL("--public-url", in); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"outreach.example.com", "ftp://x.example.com", "https://", "https://x.example.com/?a=1", "https://x.example.com/#top",
		"https://user:pw@x.example.com", "https://x.example.com:0", "https://x.example.com:99999", "/mcp", "https://x.example.com/mcp", "https://x.example.com/outreach/mcp/"} {
		if _, err := ParsePublicURL("--public-url", in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
