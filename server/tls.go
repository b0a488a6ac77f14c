package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// TLSOptions configure HTTPS in the service: certificate files, or
// certificates obtained automatically over ACME (Let's Encrypt by default)
// for public host names. The zero value is plain HTTP.
type TLSOptions struct {
	// CertFile and KeyFile are a PEM certificate chain and its private key.
	// They are read again when either file changes (checked at each TLS
	// handshake, a stat of each), so a renewed pair is used without a
	// restart; a pair that does not load keeps the previous one.
	CertFile, KeyFile string
	// ACMEHosts are the host names certificates are obtained for (TLS-ALPN-01:
	// the listener must be reachable from the internet on port 443 under
	// each name). A handshake for any other name is refused.
	ACMEHosts []string
	// ACMEEmail is the contact address given to the CA (optional).
	ACMEEmail string
	// ACMEDirectory is the CA's directory URL; empty: Let's Encrypt's.
	ACMEDirectory string
	// ACMECache is the directory certificates and the account key are kept
	// in (made with mode 0700).
	ACMECache string
}

// Enabled reports whether the service serves HTTPS.
func (o TLSOptions) Enabled() bool {
	return o.CertFile != "" || o.KeyFile != "" || len(o.ACMEHosts) > 0
}

// Check refuses contradictory or malformed settings, naming the flag,
// without touching a file.
func (o TLSOptions) Check() error {
	files := o.CertFile != "" || o.KeyFile != ""
	switch {
	case (o.CertFile == "") != (o.KeyFile == ""):
		return errors.New("--tls-cert and --tls-key go together: give both files (the certificate chain and its private key, PEM), or neither")
	case files && len(o.ACMEHosts) > 0:
		return errors.New("--tls-cert/--tls-key and --acme-host exclude each other: give certificate files, or let the service obtain certificates for --acme-host, not both")
	case len(o.ACMEHosts) == 0 && (o.ACMEEmail != "" || o.ACMEDirectory != ""):
		return errors.New("--acme-email and --acme-directory need --acme-host: the public host name(s) to obtain certificates for")
	}
	for _, h := range o.ACMEHosts {
		if err := checkACMEHost(h); err != nil {
			return err
		}
	}
	if o.ACMEEmail != "" && (!strings.Contains(o.ACMEEmail, "@") || strings.ContainsAny(o.ACMEEmail, " ,<>:/")) {
		return fmt.Errorf("--acme-email %q: want one e-mail address, e.g. ops@example.com", o.ACMEEmail)
	}
	if o.ACMEDirectory != "" {
		u, err := url.Parse(o.ACMEDirectory)
		loopbackHTTP := err == nil && u.Scheme == "http" && isLoopback(u.Hostname())
		if err != nil || u.Host == "" || (u.Scheme != "https" && !loopbackHTTP) {
			return fmt.Errorf("--acme-directory %q: want the CA's https:// directory URL (http:// only for a CA on a loopback address), e.g. %s", o.ACMEDirectory, autocert.DefaultACMEDirectory)
		}
	}
	if len(o.ACMEHosts) > 0 && o.ACMECache == "" {
		return errors.New("ACME needs a cache directory for its account key and certificates")
	}
	return nil
}

// checkACMEHost accepts a DNS name a public CA can issue for.
func checkACMEHost(h string) error {
	bad := func(why string) error {
		return fmt.Errorf("--acme-host %q: %s; want a public DNS name clients reach the service at, e.g. outreach.example.com (comma-separated for several)", h, why)
	}
	switch {
	case h == "":
		return bad("empty")
	case strings.Contains(h, "://") || strings.ContainsAny(h, "/:@ "):
		return bad("a host name alone, without scheme, port or path")
	case strings.Contains(h, "*"):
		return bad("wildcards need the DNS challenge, which this service does not do")
	case strings.EqualFold(h, "localhost") || !strings.Contains(strings.Trim(h, "."), "."):
		return bad("not a public name")
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return bad("an IP address; certificates are obtained for names")
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return bad("not a valid DNS name")
		}
		for _, c := range label {
			if !(c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				return bad("not a valid DNS name (IDN names in their xn-- form)")
			}
		}
	}
	return nil
}

