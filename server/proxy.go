package server

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// The request's origin as the edge resolved it: the client's address, and
// the scheme and host it used. Behind a trusted proxy they come from the
// proxy's Forwarded or X-Forwarded-* headers; otherwise from the connection.
type origin struct {
	client       netip.Addr // invalid when the peer's address is not an IP
	scheme, host string
}

type originKey struct{}

// edge resolves each request's origin (see Config.TrustedProxies) and
// refuses a Host header that could come from DNS rebinding: on a loopback
// listener only a loopback host or the public URL's host is served.
func (c Config) edge(next http.Handler) http.Handler {
	trusted := c.TrustedProxies
	public := []string{}
	if h := c.publicHost(); h != "" {
		public = append(public, h)
	}
	for _, h := range c.Hosts {
		public = append(public, strings.ToLower(strings.TrimSuffix(h, ".")))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r, public) {
			http.Error(w, "Forbidden: invalid Host header "+quote(r.Host)+": the service answers on a loopback address; set the public URL (--public-url) to the host name clients use", http.StatusForbidden)
			return
		}
		o := resolveOrigin(r, trusted)
		if o.client.IsValid() {
			_, port, err := net.SplitHostPort(r.RemoteAddr)
			if err != nil || o.client != peerAddr(r) {
				port = "0"
			}
			r.RemoteAddr = net.JoinHostPort(o.client.String(), port)
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), originKey{}, o)))
	})
}

func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// hostAllowed is the SDK's DNS-rebinding check (a request that arrived on a
// loopback address must name a loopback host), which also accepts the host
// of the public URL (a proxy on the same machine forwards the public name)
// and the configured Hosts.
func hostAllowed(r *http.Request, public []string) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !isLoopback(local.String()) || isLoopback(r.Host) {
		return true
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return slices.Contains(public, strings.ToLower(strings.TrimSuffix(host, ".")))
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// peerAddr is the address of the connection's other end.
func peerAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		a, err := netip.ParseAddr(r.RemoteAddr)
		if err != nil {
			return netip.Addr{}
		}
		return a.Unmap()
	}
	return ap.Addr().Unmap()
}

func trustedAddr(a netip.Addr, trusted []netip.Prefix) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// resolveOrigin reads the connection and, when the peer is a trusted proxy,
// its forwarding headers. The client is found by walking the chain of
// forwarded addresses from the nearest hop outward while each hop is a
// trusted proxy: the first address that is not one is the client (a client
// cannot forge what lies beyond the first proxy that is trusted). The
// scheme and host are those the outermost trusted proxy reported.
// X-Forwarded-For/-Proto/-Host are read when present (what Caddy, nginx and
// the cloud balancers set), RFC 7239 Forwarded otherwise: a proxy that sets
// one kind passes the other on from the client unchanged, so the kind the
// common proxies set comes first.
func resolveOrigin(r *http.Request, trusted []netip.Prefix) origin {
	o := origin{client: peerAddr(r), scheme: "http", host: r.Host}
	if r.TLS != nil {
		o.scheme = "https"
	}
	if !trustedAddr(o.client, trusted) {
		return o
	}
	xff := r.Header.Values("X-Forwarded-For")
	if fwd := r.Header.Values("Forwarded"); len(fwd) > 0 && len(xff) == 0 && r.Header.Get("X-Forwarded-Proto") == "" && r.Header.Get("X-Forwarded-Host") == "" {
		hops := parseForwarded(fwd)
		for i := len(hops) - 1; i >= 0 && trustedAddr(o.client, trusted); i-- {
			a, ok := forwardedFor(hops[i]["for"])
			if !ok {
				break
			}
			o.client = a
			if p := strings.ToLower(hops[i]["proto"]); p == "http" || p == "https" {
				o.scheme = p
			}
			if h := hops[i]["host"]; validHost(h) {
				o.host = h
			}
		}
		return o
	}
	fors := headerList(xff)
	for i := len(fors) - 1; i >= 0 && trustedAddr(o.client, trusted); i-- {
		a, ok := forwardedFor(fors[i])
		if !ok {
			break
		}
		o.client = a
	}
	if ps := headerList(r.Header.Values("X-Forwarded-Proto")); len(ps) > 0 {
		if p := strings.ToLower(ps[len(ps)-1]); p == "http" || p == "https" {
			o.scheme = p
		}
	}
	if hs := headerList(r.Header.Values("X-Forwarded-Host")); len(hs) > 0 && validHost(hs[len(hs)-1]) {
		o.host = hs[len(hs)-1]
	}
	return o
}

// headerList splits comma-separated header values into trimmed items.
func headerList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	}
	return out
}

// parseForwarded reads RFC 7239 elements (comma-separated, each
// semicolon-separated key=value pairs, values optionally quoted).
func parseForwarded(values []string) []map[string]string {
	var hops []map[string]string
	for _, v := range values {
		for _, elem := range splitOutsideQuotes(v, ',') {
			hop := map[string]string{}
			for _, pair := range splitOutsideQuotes(elem, ';') {
				k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if !ok {
					continue
				}
				val = strings.TrimSpace(val)
				if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
					val = strings.ReplaceAll(val[1:len(val)-1], `\"`, `"`)
				}
				hop[strings.ToLower(strings.TrimSpace(k))] = val
			}
			hops = append(hops, hop)
		}
	}
	return hops
}

func splitOutsideQuotes(s string, sep byte) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == sep && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// forwardedFor reads one hop's address: 192.0.2.1, 192.0.2.1:4711,
// [2001:db8::1], [2001:db8::1]:4711 or 2001:db8::1. Obfuscated names
// ("unknown", "_hidden") are not addresses.
func forwardedFor(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return a.Unmap(), true
	}
	return netip.Addr{}, false
}

// validHost accepts a host[:port] a proxy may forward: no scheme, path,
// user, spaces or control characters.
func validHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for _, c := range h {
		if c <= ' ' || c == 0x7f || strings.ContainsRune(`/\?#@"<>`, c) {
			return false
		}
	}
	return true
}

// originOf is the request's resolved origin (the connection's own when
// the edge did not run).
func originOf(r *http.Request) origin {
	if o, ok := r.Context().Value(originKey{}).(origin); ok {
		return o
	}
	return resolveOrigin(r, nil)
}

// ClientIP is the address of the client that made the request: the peer,
// or behind a trusted proxy the address it forwarded. Empty when unknown.
func ClientIP(r *http.Request) string {
	if a := originOf(r).client; a.IsValid() {
		return a.String()
	}
	return ""
}

// baseURL is the base of the absolute URLs the service hands out: the
// public URL, or the scheme and host the request came in with.
func (c Config) baseURL(r *http.Request) string {
	if c.PublicURL != "" {
		return c.PublicURL
	}
	return requestBaseURL(r)
}

// crossOrigin is the cross-origin protection of /mcp: a browser's request
// from another origin is refused; the public URL's origin is this one.
func (c Config) crossOrigin() *http.CrossOriginProtection {
	p := http.NewCrossOriginProtection()
	if o := c.publicOrigin(); o != "" {
		_ = p.AddTrustedOrigin(o) // a checked public URL is a valid origin
	}
	return p
}
