package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/internal/acmetest"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Outreach test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue writes a leaf certificate for 127.0.0.1 and localhost, named cn,
// and its key to certFile and keyFile (each replaced by a rename, as a
// renewal tool does).
func (ca *testCA) issue(t *testing.T, cn, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(path, typ string, b []byte) {
		tmp := path + ".new"
		if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(keyFile, "EC PRIVATE KEY", kder)
	write(certFile, "CERTIFICATE", der)
}

var servingTLSPattern = regexp.MustCompile(`"url":"(https://[^"]+)/mcp"[^\n]*"message":"serving MCP"`)

// startTLSServer starts the binary with args (on a free loopback port) and
// waits for its "serving MCP" line; it returns the https base URL.
func startTLSServer(t *testing.T, data string, args ...string) (base string, stdout, stderr *lockedBuffer, stop func()) {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"serve", "--data", data, "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), storeEnv(data)...)
	stdout, stderr = &lockedBuffer{}, &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	stop = func() {
		cmd.Process.Kill()
		<-done
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := servingTLSPattern.FindStringSubmatch(stderr.String()); m != nil {
			return m[1], stdout, stderr, stop
		}
		select {
		case <-done:
			t.Fatalf("server exited at start: %v\nstderr:\n%s", cmd.ProcessState, stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not start in time\nstderr:\n%s", stderr)
		}
	}
}

// bearerTLS sends the key over a TLS client trusting roots alone.
type bearerTLS struct {
	key string
	rt  http.RoundTripper
}

func (b bearerTLS) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.rt.RoundTrip(r)
}

// tlsTransport trusts roots alone; with addr, every name is dialled there.
func tlsTransport(roots *x509.CertPool, addr string) *http.Transport {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}
	if addr != "" { // resolve every name to the test's listener
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
	}
	return tr
}

// mcpOverTLS connects the SDK's client over tr and calls whoami.
func mcpOverTLS(t *testing.T, url, key string, tr *http.Transport) string {
	t.Helper()
	defer tr.CloseIdleConnections()
	c := mcp.NewClient(&mcp.Implementation{Name: "tls-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTLS{key, tr}}}, nil)
	if err != nil {
		t.Fatalf("connect over TLS: %v", err)
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("whoami over TLS: %v %+v", err, res)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// peerCN is the common name of the certificate the server presents now.
func peerCN(t *testing.T, addr string, roots *x509.CertPool) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("TLS handshake: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestMCPOverTLS serves HTTPS from certificate files: the SDK's MCP client
// connects and calls a tool over TLS (HTTP/2), the start banner gives the
// public URL, plain HTTP and TLS 1.1 are refused, and a renewed pair written
// over the files is served from the next handshake without a restart.
func TestMCPOverTLS(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.issue(t, "outreach first", certFile, keyFile)
	data := dataDir(t)
	base, stdout, stderr, _ := startTLSServer(t, data, "--tls-cert", certFile, "--tls-key", keyFile, "--public-url", "https://outreach.example.com")
	key := keyPattern.FindString(stdout.String())
	if key == "" {
		t.Fatalf("no first key printed:\n%s", stdout)
	}
	if !strings.Contains(stdout.String(), `"url": "https://outreach.example.com/mcp"`) || strings.Contains(stdout.String(), "http://127.0.0.1") {
		t.Errorf("the banner does not give the public URL:\n%s", stdout)
	}
	addr := strings.TrimPrefix(base, "https://")

	tr := tlsTransport(ca.pool, "")
	if who := mcpOverTLS(t, base+"/mcp", key, tr); !strings.Contains(who, "admin") {
		t.Errorf("whoami over TLS: %s", who)
	}
	// A plain request, to read the negotiated protocol and version.
	resp, err := (&http.Client{Transport: tlsTransport(ca.pool, "")}).Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Errorf("healthz over TLS: %d %s %+v", resp.StatusCode, resp.Proto, resp.TLS)
	}

	if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS port: %d, want 400", resp.StatusCode)
		}
	}
	if conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.pool, MaxVersion: tls.VersionTLS11}); err == nil {
		conn.Close()
		t.Errorf("a TLS 1.1 handshake succeeded")
	}

	if cn := peerCN(t, addr, ca.pool); cn != "outreach first" {
		t.Fatalf("served certificate %q", cn)
	}
	ca.issue(t, "outreach renewed certificate", certFile, keyFile)
	if cn := peerCN(t, addr, ca.pool); cn != "outreach renewed certificate" {
		t.Errorf("after the files were replaced the server presents %q, want the renewed certificate", cn)
	}
	// A broken pair keeps the previous certificate.
	if err := os.WriteFile(certFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cn := peerCN(t, addr, ca.pool); cn != "outreach renewed certificate" {
		t.Errorf("with a broken certificate file the server presents %q, want the previous one", cn)
	}
	// The log line is written before the handshake ends, but reaches the
	// buffer through the pipe's copying goroutine: wait for it.
	eventually(t, 30*time.Second, "the broken certificate file logged", func() bool {
		return strings.Contains(stderr.String(), "do not load")
	})
}

// TestMCPOverTLSWithACME obtains the certificate from an ACME CA run in the
// test (it verifies the TLS-ALPN-01 challenge by connecting to the
// service): the first handshake for the configured name gets a certificate
// the CA issued, and the SDK's MCP client talks to the service over it; a
// handshake for another name gets none; the account key and the
// certificate are kept in DATA/acme, mode 0700.
func TestMCPOverTLSWithACME(t *testing.T) {
	const host = "outreach.test"
	ca := acmetest.NewCAServer(t).ChallengeTypes("tls-alpn-01").Start()
	data := dataDir(t)
	base, stdout, _, stop := startTLSServer(t, data, "--acme-host", host, "--acme-email", "ops@example.com", "--acme-directory", ca.URL())
	addr := strings.TrimPrefix(base, "https://")
	_, port, _ := net.SplitHostPort(addr)
	ca.Resolve(host, addr)
	key := keyPattern.FindString(stdout.String())
	if !strings.Contains(stdout.String(), "https://"+host+":"+port+"/mcp") {
		t.Errorf("the banner does not give the ACME host name:\n%s", stdout)
	}

	url := "https://" + host + ":" + port + "/mcp"
	if who := mcpOverTLS(t, url, key, tlsTransport(ca.Roots(), addr)); !strings.Contains(who, "admin") {
		t.Errorf("whoami over the ACME certificate: %s", who)
	}
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Roots(), ServerName: host})
	if err != nil {
		t.Fatal(err)
	}
	issuer := conn.ConnectionState().PeerCertificates[0].Issuer.CommonName
	conn.Close()
	if !strings.HasPrefix(issuer, "Root CA") {
		t.Errorf("certificate issued by %q, want the test CA", issuer)
	}
	if conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, ServerName: "other.example.com"}); err == nil {
		conn.Close()
		t.Errorf("a handshake for a name that is not configured got a certificate")
	}
	stop()
	fi, err := os.Stat(filepath.Join(data, "acme"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("ACME cache: %v %v", fi, err)
	}
	entries, _ := os.ReadDir(filepath.Join(data, "acme"))
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Contains(names, host) || !slices.Contains(names, "acme_account+key") {
		t.Errorf("ACME cache holds %v, want the certificate and the account key", names)
	}
}