// TLSConfig returns the listener's TLS configuration: TLS 1.2 or later,
// HTTP/2 and HTTP/1.1. Certificate files are loaded now (an error names the
// flag); the ACME cache directory is made. Nothing is asked of a CA before
// the first handshake for a configured name.
func (o TLSOptions) TLSConfig(log zerolog.Logger) (*tls.Config, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	if o.CertFile != "" {
		r := &certReloader{certFile: o.CertFile, keyFile: o.KeyFile, certFlag: "--tls-cert", keyFlag: "--tls-key", log: log}
		if _, err := r.load(); err != nil {
			return nil, err
		}
		cfg.GetCertificate = r.get
		return cfg, nil
	}
	if err := os.MkdirAll(o.ACMECache, 0o700); err != nil {
		return nil, fmt.Errorf("ACME cache directory %s: %w", o.ACMECache, err)
	}
	if err := os.Chmod(o.ACMECache, 0o700); err != nil { // it holds the account's and the certificates' private keys
		return nil, fmt.Errorf("ACME cache directory %s: %w", o.ACMECache, err)
	}
	m := &autocert.Manager{
		Prompt:     autocert.AcceptTOS, // obtaining certificates over ACME means accepting the CA's terms; docs/operations.md says so
		Cache:      autocert.DirCache(o.ACMECache),
		HostPolicy: autocert.HostWhitelist(o.ACMEHosts...),
		Email:      o.ACMEEmail,
	}
	if o.ACMEDirectory != "" {
		m.Client = &acme.Client{DirectoryURL: o.ACMEDirectory}
	}
	get := m.GetCertificate
	cfg.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		c, err := get(hello)
		if err != nil {
			log.Warn().Err(err).Str("server_name", hello.ServerName).Msg("TLS: no certificate")
		}
		return c, err
	}
	cfg.NextProtos = append(cfg.NextProtos, acme.ALPNProto) // the TLS-ALPN-01 challenge
	return cfg, nil
}

// CertConfig is a TLS configuration (TLS 1.2 or later) serving the
// certificate pair of certFile and keyFile, read again when either
// changes, as TLSOptions' files are; certFlag and keyFlag name the
// settings in errors. Both files or neither.
func CertConfig(certFile, keyFile, certFlag, keyFlag string, log zerolog.Logger) (*tls.Config, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("%s and %s go together: give both files (the certificate chain and its private key, PEM), or neither", certFlag, keyFlag)
	}
	r := &certReloader{certFile: certFile, keyFile: keyFile, certFlag: certFlag, keyFlag: keyFlag, log: log}
	if _, err := r.load(); err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.get}, nil
}

// certReloader serves a certificate pair from files, read again when
// either file's size or modification time changes.
type certReloader struct {
	certFile, keyFile string
	certFlag, keyFlag string // the settings' names, for errors
	log               zerolog.Logger

	mu       sync.Mutex
	cert     *tls.Certificate
	certStat fileStamp
	keyStat  fileStamp
}

type fileStamp struct {
	size int64
	mod  time.Time
}

func stamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.Size(), fi.ModTime()}, nil
}

// load reads the pair; an error names the flags and what is wrong.
func (r *certReloader) load() (*tls.Certificate, error) {
	cs, err := stamp(r.certFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.certFlag, err)
	}
	ks, err := stamp(r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.keyFlag, err)
	}
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("%s %s / %s %s: %w (want a PEM certificate chain, leaf first, and the PEM private key of that leaf)", r.certFlag, r.certFile, r.keyFlag, r.keyFile, err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.certFlag, r.certFile, err)
	}
	c.Leaf = leaf
	ev := r.log.Info()
	if time.Now().After(leaf.NotAfter) {
		ev = r.log.Warn().Str("problem", "the certificate has expired: clients will refuse it")
	}
	ev.Str("subject", leaf.Subject.CommonName).Strs("names", leaf.DNSNames).Time("not_after", leaf.NotAfter).Msg("TLS certificate loaded")
	if fi, err := os.Stat(r.keyFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
		r.log.Warn().Str("file", r.keyFile).Str("mode", fi.Mode().Perm().String()).Msg("TLS: the private key file is readable by other users; chmod 600 it")
	}
	r.mu.Lock()
	r.cert, r.certStat, r.keyStat = &c, cs, ks
	r.mu.Unlock()
	return &c, nil
}

func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cs, err1 := stamp(r.certFile)
	ks, err2 := stamp(r.keyFile)
	r.mu.Lock()
	cur, changed := r.cert, err1 == nil && err2 == nil && (cs != r.certStat || ks != r.keyStat)
	if changed {
		// Mark the stamps seen, so that a pair that does not load is tried
		// again only after a further change, not at every handshake.
		r.certStat, r.keyStat = cs, ks
	}
	r.mu.Unlock()
	if !changed {
		return cur, nil
	}
	c, err := r.load()
	if err != nil {
		r.log.Error().Err(err).Msg("TLS: the changed certificate files do not load; serving the previous certificate")
		return cur, nil
	}
	return c, nil
}

// ListenURL is the base URL of a listener: https when TLS is on.
func ListenURL(addr net.Addr, tlsOn bool) string {
	if tlsOn {
		return "https://" + addr.String()
	}
	return "http://" + addr.String()
}
