package oauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/time/rate"

	"outreach/repo/access"
)

// Client ID Metadata Documents: a client whose client_id is an HTTPS URL
// publishes its metadata there, and the server fetches it, with care: the
// URL is the client's, so the fetch is bounded in size and time, follows no
// redirect, and never reaches a loopback, private or link-local address
// (the server's own network) unless the operator allows it.

// Limits of a metadata document fetch.
const (
	MaxClientMetadata     = 64 << 10
	ClientMetadataTimeout = 5 * time.Second
	clientMetadataTTL     = 5 * time.Minute
)

// FetchOptions say which metadata documents may be fetched.
type FetchOptions struct {
	// AllowPrivate lets a document be fetched from loopback, private and
	// link-local addresses (a client on the operator's own network).
	AllowPrivate bool
	// RootCAs, when set, are the roots a document's server certificate is
	// checked against instead of the system's (tests).
	RootCAs *x509.CertPool
	// Timeout overrides ClientMetadataTimeout (tests).
	Timeout time.Duration
}

// clientDoc is what the service reads of a client's metadata (RFC 7591
// field names).
type clientDoc struct {
	ClientID                string   `json:"client_id"`
	ClientName              string   `json:"client_name"`
	ClientURI               string   `json:"client_uri"`
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
}

type clientMetadata struct {
	hc *http.Client
	mu sync.Mutex
	// cache keeps a fetched document for clientMetadataTTL.
	cache map[string]cachedDoc
}

type cachedDoc struct {
	doc *clientDoc
	at  time.Time
}

func newClientMetadata(o FetchOptions) *clientMetadata {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = ClientMetadataTimeout
	}
	dialer := &net.Dialer{Timeout: timeout, Control: func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip := net.ParseIP(host)
		if ip == nil {
			return fmt.Errorf("%s is not an IP address", host)
		}
		if !o.AllowPrivate && (ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast()) {
			return fmt.Errorf("the client metadata document's host resolves to %s, a loopback, private or link-local address, which this server does not fetch from", ip)
		}
		return nil
	}}
	tr := &http.Transport{DialContext: dialer.DialContext, TLSClientConfig: &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: timeout, ResponseHeaderTimeout: timeout, MaxResponseHeaderBytes: 16 << 10, Proxy: nil}
	return &clientMetadata{cache: map[string]cachedDoc{}, hc: &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("the client metadata document's URL redirects; it must answer itself")
		}}}
}

// get returns the metadata document at id, fetched or from the cache.
func (m *clientMetadata) get(ctx context.Context, id string) (*clientDoc, error) {
	m.mu.Lock()
	c, ok := m.cache[id]
	m.mu.Unlock()
	if ok && time.Since(c.at) < clientMetadataTTL {
		return c.doc, nil
	}
	doc, err := m.fetch(ctx, id)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if len(m.cache) > 1000 {
		m.cache = map[string]cachedDoc{}
	}
	m.cache[id] = cachedDoc{doc: doc, at: time.Now()}
	m.mu.Unlock()
	return doc, nil
}

func (m *clientMetadata) fetch(ctx context.Context, id string) (*clientDoc, error) {
	u, err := url.Parse(id)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Path == "" || u.Path == "/" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("client_id %q: a metadata document's URL must be https with a path, without fragment or user", id)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := m.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client metadata document %s: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("client metadata document %s: the server answered %s", id, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxClientMetadata+1))
	if err != nil {
		return nil, fmt.Errorf("client metadata document %s: %w", id, err)
	}
	if len(body) > MaxClientMetadata {
		return nil, fmt.Errorf("client metadata document %s is larger than %d bytes", id, MaxClientMetadata)
	}
	var doc clientDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("client metadata document %s is not a JSON object: %w", id, err)
	}
	if doc.ClientID != id {
		return nil, fmt.Errorf("client metadata document %s names client_id %q, not its own URL", id, doc.ClientID)
	}
	if err := checkRedirectURIs(doc.RedirectURIs); err != nil {
		return nil, fmt.Errorf("client metadata document %s: %w", id, err)
	}
	if doc.TokenEndpointAuthMethod != "" && doc.TokenEndpointAuthMethod != "none" {
		return nil, fmt.Errorf("client metadata document %s: token_endpoint_auth_method %q; this server takes public clients only (none, with PKCE)", id, doc.TokenEndpointAuthMethod)
	}
	if len(doc.ClientName) > 200 {
		doc.ClientName = doc.ClientName[:200]
	}
	return &doc, nil
}

