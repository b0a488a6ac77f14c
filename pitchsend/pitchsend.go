// Package pitchsend sends approved pitches from the team mailbox over SMTP
// submission and keeps the record of every step through the store's write
// path (package repo holds the records and the guards).
//
// Delivery is at least once with a stable Message-ID. For each recipient
// the sender, holding the pitch under a lease it took through the write path
// (two instances never both hold it), checks the guards again, records the
// attempt with the Message-ID, runs the SMTP transaction, appends the sent
// copy to the mailbox's Sent folder over IMAP and records the outcome. A
// sender that stopped between the attempt and the outcome leaves the
// recipient "sending"; whoever takes the pitch next looks for the
// Message-ID in the Sent folder: found, the recipient is recorded sent
// without a second copy; not found, it is sent again with the same
// Message-ID and the record says that a second copy may have gone.
package pitchsend

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	gomail "github.com/wneessen/go-mail"

	"outreach/audit"
	"outreach/mailsync"
	"outreach/repo"
	"outreach/repo/pitches"
)

// Security of the SMTP connection.
const (
	SecurityTLS      = "tls"      // implicit TLS (port 465)
	SecurityStartTLS = "starttls" // STARTTLS, mandatory (port 587)
	SecurityPlain    = "plain"    // no TLS: loopback servers only
)

// Config is the team mailbox's outgoing side.
type Config struct {
	// Addr is the submission server's host:port.
	Addr     string
	Security string
	// Auth is password (PLAIN/LOGIN, the server's choice) or xoauth2;
	// User logs in; Password, or Token / TokenFile (re-read at every
	// connection) for XOAUTH2 (Gmail, Microsoft 365).
	Auth      string
	User      string
	Password  string
	Token     string
	TokenFile string
	// Mailbox, when set, is the mailbox connected by signing in (package
	// mailauth): its access token authenticates (Auth xoauth2), and while
	// it is not connected no pitch is taken: scheduled pitches wait.
	Mailbox Mailbox
	// From is the sender, "Name <address>" or an address.
	From string
	// PublicURL is the service's public base URL; the unsubscribe link
	// points at PublicURL + UnsubscribePath.
	PublicURL string
	// SentMailbox is the IMAP folder the sent copy is appended to
	// (default "Sent"); Inbox reaches it (nil: no copy kept, no
	// reconciliation possible).
	SentMailbox string
	Inbox       *mailsync.Syncer
	// TLSConfig overrides the TLS settings (tests with their own CA).
	TLSConfig *tls.Config
	// Timeout bounds the SMTP dial and each command (default 60s).
	Timeout time.Duration
	// Lease is how long a sender holds a pitch without word (default 2m).
	Lease time.Duration
	// Interval is the delivery worker's poll period (default 30s).
	Interval time.Duration
	// Instance names this sender in the claims (default host and pid).
	Instance string
	// AfterSend, for tests, runs after a message went and its copy is in
	// the Sent folder, before the outcome is recorded: an error stops the
	// delivery there, as a crash would.
	AfterSend func(contactID string) error
}

// Mailbox is the team mailbox connected by signing in, as the sender needs
// it.
type Mailbox interface {
	AccessToken(ctx context.Context) (string, error)
	Ready(ctx context.Context) (bool, string)
}

// UnsubscribePath is the service's one-click unsubscribe endpoint.
const UnsubscribePath = "/unsubscribe"

