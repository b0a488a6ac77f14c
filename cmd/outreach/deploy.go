package main

import (
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"

	"outreach/server"
)

// deployConfig is how the service is reached: its public URL, the proxies
// in front of it, and TLS.
type deployConfig struct {
	publicURL, trustedProxies                           string
	tlsCert, tlsKey, acmeHost, acmeEmail, acmeDirectory string
	// metricsListen: a listener of its own for /metrics; metricsToken
	// (the environment only) guards it, and puts /metrics on --addr too.
	metricsListen, metricsToken string
}

func (d *deployConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&d.publicURL, "public-url", d.publicURL, "base URL clients reach the service at, e.g. https://outreach.example.com: signed media URLs, the start banner and the accepted Host/Origin are built on it (default: from each request)")
	fs.StringVar(&d.tlsCert, "tls-cert", env("OUTREACH_TLS_CERT", ""), "serve HTTPS with this PEM certificate chain (with --tls-key); read again when the files change")
	fs.StringVar(&d.tlsKey, "tls-key", env("OUTREACH_TLS_KEY", ""), "the PEM private key of --tls-cert")
	fs.StringVar(&d.acmeHost, "acme-host", env("OUTREACH_ACME_HOST", ""), "serve HTTPS with certificates obtained automatically over ACME (TLS-ALPN-01, so --addr must be reachable on port 443) for these public host names, comma-separated; kept in DATA/acme")
	fs.StringVar(&d.acmeEmail, "acme-email", env("OUTREACH_ACME_EMAIL", ""), "contact address given to the ACME CA (expiry and policy notices)")
	fs.StringVar(&d.acmeDirectory, "acme-directory", env("OUTREACH_ACME_DIRECTORY", ""), "the ACME CA's directory URL (default: Let's Encrypt's production CA)")
	fs.StringVar(&d.metricsListen, "metrics-listen", env("OUTREACH_METRICS_LISTEN", ""), "serve Prometheus metrics at /metrics on this address of its own, e.g. 127.0.0.1:9090 (default: no metrics, unless OUTREACH_METRICS_TOKEN is set)")
	d.metricsToken = os.Getenv("OUTREACH_METRICS_TOKEN")
	fs.StringVar(&d.trustedProxies, "trusted-proxies", env("OUTREACH_TRUSTED_PROXIES", ""), "comma-separated CIDRs or addresses of reverse proxies whose Forwarded / X-Forwarded-For/-Proto/-Host headers are believed (client address, scheme, host); from any other peer they are ignored")
}

// serverConfig checks the settings and returns the HTTP edge's configuration.
func (d deployConfig) serverConfig() (server.Config, error) {
	var c server.Config
	var err error
	if c.PublicURL, err = server.ParsePublicURL("--public-url (OUTREACH_PUBLIC_URL)", d.publicURL); err != nil {
		return c, err
	}
	if c.TrustedProxies, err = server.ParseTrustedProxies("--trusted-proxies (OUTREACH_TRUSTED_PROXIES)", d.trustedProxies); err != nil {
		return c, err
	}
	if d.metricsToken != "" && len(d.metricsToken) < 16 {
		return c, errors.New("OUTREACH_METRICS_TOKEN: want at least 16 characters, e.g. from openssl rand -hex 32")
	}
	if d.metricsListen == "" {
		c.MetricsToken = d.metricsToken // /metrics on --addr, behind the token
	}
	return c, nil
}

// metricsOn reports whether the service exports metrics anywhere.
func (d deployConfig) metricsOn() bool { return d.metricsListen != "" || d.metricsToken != "" }

// tlsOptions is the TLS configuration; the ACME cache lives in the data
// directory.
func (d deployConfig) tlsOptions(data string) server.TLSOptions {
	o := server.TLSOptions{CertFile: d.tlsCert, KeyFile: d.tlsKey, ACMEEmail: d.acmeEmail, ACMEDirectory: d.acmeDirectory}
	for _, h := range strings.Split(d.acmeHost, ",") {
		if h = strings.TrimSpace(h); h != "" {
			o.ACMEHosts = append(o.ACMEHosts, h)
		}
	}
	if len(o.ACMEHosts) > 0 {
		o.ACMECache = filepath.Join(data, "acme")
	}
	return o
}

// bannerBase is the base URL the start banner shows clients: the public
// URL, else the ACME host name (its certificate is for that name alone),
// else the listen address.
func bannerBase(public string, o server.TLSOptions, ln net.Addr) string {
	if public != "" {
		return public
	}
	if len(o.ACMEHosts) > 0 {
		host := o.ACMEHosts[0]
		if _, port, err := net.SplitHostPort(ln.String()); err == nil && port != "443" {
			host = net.JoinHostPort(host, port)
		}
		return "https://" + host
	}
	return server.ListenURL(ln, o.Enabled())
}
