// Package mailsync fills the email threads from a shared inbox over IMAP
// (and from raw messages handed to import_email). It reads mail with a
// maintained IMAP client and MIME library and stores every message through
// the repo's write path; it never writes to the database itself.
package mailsync

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-sasl"
	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/inbox"
)

// Security of the IMAP connection.
const (
	SecurityTLS      = "tls"      // implicit TLS (port 993)
	SecurityStartTLS = "starttls" // plain connection upgraded with STARTTLS (port 143)
	SecurityPlain    = "plain"    // no encryption: refused unless the server is on a loopback address
)

// Authentication mechanisms.
const (
	AuthPassword    = "password"    // LOGIN (or AUTHENTICATE PLAIN) with user and password
	AuthXOAuth2     = "xoauth2"     // AUTHENTICATE XOAUTH2 with an OAuth2 bearer token (Gmail, Microsoft 365)
	AuthOAuthBearer = "oauthbearer" // AUTHENTICATE OAUTHBEARER (RFC 7628)
)

// Config says which mailbox to sync and how.
type Config struct {
	// Addr is the IMAP server's host:port.
	Addr     string
	Security string
	Auth     string
	User     string
	Password string
	// Token is an OAuth2 access token; TokenFile, when set, is read at every
	// connection instead, so a token refreshed by another process is used.
	Token     string
	TokenFile string
	// Tokens, when set, gives the access token of the mailbox connected by
	// signing in (package mailauth), shared with the SMTP sending; Auth is
	// then xoauth2.
	Tokens TokenSource
	// Mailboxes to sync; default INBOX.
	Mailboxes []string
	// Interval between automatic syncs; zero syncs only on demand.
	Interval time.Duration
	// MaxMessageBytes skips larger messages (reported as too_large).
	MaxMessageBytes int64
	// KeepAttachments stores attachment bytes in GridFS.
	KeepAttachments bool
	// TLSConfig overrides the TLS settings (tests with their own CA).
	TLSConfig *tls.Config
	// Timeout bounds dialing and each network read or write.
	Timeout time.Duration
}

// TokenSource gives the mailbox's current OAuth2 access token.
type TokenSource interface {
	AccessToken(ctx context.Context) (string, error)
}

// DefaultMaxMessageBytes is the default size cap of one message.
const DefaultMaxMessageBytes = 50 << 20

