package main

import (
	"flag"

	"outreach/server"
)

// deployConfig is how the service is reached: its public URL, the proxies
// in front of it, and TLS.
type deployConfig struct {
	publicURL, trustedProxies string
}

func (d *deployConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&d.publicURL, "public-url", d.publicURL, "base URL clients reach the service at, e.g. https://outreach.example.com: signed media URLs, the start banner and the accepted Host/Origin are built on it (default: from each request)")
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
	return c, nil
}
