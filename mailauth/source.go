package mailauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/oauth2"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/mailboxes"
	"outreach/repo/outbox"
)

// Options configure the team mailbox's connection.
type Options struct {
	Provider Provider
	// Address is the team mailbox's address (the IMAP user); the account
	// signed in at the provider must be this one.
	Address string
	// PublicURL is the service's public base URL: the provider returns to
	// PublicURL + CallbackPath.
	PublicURL string
	Key       *Key
	// HTTPClient makes the requests to the provider (default: one with a
	// 30 s timeout).
	HTTPClient *http.Client
	// Margin: an access token is refreshed this long before it expires
	// (default 5 minutes; at most a third of the token's life).
	Margin time.Duration
	// MaxBackoff bounds the wait between attempts when the provider cannot
	// be reached (default 5 minutes).
	MaxBackoff time.Duration
	Log        zerolog.Logger
}

// Mailbox is the team mailbox's connection in this process: the one token
// source of the IMAP sync and the SMTP sending, the refresh loop, and the
// sign-in flows under way.
type Mailbox struct {
	store *repo.Store
	opts  Options
	// cfg is the provider's client, made once: it remembers how the
	// provider takes the client's credentials after the first answer.
	cfg *oauth2.Config

	mu       sync.Mutex // held while a token is refreshed: one refresh at a time
	tok      *oauth2.Token
	obtained time.Time

	smu     sync.Mutex
	problem string
	since   time.Time

	wake chan struct{}

	fmu   sync.Mutex
	flows map[string]*flow
	links map[string]*link
}

// New returns the mailbox connection for opts.
func New(store *repo.Store, opts Options) (*Mailbox, error) {
	p, err := opts.Provider.Resolve()
	if err != nil {
		return nil, err
	}
	opts.Provider = p
	opts.Address = strings.ToLower(strings.TrimSpace(opts.Address))
	if opts.Address == "" || !strings.Contains(opts.Address, "@") {
		return nil, fmt.Errorf("the team mailbox's address %q: want the mailbox's email address as its user (OUTREACH_IMAP_USER)", opts.Address)
	}
	if opts.Key == nil {
		return nil, errors.New("the mailbox key is not set")
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if opts.Margin <= 0 {
		opts.Margin = 5 * time.Minute
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Minute
	}
	m := &Mailbox{store: store, opts: opts, wake: make(chan struct{}, 1), flows: map[string]*flow{}, links: map[string]*link{}}
	m.cfg = opts.Provider.config(m.redirect())
	return m, nil
}

// Address is the team mailbox's address.
func (m *Mailbox) Address() string { return m.opts.Address }

// Provider is the configured provider's name.
func (m *Mailbox) Provider() string { return m.opts.Provider.Name }

// DisconnectedError is the answer of the token source while the mailbox is
// not connected: the sync and the sending wait (nothing is marked failed).
type DisconnectedError struct{ Reason string }

func (e *DisconnectedError) Error() string {
	return "the team mailbox is not connected (" + e.Reason + "): the sync and pitch sending wait until an admin connects it (outreach mailbox connect, see docs/connect.md)"
}

// IsDisconnected reports whether err says the mailbox is not connected.
func IsDisconnected(err error) bool {
	var d *DisconnectedError
	return errors.As(err, &d)
}

func (m *Mailbox) ctx(ctx context.Context) context.Context {
	ctx = context.WithValue(ctx, oauth2.HTTPClient, m.opts.HTTPClient)
	return audit.WithActor(ctx, repo.SystemActor("mailbox_token"))
}

// early is how long before its expiry an access token is no longer handed
// out (a connection made with it must still authenticate); a quarter of its
// life for a token that lives less than 40 s.
const early = 10 * time.Second

// AccessToken returns an access token for the mailbox, refreshing it when
// it is about to expire. While the provider cannot be reached the current
// token is used until it expires. A mailbox not connected answers a
// *DisconnectedError.
func (m *Mailbox) AccessToken(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tok != nil && time.Until(m.tok.Expiry) > min(early, m.tok.Expiry.Sub(m.obtained)/4) {
		return m.tok.AccessToken, nil
	}
	if err := m.refreshLocked(ctx); err != nil {
		return "", err
	}
	return m.tok.AccessToken, nil
}

// Refresh refreshes the access token now.
func (m *Mailbox) Refresh(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refreshLocked(ctx)
}

// refreshLocked asks the provider for a new access token with the stored
// refresh token; m.mu is held.
func (m *Mailbox) refreshLocked(ctx context.Context) error {
	ctx = m.ctx(ctx)
	conn, err := mailboxes.Of(m.store).Connection(ctx, m.opts.Address)
	if err != nil {
		return err
	}
	if conn == nil {
		m.tok = nil
		return &DisconnectedError{Reason: "never connected"}
	}
	if conn.Status != mailboxes.StatusConnected {
		m.tok = nil
		return &DisconnectedError{Reason: conn.Reason}
	}
	rt, err := m.opts.Key.Open(m.opts.Address, conn.RefreshSealed)
	if err != nil {
		// The key file was replaced (or the record copied from another
		// store): the token can never be opened; an admin connects again.
		m.tok = nil
		reason := "the kept refresh token does not open with this service's mailbox key (the key file was replaced)"
		if derr := m.disconnect(ctx, reason); derr != nil {
			return derr
		}
		return &DisconnectedError{Reason: reason}
	}
	cfg := m.cfg
	t, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: rt}).Token()
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && refused[re.ErrorCode] {
		// Another instance on the same database may have rotated the token
		// meanwhile: refused only if the token kept is still the one sent.
		if again, gerr := mailboxes.Of(m.store).Connection(ctx, m.opts.Address); gerr == nil && again != nil &&
			again.Status == mailboxes.StatusConnected && again.RefreshSealed != conn.RefreshSealed {
			if rt2, oerr := m.opts.Key.Open(m.opts.Address, again.RefreshSealed); oerr == nil {
				rt = rt2
				t, err = cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: rt}).Token()
			}
		}
	}
	if err != nil {
		return m.refreshFailed(ctx, err)
	}
	m.tok, m.obtained = t, time.Now()
	m.setProblem("")
	if t.RefreshToken != "" && t.RefreshToken != rt {
		if _, err := mailboxes.Of(m.store).Rotate(ctx, m.opts.Address, m.opts.Key.Seal(m.opts.Address, t.RefreshToken)); err != nil {
			m.opts.Log.Error().Err(err).Msg("mailbox: the provider rotated the refresh token, and the new one could not be kept; the next refresh may be refused")
			m.setProblem("the provider gave a new refresh token that could not be kept: " + err.Error())
		}
	}
	return nil
}

