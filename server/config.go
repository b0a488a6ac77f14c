package server

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"outreach/metrics"
	"outreach/oauth"
)

// Config is the HTTP edge's deployment configuration.
type Config struct {
	// PublicURL is the service's base URL as clients reach it, e.g.
	// https://outreach.example.com (scheme, host, optional port and path
	// prefix; no trailing slash): every absolute URL the service hands out
	// is built on it, and its host is accepted in Host and Origin headers.
	// Empty: derived from each request (scheme and Host, or what a trusted
	// proxy forwarded).
	PublicURL string
	// TrustedProxies are the addresses whose Forwarded and X-Forwarded-*
	// headers are believed: the client's address, scheme and host. From
	// any other peer those headers are ignored.
	TrustedProxies []netip.Prefix
	// Hosts are further host names accepted in the Host header on a
	// loopback listener, beside the public URL's (the ACME host names).
	Hosts []string
	// OAuth turns on the OAuth resource server (--oauth): the protected
	// resource metadata, its challenge on every 401, and OAuth access tokens
	// beside the agent keys. It needs PublicURL.
	OAuth bool
	// ClientMetadata says which client metadata documents the authorization
	// server may fetch.
	ClientMetadata oauth.FetchOptions
	// Upstream, when set, lets members sign in with an OpenID Connect
	// provider.
	Upstream *oauth.Upstream
	// Metrics, when set, counts tool calls and refusals; with MetricsToken
	// it is also served at /metrics on this listener to a scrape that
	// sends the token (never without one: the MCP listener faces clients).
	Metrics      *metrics.Metrics
	MetricsToken string
	// Mailbox, when set, serves the team mailbox's connect page and the
	// provider's return under /mailbox/ (package mailauth).
	Mailbox http.Handler
}

// ParsePublicURL checks a public base URL: absolute http or https, a host,
// no user, query or fragment. It returns the URL without a trailing slash.
// name is the setting's name for the error (e.g. "--public-url").
func ParsePublicURL(name, s string) (string, error) {
	if s == "" {
		return "", nil
	}
	bad := func(why string) error {
		return fmt.Errorf("%s %q: %s; want the base URL clients reach the service at, http(s)://host[:port][/path], e.g. https://outreach.example.com", name, s, why)
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", bad("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", bad("the scheme must be http or https")
	case u.Host == "" || u.Hostname() == "":
		return "", bad("no host")
	case u.User != nil:
		return "", bad("a user or password does not belong in it")
	case u.RawQuery != "" || u.ForceQuery:
		return "", bad("a query does not belong in it")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return "", bad("a fragment does not belong in it")
	case u.Opaque != "":
		return "", bad("not an absolute URL")
	case strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/mcp"):
		return "", bad("that is the MCP endpoint; give the base it is under, without /mcp")
	}
	if p := u.Port(); p != "" {
		if n, err := parsePort(p); err != nil || n < 1 || n > 65535 {
			return "", bad("the port must be 1 to 65535")
		}
	}
	return strings.TrimRight(s, "/"), nil
}

func parsePort(p string) (int, error) { return strconv.Atoi(p) }

// ParseTrustedProxies reads a comma-separated list of CIDRs or single
// addresses (e.g. "10.0.0.0/8, 127.0.0.1"). name names the setting in the
// error.
func ParseTrustedProxies(name, s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if p, err := netip.ParsePrefix(part); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is neither an address nor a CIDR; want a comma-separated list such as 10.0.0.0/8,127.0.0.1", name, part)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// publicHost is the host name (without port) of the public URL, or "".
func (c Config) publicHost() string {
	if c.PublicURL == "" {
		return ""
	}
	u, err := url.Parse(c.PublicURL)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}

// publicOrigin is the scheme://host[:port] of the public URL, or "".
func (c Config) publicOrigin() string {
	if c.PublicURL == "" {
		return ""
	}
	u, err := url.Parse(c.PublicURL)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