// Check refuses a configuration that cannot work, saying why.
func (c Config) Check() error {
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("SMTP address %q: want host:port, e.g. smtp.gmail.com:587", c.Addr)
	}
	switch c.Security {
	case SecurityTLS, SecurityStartTLS:
	case SecurityPlain:
		ip := net.ParseIP(host)
		if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("SMTP security plain is allowed only for a loopback server, not %s: use tls or starttls", host)
		}
	default:
		return fmt.Errorf("SMTP security %q: use starttls, tls or plain (loopback only)", c.Security)
	}
	switch c.Auth {
	case "password":
		if c.User == "" || c.Password == "" {
			return errors.New("SMTP auth password needs OUTREACH_SMTP_USER and OUTREACH_SMTP_PASSWORD")
		}
	case "xoauth2":
		if c.User == "" || (c.Token == "" && c.TokenFile == "" && c.Mailbox == nil) {
			return errors.New("SMTP auth xoauth2 needs OUTREACH_SMTP_USER and an OAuth2 token (or token file)")
		}
	case "none":
	default:
		return fmt.Errorf("SMTP auth %q: use password, xoauth2 or none", c.Auth)
	}
	if _, err := mail.ParseAddress(c.From); err != nil {
		return fmt.Errorf("SMTP sender %q: want an address or \"Name <address>\"", c.From)
	}
	if c.PublicURL == "" {
		return errors.New("sending pitches needs the public base URL (--public-url) for the unsubscribe link")
	}
	return nil
}

// Sender sends pitches.
type Sender struct {
	store *repo.Store
	cfg   Config
	from  *mail.Address
	log   zerolog.Logger
	mu    sync.Mutex
}