func (c Config) withDefaults() Config {
	if len(c.Mailboxes) == 0 {
		c.Mailboxes = []string{"INBOX"}
	}
	if c.Security == "" {
		c.Security = SecurityTLS
	}
	if c.Auth == "" {
		c.Auth = AuthPassword
		if c.Token != "" || c.TokenFile != "" || c.Tokens != nil {
			c.Auth = AuthXOAuth2
		}
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.Timeout <= 0 {
		c.Timeout = 60 * time.Second
	}
	return c
}

// Check refuses a configuration that cannot work, saying why.
func (c Config) Check() error {
	c = c.withDefaults()
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("IMAP address %q: want host:port, e.g. imap.gmail.com:993", c.Addr)
	}
	switch c.Security {
	case SecurityTLS, SecurityStartTLS:
	case SecurityPlain:
		if !isLoopback(host) {
			return fmt.Errorf("IMAP security plain is allowed only for a loopback server, not %s: use tls or starttls", host)
		}
	default:
		return fmt.Errorf("IMAP security %q: use tls, starttls or plain (loopback only)", c.Security)
	}
	if c.User == "" {
		return errors.New("IMAP user is not set")
	}
	switch c.Auth {
	case AuthPassword:
		if c.Password == "" {
			return errors.New("IMAP password is not set (or set an OAuth2 token for xoauth2)")
		}
	case AuthXOAuth2, AuthOAuthBearer:
		if c.Token == "" && c.TokenFile == "" && c.Tokens == nil {
			return fmt.Errorf("IMAP auth %s needs an OAuth2 access token, a token file, or the mailbox connected by signing in (OUTREACH_MAILBOX_PROVIDER)", c.Auth)
		}
	default:
		return fmt.Errorf("IMAP auth %q: use password, xoauth2 or oauthbearer", c.Auth)
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Syncer syncs the configured mailboxes into the store. One sync runs at a
// time in a process; instances sharing a database may sync at once, since
// every message is stored once whoever stores it.
type Syncer struct {
	store *repo.Store
	cfg   Config
	mu    sync.Mutex
	last  atomic.Pointer[LastSync]
	// afterMessage, when set by a test, runs after each message is handled.
	afterMessage func(uid imap.UID)
}

// New returns a syncer for cfg (checked with Check).
func New(store *repo.Store, cfg Config) (*Syncer, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	return &Syncer{store: store, cfg: cfg.withDefaults()}, nil
}

// Account names the synced account in the sync state: user@host:port.
func (s *Syncer) Account() string { return s.cfg.User + "@" + s.cfg.Addr }

// IMAPError is a failure of the IMAP server or of the connection to it, as
// opposed to one of the store.
type IMAPError struct {
	Op  string
	Err error
}

func (e *IMAPError) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *IMAPError) Unwrap() error { return e.Err }

// Problem is a message that was not stored, and why. Problems do not stop
// the sync: the message is passed over and held (inbox.HeldEmail), where
// get_sync_status shows it and every later sync tries it again.
type Problem struct {
	Mailbox   string `json:"mailbox,omitempty"`
	UID       uint32 `json:"uid,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	// Reason: too_large, malformed or store_failed.
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// MailboxResult is where one mailbox's sync stands after a run.
type MailboxResult struct {
	Mailbox     string `json:"mailbox"`
	UIDValidity uint32 `json:"uid_validity"`
	LastUID     uint32 `json:"last_uid"`
	// Rescanned: the UIDVALIDITY had changed, so every message was looked at
	// again (and found stored, where it was).
	Rescanned bool `json:"rescanned"`
	Seen      int  `json:"seen"`
	Complete  bool `json:"complete"`
}

// Result counts what a sync or an import did.
type Result struct {
	Seen       int `json:"seen"`
	Stored     int `json:"stored"`
	Duplicates int `json:"duplicates"`
	// Skipped are messages without a known contact in From, To or Cc.
	Skipped        int       `json:"skipped"`
	Failed         int       `json:"failed"`
	ThreadsTouched int       `json:"threads_touched"`
	ThreadIDs      []string  `json:"thread_ids"`
	Problems       []Problem `json:"problems"`
	// Retried counts the held messages (failed before, or skipped before and
	// now claimed by a contact) this sync read again; Recovered those of
	// them it stored (or found stored). They are not counted in Seen.
	Retried   int             `json:"retried"`
	Recovered int             `json:"recovered"`
	Mailboxes []MailboxResult `json:"mailboxes,omitempty"`
	// Complete is false when the sync stopped early (connection lost): what
	// was stored stays, and the next sync resumes after it.
	Complete bool   `json:"complete"`
	Error    string `json:"error,omitempty"`
}

func (r *Result) touch(id string) {
	if id != "" && !slices.Contains(r.ThreadIDs, id) {
		r.ThreadIDs = append(r.ThreadIDs, id)
		r.ThreadsTouched = len(r.ThreadIDs)
	}
}

// Progress receives (done, total, message) as a sync advances.
type Progress func(done, total int, msg string)

// Actor is the identity automatic syncs write as: their own agent, and one
// session per run, so a run can be inspected or rolled back as a whole.
func Actor() audit.Actor {
	return audit.Actor{UserID: "system", AgentID: "email-sync", SessionID: "email-sync-" + uuid.NewString(), Tool: "email_sync"}
}

// Run syncs every interval until ctx ends, as the sync's own agent; a
// failed run is logged and tried again at the next tick.
func (s *Syncer) Run(ctx context.Context, log zerolog.Logger) {
	if s.cfg.Interval <= 0 {
		return
	}
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		res, err := s.Sync(audit.WithActor(ctx, Actor()), nil)
		ev := log.Info()
		if err != nil {
			ev = log.Warn().Err(err)
		}
		ev.Int("seen", res.Seen).Int("stored", res.Stored).Int("skipped", res.Skipped).Int("failed", res.Failed).
			Int("retried", res.Retried).Int("recovered", res.Recovered).
			Int("threads_touched", res.ThreadsTouched).Bool("complete", res.Complete).Msg("email sync")
		for _, p := range res.Problems {
			log.Warn().Str("mailbox", p.Mailbox).Uint32("uid", p.UID).Str("message_id", p.MessageID).Str("reason", p.Reason).
				Str("detail", p.Detail).Msg("email sync: message not stored (held; get_sync_status lists it, the next sync tries it again)")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SyncOptions tune one sync.
type SyncOptions struct {
	// Rescan reads every message of each mailbox again, not only those past
	// the mark: what is stored counts as a duplicate, and a message skipped
	// before is stored if a contact now holds one of its addresses.
	Rescan bool
}

// Sync syncs every configured mailbox once, attributed to the actor in ctx.
// It returns what it did even when it stops early with an error.
func (s *Syncer) Sync(ctx context.Context, progress Progress) (*Result, error) {
	return s.SyncWith(ctx, SyncOptions{}, progress)
}

// SyncWith is Sync with options.
func (s *Syncer) SyncWith(ctx context.Context, opts SyncOptions, progress Progress) (*Result, error) {
	res, err := s.syncWith(ctx, opts, progress)
	st := LastSync{At: time.Now(), Failed: err != nil}
	if res != nil {
		st.Problems = len(res.Problems) + res.Failed
	}
	if err == nil {
		st.Succeeded = st.At
	} else if prev := s.last.Load(); prev != nil {
		st.Succeeded = prev.Succeeded
	}
	s.last.Store(&st)
	return res, err
}

// LastSync is what the last sync of this process came to (metrics).
type LastSync struct {
	// At is when it ended; Succeeded when the last one that reached every
	// mailbox ended (zero: none yet).
	At, Succeeded time.Time
	// Failed: it stopped on an error (the server, the connection, the store).
	Failed bool
	// Problems counts the messages it could not store.
	Problems int
}

// Last returns the last sync's outcome, or nil before the first.
func (s *Syncer) Last() *LastSync { return s.last.Load() }

func (s *Syncer) syncWith(ctx context.Context, opts SyncOptions, progress Progress) (*Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := &Result{ThreadIDs: []string{}, Problems: []Problem{}}
	c, err := s.connect()
	if err != nil {
		res.Error = err.Error()
		return res, &IMAPError{Op: "connect to " + s.cfg.Addr, Err: err}
	}
	defer c.Close()
	// A cancelled call (or a shutdown) closes the connection, which ends
	// any command waiting on it.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	for _, mbox := range s.cfg.Mailboxes {
		mr, err := s.syncMailbox(ctx, c, mbox, opts, res, progress)
		res.Mailboxes = append(res.Mailboxes, mr)
		if err != nil {
			res.Error = err.Error()
			return res, err
		}
	}
	_ = c.Logout().Wait()
	res.Complete = true
	return res, nil
}

func (s *Syncer) connect() (*imapclient.Client, error) {
	opts := &imapclient.Options{TLSConfig: s.cfg.TLSConfig, Dialer: &net.Dialer{Timeout: s.cfg.Timeout}}
	var c *imapclient.Client
	var err error
	switch s.cfg.Security {
	case SecurityTLS:
		c, err = imapclient.DialTLS(s.cfg.Addr, opts)
	case SecurityStartTLS:
		c, err = imapclient.DialStartTLS(s.cfg.Addr, opts)
	default:
		c, err = imapclient.DialInsecure(s.cfg.Addr, opts)
	}
	if err != nil {
		return nil, err
	}
	if err := c.WaitGreeting(); err != nil {
		c.Close()
		return nil, err
	}
	switch s.cfg.Auth {
	case AuthPassword:
		err = c.Login(s.cfg.User, s.cfg.Password).Wait()
	default:
		token := s.cfg.Token
		if s.cfg.Tokens != nil {
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
			t, terr := s.cfg.Tokens.AccessToken(ctx)
			cancel()
			if terr != nil {
				c.Close()
				return nil, terr
			}
			token = t
		} else if s.cfg.TokenFile != "" {
			b, rerr := os.ReadFile(s.cfg.TokenFile)
			if rerr != nil {
				c.Close()
				return nil, fmt.Errorf("read OAuth2 token file: %w", rerr)
			}
			token = strings.TrimSpace(string(b))
		}
		if s.cfg.Auth == AuthOAuthBearer {
			err = c.Authenticate(sasl.NewOAuthBearerClient(&sasl.OAuthBearerOptions{Username: s.cfg.User, Token: token}))
		} else {
			err = c.Authenticate(xoauth2{user: s.cfg.User, token: token})
		}
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("authenticate as %s: %w", s.cfg.User, err)
	}
	return c, nil
}

// xoauth2 is the XOAUTH2 SASL mechanism of Gmail and Microsoft 365: one
// initial response carrying the user and the bearer token.
type xoauth2 struct{ user, token string }

func (x xoauth2) Start() (string, []byte, error) {
	return "XOAUTH2", []byte("user=" + x.user + "\x01auth=Bearer " + x.token + "\x01\x01"), nil
}

// Next answers the server's error challenge (a JSON status) with an empty
// response, after which the server fails the command with its reason.
func (x xoauth2) Next([]byte) ([]byte, error) { return []byte{}, nil }

// item is a message listed for fetching.
type item struct {
	uid      imap.UID
	size     int64
	internal time.Time
}

// fetchBatch is how many messages one FETCH asks for.
const fetchBatch = 25

func (s *Syncer) syncMailbox(ctx context.Context, c *imapclient.Client, mbox string, opts SyncOptions, res *Result, progress Progress) (MailboxResult, error) {
	mr := MailboxResult{Mailbox: mbox}
	sel, err := c.Select(mbox, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		return mr, &IMAPError{Op: "select " + mbox, Err: err}
	}
	mr.UIDValidity = sel.UIDValidity
	st, err := inbox.Of(s.store).EmailSyncState(ctx, s.Account(), mbox)
	if err != nil {
		return mr, err
	}
	last := imap.UID(0)
	if st.ID != "" && st.UIDValidity == int64(sel.UIDValidity) {
		last = imap.UID(st.LastUID)
	} else if st.ID != "" {
		mr.Rescanned = true // UIDVALIDITY changed: every UID is new; keys keep it free of duplicates
	}
	mark := last // the stored mark: a rescan reads from the start but never moves it back
	if opts.Rescan && last > 0 {
		last, mr.Rescanned = 0, true
	}
	mr.LastUID = uint32(mark)
	// The messages held from earlier syncs: those of another UIDVALIDITY
	// are gone (their UIDs name nothing now; the rescan reads them again).
	held, err := inbox.Of(s.store).HeldEmails(ctx, s.Account(), mbox)
	if err != nil {
		return mr, err
	}
	open := map[imap.UID]inbox.HeldEmail{}
	for _, h := range held {
		if h.UIDValidity != int64(sel.UIDValidity) {
			if err := inbox.Of(s.store).ResolveHeldEmail(ctx, h.Account, h.Mailbox, h.UIDValidity, h.UID, inbox.HeldGone); err != nil {
				return mr, err
			}
			continue
		}
		open[imap.UID(h.UID)] = h
	}
	readNow := map[imap.UID]bool{} // read in this run: not retried again
	if sel.NumMessages == 0 || (sel.UIDNext != 0 && sel.UIDNext <= last+1) {
		if err := s.saveState(ctx, mbox, sel.UIDValidity, last, st); err != nil {
			return mr, err
		}
		if err := s.retryHeld(ctx, c, mbox, sel.UIDValidity, open, readNow, res); err != nil {
			return mr, err
		}
		mr.Complete = true
		return mr, nil
	}
	// Sizes first, so a huge message is passed over without reading it.
	var set imap.UIDSet
	set.AddRange(last+1, 0)
	msgs, err := c.Fetch(set, &imap.FetchOptions{UID: true, RFC822Size: true, InternalDate: true}).Collect()
	if err != nil {
		return mr, &IMAPError{Op: "list " + mbox, Err: err}
	}
	var todo []item
	for _, m := range msgs {
		if m.UID > last {
			todo = append(todo, item{m.UID, m.RFC822Size, m.InternalDate})
		}
	}
	slices.SortFunc(todo, func(a, b item) int { return int(a.uid) - int(b.uid) })
	total := len(todo)
	done := 0
	save := func() error {
		mr.LastUID = uint32(max(last, mark))
		return s.saveState(ctx, mbox, sel.UIDValidity, last, st)
	}
	for start := 0; start < len(todo); start += fetchBatch {
		if err := ctx.Err(); err != nil {
			return mr, err
		}
		batch := todo[start:min(start+fetchBatch, len(todo))]
		var fetchSet imap.UIDSet
		internal := map[imap.UID]time.Time{}
		for _, it := range batch {
			if it.size > s.cfg.MaxMessageBytes {
				continue
			}
			fetchSet.AddNum(it.uid)
			internal[it.uid] = it.internal
		}
		handled := map[imap.UID]bool{}
		problems := map[imap.UID]*Problem{}
		outcomes := map[imap.UID]fetched{}
		if len(fetchSet) > 0 {
			cmd := c.Fetch(fetchSet, &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{{Peek: true}}})
			for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
				f, herr := s.handleFetched(ctx, mbox, msg, internal, res)
				if herr != nil {
					cmd.Close()
					s.advance(batch, handled, problems, &last)
					save()
					return mr, herr
				}
				if f.uid != 0 {
					handled[f.uid] = true
					outcomes[f.uid] = f
					if f.problem != nil {
						problems[f.uid] = f.problem
					}
				}
			}
			if err := cmd.Close(); err != nil {
				// The connection failed part-way. A message whose reading
				// failed may be a victim of the cut, not malformed: keep the
				// prefix read cleanly; the rest is read again next time.
				s.advance(batch, handled, problems, &last)
				save()
				return mr, &IMAPError{Op: "fetch from " + mbox, Err: err}
			}
		}
		for _, it := range batch {
			switch {
			case it.size > s.cfg.MaxMessageBytes:
				res.Seen++
				res.Failed++
				p := Problem{Mailbox: mbox, UID: uint32(it.uid), Reason: inbox.HeldTooLarge,
					Detail: fmt.Sprintf("%d bytes is over the limit of %d bytes", it.size, s.cfg.MaxMessageBytes)}
				res.Problems = append(res.Problems, p)
				if err := s.hold(ctx, mbox, sel.UIDValidity, it, p, nil); err != nil {
					return mr, err
				}
				readNow[it.uid] = true
			case !handled[it.uid]:
				continue // expunged between the listing and the fetch
			case problems[it.uid] != nil:
				res.Failed++
				res.Problems = append(res.Problems, *problems[it.uid])
				if err := s.hold(ctx, mbox, sel.UIDValidity, it, *problems[it.uid], outcomes[it.uid].hdr); err != nil {
					return mr, err
				}
				readNow[it.uid] = true
			default:
				if err := s.settleHeld(ctx, mbox, sel.UIDValidity, it, outcomes[it.uid], open); err != nil {
					return mr, err
				}
				readNow[it.uid] = true
			}
			mr.Seen++
			last = it.uid
			done++
			if progress != nil {
				progress(done, total, fmt.Sprintf("%s: %d of %d messages", mbox, done, total))
			}
			if s.afterMessage != nil {
				s.afterMessage(it.uid)
			}
		}
		if err := save(); err != nil {
			return mr, err
		}
	}
	if err := s.retryHeld(ctx, c, mbox, sel.UIDValidity, open, readNow, res); err != nil {
		return mr, err
	}
	mr.Complete = true
	return mr, save()
}

// hold keeps a message that was not stored, with its headers when they
// were read, so get_sync_status shows it and a later sync tries it again.
func (s *Syncer) hold(ctx context.Context, mbox string, validity uint32, it item, p Problem, hdr *header) error {
	h := inbox.HeldEmail{Account: s.Account(), Mailbox: mbox, UIDValidity: int64(validity), UID: int64(it.uid),
		Reason: p.Reason, Detail: p.Detail, MessageID: p.MessageID}
	if it.size > s.cfg.MaxMessageBytes {
		h.SizeBytes = it.size
	}
	if hdr != nil {
		h.MessageID, h.Subject = hdr.MessageID, hdr.Subject
		h.From = inbox.Mailbox(hdr.Names[hdr.From], hdr.From)
		for _, a := range hdr.To {
			h.To = append(h.To, inbox.Mailbox(hdr.Names[a], a))
		}
		for _, a := range hdr.Cc {
			h.Cc = append(h.Cc, inbox.Mailbox(hdr.Names[a], a))
		}
		if !hdr.Date.IsZero() {
			d := hdr.Date
			h.Date = &d
		}
	}
	return inbox.Of(s.store).HoldEmail(ctx, h)
}

// settleHeld records what became of a message read cleanly: a skipped one
// is held (its headers, no body) for a contact to claim later; a stored
// one, held before, is no longer held.
func (s *Syncer) settleHeld(ctx context.Context, mbox string, validity uint32, it item, f fetched, open map[imap.UID]inbox.HeldEmail) error {
	if f.ir == nil {
		return nil
	}
	switch f.ir.Outcome {
	case inbox.EmailSkipped:
		return s.hold(ctx, mbox, validity, it, Problem{Reason: inbox.HeldNoContact, Detail: "no active contact holds any of its addresses (From, To, Cc); it is stored once one does"}, f.hdr)
	case inbox.EmailStored, inbox.EmailDuplicate:
		if _, ok := open[it.uid]; ok {
			outcome := inbox.HeldStored
			if f.ir.Outcome == inbox.EmailDuplicate {
				outcome = inbox.HeldDuplicate
			}
			return inbox.Of(s.store).ResolveHeldEmail(ctx, s.Account(), mbox, int64(validity), int64(it.uid), outcome)
		}
	}
	return nil
}

// retryHeld reads again the messages held from earlier syncs that may now
// be stored: every failed one, and every skipped one whose addresses a
// contact now holds. One still failing stays held, unchanged; one gone from
// the mailbox is no longer held. Retries count in Retried and Recovered,
// and what they store in Stored and the threads touched, not in Seen.
func (s *Syncer) retryHeld(ctx context.Context, c *imapclient.Client, mbox string, validity uint32, open map[imap.UID]inbox.HeldEmail, readNow map[imap.UID]bool, res *Result) error {
	var failed, skipped []inbox.HeldEmail
	for uid, h := range open {
		switch {
		case readNow[uid]:
		case h.Reason == inbox.HeldNoContact:
			skipped = append(skipped, h)
		default:
			failed = append(failed, h)
		}
	}
	claimed, err := inbox.Of(s.store).ClaimableHeld(ctx, skipped)
	if err != nil {
		return err
	}
	cand := append(failed, claimed...)
	if len(cand) == 0 {
		return nil
	}
	slices.SortFunc(cand, func(a, b inbox.HeldEmail) int { return int(a.UID - b.UID) })
	var set imap.UIDSet
	for _, h := range cand {
		set.AddNum(imap.UID(h.UID))
	}
	msgs, err := c.Fetch(set, &imap.FetchOptions{UID: true, RFC822Size: true, InternalDate: true}).Collect()
	if err != nil {
		return &IMAPError{Op: "list held messages of " + mbox, Err: err}
	}
	present := map[imap.UID]item{}
	for _, m := range msgs {
		present[m.UID] = item{m.UID, m.RFC822Size, m.InternalDate}
	}
	var fetchSet imap.UIDSet
	internal := map[imap.UID]time.Time{}
	for _, h := range cand {
		it, ok := present[imap.UID(h.UID)]
		switch {
		case !ok:
			if err := inbox.Of(s.store).ResolveHeldEmail(ctx, h.Account, h.Mailbox, h.UIDValidity, h.UID, inbox.HeldGone); err != nil {
				return err
			}
		case it.size > s.cfg.MaxMessageBytes:
			res.Retried++
			p := Problem{Reason: inbox.HeldTooLarge, Detail: fmt.Sprintf("%d bytes is over the limit of %d bytes", it.size, s.cfg.MaxMessageBytes)}
			if err := s.hold(ctx, mbox, validity, it, p, nil); err != nil {
				return err
			}
		default:
			fetchSet.AddNum(it.uid)
			internal[it.uid] = it.internal
		}
	}
	if len(fetchSet) == 0 {
		return nil
	}
	// Retries are counted apart: they are not new messages.
	rr := &Result{ThreadIDs: []string{}}
	cmd := c.Fetch(fetchSet, &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{{Peek: true}}})
	var got []fetched
	for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
		f, herr := s.handleFetched(ctx, mbox, msg, internal, rr)
		if herr != nil {
			cmd.Close()
			return herr
		}
		if f.uid != 0 {
			got = append(got, f)
		}
	}
	if err := cmd.Close(); err != nil {
		return &IMAPError{Op: "fetch held messages from " + mbox, Err: err}
	}
	for _, f := range got {
		res.Retried++
		it := present[f.uid]
		if f.problem != nil {
			if err := s.hold(ctx, mbox, validity, it, *f.problem, f.hdr); err != nil {
				return err
			}
			continue
		}
		if f.ir != nil && (f.ir.Outcome == inbox.EmailStored || f.ir.Outcome == inbox.EmailDuplicate) {
			res.Recovered++
		}
		if err := s.settleHeld(ctx, mbox, validity, it, f, open); err != nil {
			return err
		}
	}
	res.Stored += rr.Stored
	res.Duplicates += rr.Duplicates
	for _, id := range rr.ThreadIDs {
		res.touch(id)
	}
	return nil
}

// advance moves last over the batch's leading messages that were read
// cleanly (stored, duplicate or skipped), stopping at the first that was not.
func (s *Syncer) advance(batch []item, handled map[imap.UID]bool, problems map[imap.UID]*Problem, last *imap.UID) {
	for _, it := range batch {
		if it.size > s.cfg.MaxMessageBytes || !handled[it.uid] || problems[it.uid] != nil {
			return
		}
		*last = it.uid
	}
}

func (s *Syncer) saveState(ctx context.Context, mbox string, validity uint32, last imap.UID, st inbox.EmailSyncState) error {
	if st.ID != "" && st.UIDValidity == int64(validity) && st.LastUID >= int64(last) {
		return nil
	}
	return inbox.Of(s.store).SaveEmailSyncState(ctx, s.Account(), mbox, int64(validity), int64(last))
}

// fetched is what became of one fetched message: its UID (0 if the server
// sent none), what storing it did, the headers read (when its body was not
// read: skipped), and a problem when it could not be stored.
type fetched struct {
	uid     imap.UID
	ir      *inbox.IngestResult
	hdr     *header
	problem *Problem
}

// handleFetched reads one fetched message and stores it. It returns an
// error only when the sync must stop (the store failed: the message will
// be read again next time).
func (s *Syncer) handleFetched(ctx context.Context, mbox string, msg *imapclient.FetchMessageData, internal map[imap.UID]time.Time, res *Result) (fetched, error) {
	var f fetched
	read := false
	for item := msg.Next(); item != nil; item = msg.Next() {
		switch it := item.(type) {
		case imapclient.FetchItemDataUID:
			f.uid = it.UID
		case imapclient.FetchItemDataBodySection:
			if it.Literal == nil || read {
				continue
			}
			// The body streams from the connection: it is parsed as it arrives.
			read = true
			var hdr header
			ir, prob, err := s.ingest(ctx, it.Literal, "imap:"+mbox, internal[f.uid], res, &hdr)
			io.Copy(io.Discard, it.Literal)
			if err != nil {
				return f, err
			}
			f.ir, f.problem = ir, prob
			if hdr.From != "" || hdr.MessageID != "" || len(hdr.To) > 0 {
				f.hdr = &hdr
			}
		}
	}
	if f.problem != nil {
		f.problem.Mailbox, f.problem.UID = mbox, uint32(f.uid)
	}
	return f, nil
}

// ingest parses and stores one message read from r, counting it in res.
// When hdr is given, it receives the headers read (what a held message keeps).
func (s *Syncer) ingest(ctx context.Context, r io.Reader, source string, fallbackDate time.Time, res *Result, hdr *header) (*inbox.IngestResult, *Problem, error) {
	res.Seen++
	if fallbackDate.IsZero() {
		fallbackDate = time.Now()
	}
	var early *inbox.IngestResult
	opts := parseOptions{fallbackDate: fallbackDate, accept: func(h header) (bool, error) {
		if hdr != nil {
			*hdr = h
		}
		if h.MessageID != "" {
			if ir, err := inbox.Of(s.store).StoredEmail(ctx, h.MessageID); err != nil || ir != nil {
				early = ir
				return false, err
			}
		}
		n, err := inbox.Of(s.store).KnownEmailContacts(ctx, slices.Concat([]string{h.From}, h.To, h.Cc))
		if err == nil && n == 0 {
			early = &inbox.IngestResult{Outcome: inbox.EmailSkipped, MessageID: h.MessageID}
		}
		return n > 0, err
	}}
	if s.cfg.KeepAttachments {
		opts.keepAttachment = func(filename, mimeType string, r io.Reader) (string, int64, string, error) {
			return inbox.Of(s.store).PutEmailAttachment(ctx, filename, mimeType, r)
		}
	}
	// A delivery report of a pitch is read whole (it is small) and handed
	// to the store before it is parsed as any other message (dsn.go).
	br := bufio.NewReaderSize(r, 64<<10)
	r = br
	if isReport(br) {
		raw, err := io.ReadAll(io.LimitReader(br, maxDSNBytes))
		if err != nil {
			return nil, nil, err
		}
		s.bounces(ctx, raw)
		r = bytes.NewReader(raw)
	}
	in, err := parse(r, opts)
	if errors.Is(err, ErrMalformed) {
		return nil, &Problem{Reason: "malformed", Detail: err.Error()}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if in == nil {
		count(res, *early)
		return early, nil, nil
	}
	in.Source = source
	ir, err := inbox.Of(s.store).IngestEmail(ctx, *in)
	if err != nil {
		var re *repo.Error
		// The message itself is refused: pass it over. Anything else (a lost
		// race, the store unavailable) stops the sync before the mark moves.
		if errors.As(err, &re) && (re.Code == repo.CodeInvalid || re.Code == repo.CodeFailedPrecondition) {
			return nil, &Problem{MessageID: in.MessageID, Reason: "store_failed", Detail: re.Message}, nil
		}
		return nil, nil, err
	}
	count(res, ir)
	return &ir, nil, nil
}

func count(res *Result, ir inbox.IngestResult) {
	switch ir.Outcome {
	case inbox.EmailStored:
		res.Stored++
		res.touch(ir.ThreadID)
	case inbox.EmailDuplicate:
		res.Duplicates++
	case inbox.EmailSkipped:
		res.Skipped++
	}
}

// Import stores one raw RFC 822 message, attributed to the actor in ctx.
func Import(ctx context.Context, store *repo.Store, raw []byte, keepAttachments bool) (*Result, *inbox.IngestResult, error) {
	s := &Syncer{store: store, cfg: Config{KeepAttachments: keepAttachments}.withDefaults()}
	res := &Result{ThreadIDs: []string{}, Problems: []Problem{}}
	ir, p, err := s.ingest(ctx, bytes.NewReader(raw), "import", time.Now(), res, nil)
	if err != nil {
		return res, nil, err
	}
	if p != nil {
		res.Problems = append(res.Problems, *p)
		res.Failed++
		return res, nil, repo.Invalid("raw_base64", "the message could not be read: %s", p.Detail)
	}
	res.Complete = true
	return res, ir, nil
}