// TestBehindTLSProxy runs the deployment of the compose profile "public"
// with Go's reverse proxy in Caddy's place: it terminates TLS for the
// public name, passes the Host on and sets X-Forwarded-For/-Proto/-Host
// (dropping what the client sent in them), and forwards to the binary on
// loopback, which has the public URL and trusts the proxy. The SDK's MCP
// client calls tools through it; a signed media URL is under the public
// URL and downloads through the proxy; a Forwarded header the client forged
// (which the proxy passes on) does not name the client in the log.
func TestBehindTLSProxy(t *testing.T) {
	const public = "https://example.com" // a name in the test TLS server's certificate
	srv := startServer(t, dataDir(t), "OUTREACH_PUBLIC_URL="+public, "OUTREACH_TRUSTED_PROXIES=127.0.0.1")
	target, _ := url.Parse(srv.Base)
	proxy := httptest.NewUnstartedServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host
		pr.SetXForwarded()
	}, FlushInterval: -1})
	proxy.EnableHTTP2 = true
	proxy.StartTLS()
	t.Cleanup(proxy.Close)
	tr := proxy.Client().Transport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, proxy.Listener.Addr().String())
	}
	defer tr.CloseIdleConnections()
	forging := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+srv.FirstKey)
		r.Header.Set("X-Forwarded-For", "198.51.100.66")
		r.Header.Set("Forwarded", "for=198.51.100.77;proto=http;host=evil.example.net")
		return tr.RoundTrip(r)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "proxy-tls-test", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: public + "/mcp", HTTPClient: &http.Client{Transport: forging}}, nil)
	if err != nil {
		t.Fatalf("connect through the proxy: %v", err)
	}
	defer s.Close()
	call := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", tool, err, res)
		}
		return resultMap(t, res)
	}
	cov := call("create_coverage", map[string]any{"title": "behind the proxy", "url": "https://example.com/p", "published_at": "2026-01-02T03:04:05Z", "type": "article"})["id"].(string)
	m := call("upload_media", map[string]any{"coverage_id": cov, "type": "document", "filename": "p.txt", "mime_type": "text/plain", "content_base64": "cHJveGllZA=="})
	got := call("get_media", map[string]any{"id": m["id"]})
	dl, _ := got["download_url"].(string)
	if !strings.HasPrefix(dl, public+"/media/") {
		t.Fatalf("download_url %q is not under the public URL", dl)
	}
	resp, err := (&http.Client{Transport: tr}).Get(dl)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "proxied" {
		t.Errorf("download through the proxy: %d %q", resp.StatusCode, body)
	}
	log := srv.stderr.String()
	if !strings.Contains(log, `"client":"127.0.0.1"`) || strings.Contains(log, "198.51.100.") {
		t.Errorf("the log does not name the client the proxy saw, or names a forged one:\n%s", log)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
