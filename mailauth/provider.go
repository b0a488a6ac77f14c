// Package mailauth connects the team mailbox by signing in at its provider
// (Google Workspace, Microsoft 365, or any OAuth 2.0 provider by its
// endpoints) and keeps its access token fresh for the IMAP sync and the
// SMTP sending of pitches, which share one token source per process.
//
// The flows (authorization code with PKCE and state, and the device code
// flow) and every token request go through golang.org/x/oauth2. The refresh
// token is sealed (AES-256-GCM) under the mailbox key, which is never in the
// store, and kept through the write path (package repo/mailboxes); access
// tokens live in memory only. A refresh the provider refuses marks the
// mailbox disconnected, notifies the admins and pauses the sync and the
// sending until an admin connects again; a provider that cannot be reached
// is retried with backoff while the current access token lasts.
package mailauth

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/endpoints"
)

// Providers by name.
const (
	Google    = "google"
	Microsoft = "microsoft"
)

// Provider is the configured OAuth 2.0 provider of the team mailbox.
type Provider struct {
	// Name: google, microsoft, or a name of the operator's choosing for a
	// provider configured by its endpoints.
	Name         string
	ClientID     string
	ClientSecret string
	// Tenant is Microsoft's directory (tenant id or domain; default
	// "organizations").
	Tenant string
	// Endpoints (set for google and microsoft; given for any other).
	AuthURL, TokenURL, DeviceAuthURL, RevokeURL string
	// Scopes asked for (the provider's defaults for google and microsoft).
	Scopes []string
	// AuthParams are extra parameters of the authorization request.
	AuthParams map[string]string
}

// Scopes IMAP and SMTP need, with those that name the account signed in
// (openid, email: the ID token says which mailbox was connected).
var (
	GoogleScopes    = []string{"https://mail.google.com/", "openid", "email"}
	MicrosoftScopes = []string{"https://outlook.office.com/IMAP.AccessAsUser.All", "https://outlook.office.com/SMTP.Send", "offline_access", "openid", "email"}
)

// GoogleRevokeURL is Google's token revocation endpoint.
const GoogleRevokeURL = "https://oauth2.googleapis.com/revoke"

// Resolve fills the endpoints and scopes of google and microsoft and checks
// the provider, saying what is missing or wrong.
func (p Provider) Resolve() (Provider, error) {
	switch p.Name {
	case Google:
		e := endpoints.Google
		p.AuthURL, p.TokenURL, p.DeviceAuthURL = orDefault(p.AuthURL, e.AuthURL), orDefault(p.TokenURL, e.TokenURL), orDefault(p.DeviceAuthURL, e.DeviceAuthURL)
		p.RevokeURL = orDefault(p.RevokeURL, GoogleRevokeURL)
		if len(p.Scopes) == 0 {
			p.Scopes = GoogleScopes
		}
		if p.AuthParams == nil {
			// A refresh token at every consent, also when one was given before.
			p.AuthParams = map[string]string{"access_type": "offline", "prompt": "consent"}
		}
	case Microsoft:
		if p.Tenant == "" {
			p.Tenant = "organizations"
		}
		if strings.ContainsAny(p.Tenant, "/?#") {
			return p, fmt.Errorf("OUTREACH_MAILBOX_TENANT=%q: want a tenant id (a UUID) or domain, e.g. example.onmicrosoft.com", p.Tenant)
		}
		e := endpoints.AzureAD(p.Tenant)
		p.AuthURL, p.TokenURL, p.DeviceAuthURL = orDefault(p.AuthURL, e.AuthURL), orDefault(p.TokenURL, e.TokenURL), orDefault(p.DeviceAuthURL, e.DeviceAuthURL)
		if len(p.Scopes) == 0 {
			p.Scopes = MicrosoftScopes
		}
	case "":
		return p, errors.New("OUTREACH_MAILBOX_PROVIDER is not set: use google, microsoft, or a name of your own with OUTREACH_MAILBOX_AUTH_URL and OUTREACH_MAILBOX_TOKEN_URL")
	default:
		if p.AuthURL == "" || p.TokenURL == "" {
			return p, fmt.Errorf("mailbox provider %q is neither google nor microsoft: give its endpoints, OUTREACH_MAILBOX_AUTH_URL and OUTREACH_MAILBOX_TOKEN_URL", p.Name)
		}
		if len(p.Scopes) == 0 {
			return p, fmt.Errorf("mailbox provider %q: give the scopes IMAP and SMTP need at it, OUTREACH_MAILBOX_SCOPES (space-separated)", p.Name)
		}
	}
	for name, u := range map[string]string{"OUTREACH_MAILBOX_AUTH_URL": p.AuthURL, "OUTREACH_MAILBOX_TOKEN_URL": p.TokenURL,
		"OUTREACH_MAILBOX_DEVICE_AUTH_URL": p.DeviceAuthURL, "OUTREACH_MAILBOX_REVOKE_URL": p.RevokeURL} {
		if u == "" {
			continue
		}
		pu, err := url.Parse(u)
		if err != nil || pu.Host == "" || (pu.Scheme != "https" && !(pu.Scheme == "http" && loopbackHost(pu.Hostname()))) {
			return p, fmt.Errorf("%s=%q: want an https URL (http only on a loopback address)", name, u)
		}
	}
	if p.ClientID == "" {
		return p, errors.New("the mailbox provider's client id is not set: OUTREACH_MAILBOX_CLIENT_ID (see docs/connect.md, the app registration)")
	}
	return p, nil
}

func orDefault(v, d string) string {
	if v != "" {
		return v
	}
	return d
}

func loopbackHost(h string) bool {
	return h == "localhost" || h == "127.0.0.1" || h == "::1"
}

// config is the provider's oauth2 configuration, redirecting to redirect.
func (p Provider) config(redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: p.ClientID, ClientSecret: p.ClientSecret, RedirectURL: redirect, Scopes: p.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: p.AuthURL, TokenURL: p.TokenURL, DeviceAuthURL: p.DeviceAuthURL}}
}

// ProviderFromEnv reads the mailbox provider from the environment; ok is
// false when OUTREACH_MAILBOX_PROVIDER is unset (no sign-in connection).
func ProviderFromEnv() (p Provider, ok bool, err error) {
	p.Name = strings.ToLower(strings.TrimSpace(os.Getenv("OUTREACH_MAILBOX_PROVIDER")))
	if p.Name == "" {
		return p, false, nil
	}
	p.ClientID = strings.TrimSpace(os.Getenv("OUTREACH_MAILBOX_CLIENT_ID"))
	p.ClientSecret = os.Getenv("OUTREACH_MAILBOX_CLIENT_SECRET")
	if f := os.Getenv("OUTREACH_MAILBOX_CLIENT_SECRET_FILE"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return p, true, fmt.Errorf("OUTREACH_MAILBOX_CLIENT_SECRET_FILE: %w", err)
		}
		p.ClientSecret = strings.TrimSpace(string(b))
	}
	p.Tenant = strings.TrimSpace(os.Getenv("OUTREACH_MAILBOX_TENANT"))
	p.AuthURL, p.TokenURL = os.Getenv("OUTREACH_MAILBOX_AUTH_URL"), os.Getenv("OUTREACH_MAILBOX_TOKEN_URL")
	p.DeviceAuthURL, p.RevokeURL = os.Getenv("OUTREACH_MAILBOX_DEVICE_AUTH_URL"), os.Getenv("OUTREACH_MAILBOX_REVOKE_URL")
	p.Scopes = strings.Fields(os.Getenv("OUTREACH_MAILBOX_SCOPES"))
	p, err = p.Resolve()
	return p, true, err
}
