// Package mailsync fills the email threads from a shared inbox over IMAP
// (and from raw messages handed to import_email). It reads mail with a
// maintained IMAP client and MIME library and stores every message through
// the repo's write path; it never writes to the database itself.
package mailsync

import (
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
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-sasl"
	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"outreach/audit"
	"outreach/repo"
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
		if c.Token != "" || c.TokenFile != "" {
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
		if c.Token == "" && c.TokenFile == "" {
			return fmt.Errorf("IMAP auth %s needs an OAuth2 access token or a token file", c.Auth)
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
// the sync: the message is passed over, and the next sync does not retry it.
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
	Skipped        int             `json:"skipped"`
	Failed         int             `json:"failed"`
	ThreadsTouched int             `json:"threads_touched"`
	ThreadIDs      []string        `json:"thread_ids"`
	Problems       []Problem       `json:"problems"`
	Mailboxes      []MailboxResult `json:"mailboxes,omitempty"`
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
			Int("threads_touched", res.ThreadsTouched).Bool("complete", res.Complete).Msg("email sync")
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sync syncs every configured mailbox once, attributed to the actor in ctx.
// It returns what it did even when it stops early with an error.
func (s *Syncer) Sync(ctx context.Context, progress Progress) (*Result, error) {
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
		mr, err := s.syncMailbox(ctx, c, mbox, res, progress)
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
		if s.cfg.TokenFile != "" {
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

func (s *Syncer) syncMailbox(ctx context.Context, c *imapclient.Client, mbox string, res *Result, progress Progress) (MailboxResult, error) {
	mr := MailboxResult{Mailbox: mbox}
	sel, err := c.Select(mbox, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		return mr, &IMAPError{Op: "select " + mbox, Err: err}
	}
	mr.UIDValidity = sel.UIDValidity
	st, err := s.store.EmailSyncState(ctx, s.Account(), mbox)
	if err != nil {
		return mr, err
	}
	last := imap.UID(0)
	if st.ID != "" && st.UIDValidity == int64(sel.UIDValidity) {
		last = imap.UID(st.LastUID)
	} else if st.ID != "" {
		mr.Rescanned = true // UIDVALIDITY changed: every UID is new; keys keep it free of duplicates
	}
	mr.LastUID = uint32(last)
	if sel.NumMessages == 0 || (sel.UIDNext != 0 && sel.UIDNext <= last+1) {
		mr.Complete = true
		return mr, s.saveState(ctx, mbox, sel.UIDValidity, last, st)
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
	save := func() error { mr.LastUID = uint32(last); return s.saveState(ctx, mbox, sel.UIDValidity, last, st) }
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
		if len(fetchSet) > 0 {
			cmd := c.Fetch(fetchSet, &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{{Peek: true}}})
			for msg := cmd.Next(); msg != nil; msg = cmd.Next() {
				uid, p, herr := s.handleFetched(ctx, mbox, msg, internal, res)
				if herr != nil {
					cmd.Close()
					s.advance(batch, handled, problems, &last)
					save()
					return mr, herr
				}
				if uid != 0 {
					handled[uid] = true
					if p != nil {
						problems[uid] = p
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
				res.Problems = append(res.Problems, Problem{Mailbox: mbox, UID: uint32(it.uid), Reason: "too_large",
					Detail: fmt.Sprintf("%d bytes is over the limit of %d bytes", it.size, s.cfg.MaxMessageBytes)})
			case !handled[it.uid]:
				continue // expunged between the listing and the fetch
			case problems[it.uid] != nil:
				res.Failed++
				res.Problems = append(res.Problems, *problems[it.uid])
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
	mr.Complete = true
	return mr, save()
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

func (s *Syncer) saveState(ctx context.Context, mbox string, validity uint32, last imap.UID, st repo.EmailSyncState) error {
	if st.ID != "" && st.UIDValidity == int64(validity) && st.LastUID >= int64(last) {
		return nil
	}
	return s.store.SaveEmailSyncState(ctx, s.Account(), mbox, int64(validity), int64(last))
}

// handleFetched reads one fetched message and stores it. It returns the
// message's UID (0 if the server sent none), a problem when the message
// could not be stored, and an error only when the sync must stop (the
// store failed: the message will be read again next time).
func (s *Syncer) handleFetched(ctx context.Context, mbox string, msg *imapclient.FetchMessageData, internal map[imap.UID]time.Time, res *Result) (imap.UID, *Problem, error) {
	var uid imap.UID
	var p *Problem
	read := false
	for item := msg.Next(); item != nil; item = msg.Next() {
		switch it := item.(type) {
		case imapclient.FetchItemDataUID:
			uid = it.UID
		case imapclient.FetchItemDataBodySection:
			if it.Literal == nil || read {
				continue
			}
			// The body streams from the connection: it is parsed as it arrives.
			read = true
			_, prob, err := s.ingest(ctx, it.Literal, "imap:"+mbox, internal[uid], res)
			io.Copy(io.Discard, it.Literal)
			if err != nil {
				return uid, nil, err
			}
			p = prob
		}
	}
	if p != nil {
		p.Mailbox, p.UID = mbox, uint32(uid)
	}
	return uid, p, nil
}

// ingest parses and stores one message read from r, counting it in res.
func (s *Syncer) ingest(ctx context.Context, r io.Reader, source string, fallbackDate time.Time, res *Result) (*repo.IngestResult, *Problem, error) {
	res.Seen++
	if fallbackDate.IsZero() {
		fallbackDate = time.Now()
	}
	var early *repo.IngestResult
	opts := parseOptions{fallbackDate: fallbackDate, accept: func(h header) (bool, error) {
		if h.MessageID != "" {
			if ir, err := s.store.StoredEmail(ctx, h.MessageID); err != nil || ir != nil {
				early = ir
				return false, err
			}
		}
		n, err := s.store.KnownEmailContacts(ctx, slices.Concat([]string{h.From}, h.To, h.Cc))
		if err == nil && n == 0 {
			early = &repo.IngestResult{Outcome: repo.EmailSkipped, MessageID: h.MessageID}
		}
		return n > 0, err
	}}
	if s.cfg.KeepAttachments {
		opts.keepAttachment = func(filename, mimeType string, r io.Reader) (string, int64, string, error) {
			return s.store.PutEmailAttachment(ctx, filename, mimeType, r)
		}
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
	ir, err := s.store.IngestEmail(ctx, *in)
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

func count(res *Result, ir repo.IngestResult) {
	switch ir.Outcome {
	case repo.EmailStored:
		res.Stored++
		res.touch(ir.ThreadID)
	case repo.EmailDuplicate:
		res.Duplicates++
	case repo.EmailSkipped:
		res.Skipped++
	}
}

// Import stores one raw RFC 822 message, attributed to the actor in ctx.
func Import(ctx context.Context, store *repo.Store, raw []byte, keepAttachments bool) (*Result, *repo.IngestResult, error) {
	s := &Syncer{store: store, cfg: Config{KeepAttachments: keepAttachments}.withDefaults()}
	res := &Result{ThreadIDs: []string{}, Problems: []Problem{}}
	ir, p, err := s.ingest(ctx, bytes.NewReader(raw), "import", time.Now(), res)
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