// refused are the token endpoint's errors that say the refresh token is no
// good any more (revoked, expired, password changed, consent withdrawn).
var refused = map[string]bool{"invalid_grant": true, "interaction_required": true, "consent_required": true, "access_denied": true, "login_required": true}

// refreshFailed sorts a failed refresh: refused (the mailbox is
// disconnected, the admins notified), the provider unreachable or failing
// (retried; the current token serves until it expires), or an answer that
// is not a token response (a problem in the status).
func (m *Mailbox) refreshFailed(ctx context.Context, err error) error {
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &re) && refused[re.ErrorCode]:
		reason := "the provider refused the refresh token: " + re.ErrorCode
		if re.ErrorDescription != "" {
			reason += ": " + firstLine(re.ErrorDescription)
		}
		m.tok = nil
		if derr := m.disconnect(ctx, reason); derr != nil {
			return derr
		}
		return &DisconnectedError{Reason: reason}
	case errors.As(err, &re) && re.ErrorCode != "":
		m.setProblem(fmt.Sprintf("the provider refused the token request (%s): %s %s; check the client id and secret (see docs/connect.md)", re.Response.Status, re.ErrorCode, firstLine(re.ErrorDescription)))
	case errors.As(err, &re):
		m.setProblem(fmt.Sprintf("the provider answered %s to a refresh; retried with backoff", re.Response.Status))
	case isNetwork(err):
		m.setProblem("the provider could not be reached for a refresh (" + err.Error() + "); retried with backoff")
	default:
		m.setProblem("the provider answered something that is not a token response (" + err.Error() + "); retried with backoff")
	}
	if m.tok != nil && time.Now().Before(m.tok.Expiry) {
		return nil // the current token serves until it expires
	}
	return fmt.Errorf("no access token for the team mailbox: %s", m.Problem())
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if len(l) > 300 {
		l = l[:300]
	}
	return l
}