// checkRedirectURIs: one to ten absolute URIs without fragments; http only
// on a loopback host (a native client's local callback).
func checkRedirectURIs(uris []string) error {
	if len(uris) == 0 || len(uris) > 10 {
		return fmt.Errorf("redirect_uris: give 1 to 10 redirect URIs; got %d", len(uris))
	}
	for _, raw := range uris {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme == "" || u.Fragment != "" || len(raw) > 2000 {
			return fmt.Errorf("redirect_uris: %q is not an absolute URI without fragment", raw)
		}
		switch u.Scheme {
		case "https":
			if u.Host == "" {
				return fmt.Errorf("redirect_uris: %q has no host", raw)
			}
		case "http":
			h := u.Hostname()
			if ip := net.ParseIP(h); (ip == nil || !ip.IsLoopback()) && h != "localhost" {
				return fmt.Errorf("redirect_uris: %q is http on a host other than loopback; use https", raw)
			}
		case "javascript", "data", "file", "vbscript":
			return fmt.Errorf("redirect_uris: %q has a scheme that is never a redirect target", raw)
		}
	}
	return nil
}

// register is Dynamic Client Registration (RFC 7591) of a public client.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	// Registration needs no credential, so a client running in a browser
	// (an inspector) may call it from any origin.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if r.Method == http.MethodOptions {
		w.Header().Set("Access-Control-Allow-Methods", "POST")
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "POST the client's metadata as JSON", http.StatusMethodNotAllowed)
		return
	}
	if !s.writes.allow(w, r) {
		return
	}
	var doc clientDoc
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxClientMetadata))
	if err == nil {
		err = json.Unmarshal(body, &doc)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata", "error_description": "the body must be a JSON object of at most 64 KiB"})
		return
	}
	if err := checkRedirectURIs(doc.RedirectURIs); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_redirect_uri", "error_description": err.Error()})
		return
	}
	if len(doc.ClientName) > 200 {
		doc.ClientName = doc.ClientName[:200]
	}
	c := &access.OAuthClient{ClientName: strings.TrimSpace(doc.ClientName), RedirectURIs: doc.RedirectURIs, ClientURI: doc.ClientURI}
	if err := access.Of(s.store).RegisterOAuthClient(actor(r.Context(), "register"), c); err != nil {
		s.log.Error().Err(err).Msg("oauth register")
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error", "error_description": "the client could not be registered; try again"})
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"client_id": c.ID, "client_id_issued_at": c.CreatedAt.Unix(), "client_name": c.ClientName, "redirect_uris": c.RedirectURIs,
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// perAddress limits the requests that write a record without any
// credential (a registration, an authorization request) per client
// address: ClientWrites a second, bursts of ClientWriteBurst.
type perAddress struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

// Limits of unauthenticated writes per address.
const (
	ClientWrites     = 1
	ClientWriteBurst = 30
)

func (p *perAddress) allow(w http.ResponseWriter, r *http.Request) bool {
	p.mu.Lock()
	if p.m == nil || len(p.m) > 10000 {
		p.m = map[string]*rate.Limiter{}
	}
	l := p.m[clientIP(r)]
	if l == nil {
		l = rate.NewLimiter(ClientWrites, ClientWriteBurst)
		p.m[clientIP(r)] = l
	}
	p.mu.Unlock()
	if l.Allow() {
		return true
	}
	w.Header().Set("Retry-After", "1")
	http.Error(w, "too many registrations or authorization requests from this address; retry in a second", http.StatusTooManyRequests)
	return false
}