// New returns a sender for cfg, checked.
func New(store *repo.Store, cfg Config, log zerolog.Logger) (*Sender, error) {
	if cfg.Auth == "" {
		cfg.Auth = "password"
		if cfg.Token != "" || cfg.TokenFile != "" || cfg.Mailbox != nil {
			cfg.Auth = "xoauth2"
		}
	}
	if cfg.Security == "" {
		cfg.Security = SecurityStartTLS
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.SentMailbox == "" {
		cfg.SentMailbox = "Sent"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 2 * time.Minute
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 30 * time.Second
	}
	if cfg.Instance == "" {
		h, _ := os.Hostname()
		cfg.Instance = h + ":" + strconv.Itoa(os.Getpid()) + ":" + randHex(4)
	}
	from, _ := mail.ParseAddress(cfg.From)
	return &Sender{store: store, cfg: cfg, from: from, log: log}, nil
}

// From is the sender address.
func (s *Sender) From() string { return s.from.String() }

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Actor is who the delivery worker writes as.
func Actor() audit.Actor { return repo.SystemActor("pitch delivery") }

// Run sends due pitches every Interval until ctx ends.
func (s *Sender) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		s.RunOnce(audit.WithActor(ctx, Actor()))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunOnce sends every pitch that is due now. While the mailbox connected
// by signing in is not connected, it takes none: they wait.
func (s *Sender) RunOnce(ctx context.Context) {
	if ok, _ := s.ready(ctx); !ok {
		return
	}
	ids, err := pitches.Of(s.store).DuePitches(ctx)
	if err != nil {
		s.log.Warn().Err(err).Msg("pitch delivery: list due pitches")
		return
	}
	for _, id := range ids {
		if _, err := s.Deliver(ctx, id); err != nil && !errors.Is(err, pitches.ErrNotDue) {
			s.log.Warn().Err(err).Str("pitch", id).Msg("pitch delivery")
		}
	}
}

// Deliver sends pitch id if it is due: claims it, sends each recipient
// still to send, and finishes it. A pitch another sender holds, or not yet
// due, is returned as it is.
func (s *Sender) Deliver(ctx context.Context, id string) (*pitches.Pitch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok, why := s.ready(ctx); !ok {
		return nil, repo.Errorf(repo.CodeFailedPrecondition, "the team mailbox is not connected (%s): pitch %s waits, nothing was sent or marked failed; an admin connects the mailbox again (outreach mailbox connect) and sending resumes", why, id)
	}
	p, err := pitches.Of(s.store).ClaimPitch(ctx, id, s.cfg.Instance, s.cfg.Lease)
	if errors.Is(err, pitches.ErrNotDue) {
		cur, gerr := pitches.Of(s.store).Pitch(ctx, id)
		if gerr != nil {
			return nil, gerr
		}
		if cur.State == pitches.PitchSending {
			return cur, repo.Errorf(repo.CodeFailedPrecondition, "pitch %s is being sent by another instance (%s); get_pitch shows its progress", id, cur.ClaimedBy)
		}
		return cur, nil
	}
	if err != nil {
		return nil, err
	}
	for _, r := range p.Recipients {
		if r.State != pitches.RecipientPending && r.State != pitches.RecipientSending {
			continue
		}
		if err := s.recipient(ctx, p, r); err != nil {
			return nil, err
		}
	}
	return pitches.Of(s.store).FinishPitch(ctx, id, s.cfg.Instance, "")
}

// Ready reports whether the mailbox can send (always, without a mailbox
// connected by signing in), and why not.
func (s *Sender) Ready(ctx context.Context) (bool, string) { return s.ready(ctx) }

func (s *Sender) ready(ctx context.Context) (bool, string) {
	if s.cfg.Mailbox == nil {
		return true, ""
	}
	return s.cfg.Mailbox.Ready(ctx)
}

// recipient sends one recipient; an error is the store's (the claim lost,
// the store unavailable), after which the pitch is left to the next sender.
func (s *Sender) recipient(ctx context.Context, p *pitches.Pitch, r pitches.PitchRecipient) error {
	id, owner := p.ID, s.cfg.Instance
	if r.State == pitches.RecipientSending && r.MessageID != "" && s.cfg.Inbox != nil {
		found, err := s.cfg.Inbox.HasMessageID(s.cfg.SentMailbox, r.MessageID)
		if err != nil {
			return fmt.Errorf("reconcile pitch %s from the Sent folder: %w", id, err)
		}
		if found {
			_, err := pitches.Of(s.store).RecordRecipient(ctx, id, owner, r.ContactID, pitches.RecipientSent, "", "",
				"a sender stopped after sending; the copy in the Sent folder shows it went, so it was not sent again")
			return err
		}
	}
	guard, reason, err := pitches.Of(s.store).RecipientGuard(ctx, p, r)
	if err != nil {
		return err
	}
	if guard != "" {
		_, err := pitches.Of(s.store).RecordRecipient(ctx, id, owner, r.ContactID, pitches.RecipientSuppressed, guard, reason, "")
		return err
	}
	msgID := r.MessageID
	if msgID == "" {
		msgID = randHex(16) + "@" + domainOf(s.from.Address)
	}
	msg, err := s.message(ctx, p, r, msgID)
	if err != nil {
		_, rerr := pitches.Of(s.store).RecordRecipient(ctx, id, owner, r.ContactID, pitches.RecipientFailed, "", "the message could not be built: "+err.Error(), "")
		return rerr
	}
	token := ""
	if s.cfg.Mailbox != nil {
		// Before the attempt is recorded: without a token the recipient
		// stays as it is and the pitch waits for the next sender.
		if token, err = s.cfg.Mailbox.AccessToken(ctx); err != nil {
			return fmt.Errorf("pitch %s waits: %w", id, err)
		}
	}
	if _, err := pitches.Of(s.store).RecordAttempt(ctx, id, owner, r.ContactID, msgID, s.cfg.Lease); err != nil {
		return err
	}
	serr := s.send(ctx, msg, token)
	if serr != nil && !msg.IsDelivered() {
		_, err := pitches.Of(s.store).RecordRecipient(ctx, id, owner, r.ContactID, pitches.RecipientFailed, "", sendReason(serr, msgID), "")
		return err
	}
	note := ""
	if s.cfg.Inbox != nil {
		var raw strings.Builder
		if _, err := msg.WriteTo(&raw); err == nil {
			if err := s.cfg.Inbox.AppendSent(s.cfg.SentMailbox, []byte(raw.String())); err != nil {
				note = "sent, but the copy could not be appended to the Sent folder: " + err.Error()
			}
		}
	}
	if s.cfg.AfterSend != nil {
		if err := s.cfg.AfterSend(r.ContactID); err != nil {
			return err
		}
	}
	_, err = pitches.Of(s.store).RecordRecipient(ctx, id, owner, r.ContactID, pitches.RecipientSent, "", "", note)
	return err
}

// sendReason says what an SMTP failure means for the recipient.
func sendReason(err error, msgID string) string {
	var se *gomail.SendError
	if errors.As(err, &se) {
		switch {
		case se.Reason == gomail.ErrSMTPDataClose && se.ErrorCode() == 0:
			return fmt.Sprintf("the server did not answer after the message was transmitted (DATA): it may have been delivered, with Message-ID <%s>; check before sending again: %v", msgID, err)
		case se.ErrorCode() >= 500:
			return fmt.Sprintf("the server refused the message (%d): %v", se.ErrorCode(), err)
		case se.ErrorCode() >= 400:
			return fmt.Sprintf("the server refused the message for now (%d, temporary): %v", se.ErrorCode(), err)
		}
	}
	return "the message was not sent: " + err.Error()
}

func domainOf(addr string) string {
	_, d, _ := strings.Cut(addr, "@")
	if d == "" {
		return "localhost"
	}
	return d
}

// UnsubscribeURL is the signed one-click unsubscribe URL of an address.
func (s *Sender) UnsubscribeURL(ctx context.Context, email, pitchID string) (string, error) {
	tok, err := pitches.Of(s.store).UnsubscribeToken(ctx, email, pitchID)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(s.cfg.PublicURL, "/") + UnsubscribePath + "?t=" + url.QueryEscape(tok), nil
}

// message builds recipient r's message.
func (s *Sender) message(ctx context.Context, p *pitches.Pitch, r pitches.PitchRecipient, msgID string) (*gomail.Msg, error) {
	unsub, err := s.UnsubscribeURL(ctx, r.Email, p.ID)
	if err != nil {
		return nil, err
	}
	m := gomail.NewMsg()
	m.FromMailAddress(s.from)
	if err := m.AddToFormat(pitches.RecipientName(r), r.Email); err != nil {
		return nil, err
	}
	m.Subject(pitches.Merge(p.Subject, r))
	m.SetMessageIDWithValue(msgID)
	m.SetDate()
	m.SetGenHeader(gomail.Header("List-Unsubscribe"), "<"+unsub+">")
	m.SetGenHeader(gomail.Header("List-Unsubscribe-Post"), "List-Unsubscribe=One-Click")
	m.SetGenHeader(gomail.Header("X-Outreach-Pitch"), p.ID)
	body := pitches.Merge(p.Body, r) + "\n\n--\nTo receive no more pitches from us: " + unsub + "\n"
	m.SetBodyString(gomail.TypeTextPlain, body)
	return m, nil
}

// send runs one SMTP transaction.
func (s *Sender) send(ctx context.Context, m *gomail.Msg, token string) error {
	host, portStr, _ := net.SplitHostPort(s.cfg.Addr)
	port, _ := strconv.Atoi(portStr)
	opts := []gomail.Option{gomail.WithPort(port), gomail.WithTimeout(s.cfg.Timeout), gomail.WithHELO(domainOf(s.from.Address))}
	tc := s.cfg.TLSConfig
	if tc == nil {
		tc = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	opts = append(opts, gomail.WithTLSConfig(tc))
	switch s.cfg.Security {
	case SecurityTLS:
		opts = append(opts, gomail.WithSSL())
	case SecurityStartTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	}
	switch s.cfg.Auth {
	case "password":
		mech := gomail.SMTPAuthAutoDiscover
		if s.cfg.Security == SecurityPlain {
			mech = gomail.SMTPAuthPlainNoEnc
		}
		opts = append(opts, gomail.WithUsername(s.cfg.User), gomail.WithPassword(s.cfg.Password), gomail.WithSMTPAuth(mech))
	case "xoauth2":
		tok := s.cfg.Token
		if token != "" {
			tok = token
		} else if s.cfg.TokenFile != "" {
			b, err := os.ReadFile(s.cfg.TokenFile)
			if err != nil {
				return fmt.Errorf("read the SMTP OAuth2 token file: %w", err)
			}
			tok = strings.TrimSpace(string(b))
		}
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthXOAUTH2), gomail.WithUsername(s.cfg.User), gomail.WithPassword(tok))
	}
	c, err := gomail.NewClient(host, opts...)
	if err != nil {
		return err
	}
	return c.DialAndSendWithContext(ctx, m)
}