func isNetwork(err error) bool {
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded)
}

// disconnect marks the mailbox disconnected for reason and, when that
// changed it, notifies the admins.
func (m *Mailbox) disconnect(ctx context.Context, reason string) error {
	c, changed, err := mailboxes.Of(m.store).Disconnect(ctx, m.opts.Address, reason)
	if err != nil {
		return err
	}
	m.setProblem("")
	if !changed {
		return nil
	}
	m.opts.Log.Warn().Str("mailbox", m.opts.Address).Str("reason", reason).Msg("mailbox disconnected: the sync and pitch sending wait until an admin connects it again")
	text := fmt.Sprintf("The team mailbox %s is disconnected: %s. The inbox sync and pitch sending are paused (scheduled pitches wait); an admin connects it again with `outreach mailbox connect --provider %s` or from the service's mailbox page.", m.opts.Address, reason, m.opts.Provider.Name)
	at := ""
	if c.DisconnectedAt != nil {
		at = c.DisconnectedAt.Format(time.RFC3339Nano)
	}
	if _, err := outbox.Of(m.store).NotifyAdmins(ctx, mailboxes.EventDisconnected, "Team mailbox disconnected", text,
		map[string]any{"mailbox": m.opts.Address, "reason": reason}, m.opts.Address+"/"+at); err != nil {
		m.opts.Log.Error().Err(err).Msg("mailbox disconnected: the admins could not be notified")
	}
	return nil
}

func (m *Mailbox) setProblem(p string) {
	m.smu.Lock()
	defer m.smu.Unlock()
	if p != "" && m.problem == "" {
		m.since = time.Now().UTC()
	}
	m.problem = p
}

// Problem is what went wrong at the last refresh, or "".
func (m *Mailbox) Problem() string {
	m.smu.Lock()
	defer m.smu.Unlock()
	return m.problem
}

// Status is where the team mailbox's connection stands.
type Status struct {
	Provider string `json:"provider"`
	Address  string `json:"address"`
	// State: connected, disconnected, or not_connected (never connected).
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Problem: the last refresh failed for a reason that does not
	// disconnect (the provider unreachable, a garbled answer); retried.
	Problem          string     `json:"problem,omitempty"`
	ProblemSince     *time.Time `json:"problem_since,omitempty"`
	ConnectedAt      *time.Time `json:"connected_at,omitempty"`
	DisconnectedAt   *time.Time `json:"disconnected_at,omitempty"`
	AccessTokenUntil *time.Time `json:"access_token_until,omitempty"`
	// Paused: the sync and pitch sending wait for a connection.
	Paused bool `json:"paused"`
}

// Status returns where the connection stands.
func (m *Mailbox) Status(ctx context.Context) (Status, error) {
	st := Status{Provider: m.opts.Provider.Name, Address: m.opts.Address, State: "not_connected", Paused: true}
	c, err := mailboxes.Of(m.store).Connection(ctx, m.opts.Address)
	if err != nil {
		return st, err
	}
	if c != nil {
		st.State, st.Reason, st.ConnectedAt, st.DisconnectedAt = c.Status, c.Reason, c.ConnectedAt, c.DisconnectedAt
		st.Paused = c.Status != mailboxes.StatusConnected
	}
	m.smu.Lock()
	st.Problem = m.problem
	if m.problem != "" {
		since := m.since
		st.ProblemSince = &since
	}
	m.smu.Unlock()
	if m.mu.TryLock() {
		if m.tok != nil && !st.Paused {
			e := m.tok.Expiry.UTC()
			st.AccessTokenUntil = &e
		}
		m.mu.Unlock()
	}
	return st, nil
}

// Ready reports whether the mailbox is connected (the sending checks it
// before it takes a pitch).
func (m *Mailbox) Ready(ctx context.Context) (bool, string) {
	c, err := mailboxes.Of(m.store).Connection(ctx, m.opts.Address)
	if err != nil {
		return false, err.Error()
	}
	if c == nil {
		return false, "never connected"
	}
	return c.Status == mailboxes.StatusConnected, c.Reason
}

// Run keeps the access token fresh until ctx ends: it refreshes it a
// margin before it expires, retries a provider it cannot reach with
// backoff (1 s doubling to MaxBackoff, with jitter), and waits for a
// connection while the mailbox is not connected.
func (m *Mailbox) Run(ctx context.Context) {
	backoff := time.Duration(0)
	err := m.Refresh(ctx) // at start: the token kept still works, or the status says why
	for {
		var wait time.Duration
		switch {
		case ctx.Err() != nil:
			return
		case IsDisconnected(err):
			backoff, wait = 0, -1 // until a connection wakes the loop
		case err != nil || m.Problem() != "":
			backoff = min(max(2*backoff, time.Second), m.opts.MaxBackoff)
			wait = backoff/2 + rand.N(backoff/2+1)
			m.opts.Log.Warn().Err(err).Str("problem", m.Problem()).Dur("retry_in", wait).Msg("mailbox token refresh")
		default:
			backoff = 0
			wait = m.untilRefresh()
		}
		var timer *time.Timer
		var fire <-chan time.Time
		if wait >= 0 {
			timer = time.NewTimer(wait)
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
			err = nil // connected just now, with a fresh token: wait for its expiry
		case <-fire:
			err = m.Refresh(ctx)
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// untilRefresh is how long the current token serves before the loop
// refreshes it.
func (m *Mailbox) untilRefresh() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tok == nil || m.tok.Expiry.IsZero() {
		return m.opts.Margin
	}
	life := m.tok.Expiry.Sub(m.obtained)
	margin := min(m.opts.Margin, life/3)
	return max(time.Until(m.tok.Expiry)-margin, time.Second)
}

func (m *Mailbox) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Disconnect revokes the refresh token at the provider (where it has a
// revocation endpoint) and forgets the tokens; the sync and sending wait
// until an admin connects again. It says what it did.
func (m *Mailbox) Disconnect(ctx context.Context, reason string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := mailboxes.Of(m.store).Connection(ctx, m.opts.Address)
	if err != nil {
		return "", err
	}
	if c == nil || (c.Status != mailboxes.StatusConnected && c.RefreshSealed == "") {
		return "", repo.Errorf(repo.CodeFailedPrecondition, "the team mailbox %s is not connected; nothing to disconnect", m.opts.Address)
	}
	said := "the tokens are forgotten"
	if rt, oerr := m.opts.Key.Open(m.opts.Address, c.RefreshSealed); oerr == nil && m.opts.Provider.RevokeURL != "" {
		if rerr := m.revoke(ctx, rt); rerr != nil {
			said = "the provider did not confirm the revocation (" + rerr.Error() + "); the tokens are forgotten here: remove the app's access in the account's security settings"
		} else {
			said = "the refresh token is revoked at the provider and the tokens are forgotten"
		}
	} else if m.opts.Provider.RevokeURL == "" {
		said = "the provider has no revocation endpoint configured, so the tokens are forgotten here only: remove the app's access in the account's settings (Microsoft: My Apps, or the enterprise application's users in Entra ID)"
	}
	if _, _, err := mailboxes.Of(m.store).Disconnect(ctx, m.opts.Address, reason); err != nil {
		return "", err
	}
	m.tok = nil
	m.setProblem("")
	return said, nil
}

// revoke revokes token at the provider (RFC 7009).
func (m *Mailbox) revoke(ctx context.Context, token string) error {
	form := url.Values{"token": {token}, "token_type_hint": {"refresh_token"}}
	if m.opts.Provider.ClientSecret == "" {
		form.Set("client_id", m.opts.Provider.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.opts.Provider.RevokeURL, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if m.opts.Provider.ClientSecret != "" {
		req.SetBasicAuth(url.QueryEscape(m.opts.Provider.ClientID), url.QueryEscape(m.opts.Provider.ClientSecret))
	}
	resp, err := m.opts.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("the revocation endpoint answered %s: %s", resp.Status, firstLine(string(b)))
	}
	return nil
}
