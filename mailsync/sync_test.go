package mailsync_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/mailsync"
	"outreach/mailsync/imaptest"
	"outreach/repo"
	"outreach/repo/directory"
	"outreach/repo/inbox"
)

func message(i int, from, to string) []byte {
	return []byte(strings.ReplaceAll(fmt.Sprintf(`Message-ID: <n%d@pr.example>
From: %s
To: %s
Subject: Note %d
Date: Mon, 2 Mar 2026 09:%02d:00 +0000

Message number %d.
`, i, from, to, i, i%60, i), "\n", "\r\n"))
}

// world is a store with one known contact and a Dovecot holding n messages
// between the team and that contact.
func world(t *testing.T, n int) (*repo.Store, *imaptest.Server, context.Context) {
	t.Helper()
	store := testenv.OpenStore(t, testenv.Options{})
	ctx := audit.WithActor(context.Background(), repo.SystemActor("test-setup"))
	first, last, email := "Jane", "Doe", "jane@planet.example"
	if _, err := directory.Of(store).CreateContact(ctx, directory.ContactFields{FirstName: &first, LastName: &last, Email: &email}, nil); err != nil {
		t.Fatal(err)
	}
	srv := imaptest.Start(t)
	var msgs [][]byte
	for i := 1; i <= n; i++ {
		msgs = append(msgs, message(i, "team@pr.example", email))
	}
	srv.Append("INBOX", msgs...)
	return store, srv, ctx
}

func config(srv *imaptest.Server) mailsync.Config {
	return mailsync.Config{Addr: srv.Addr, Security: mailsync.SecurityPlain, User: srv.User, Password: srv.Password}
}

// storedMessages counts the messages in every thread, and how many keys repeat.
func storedMessages(t *testing.T, store *repo.Store, ctx context.Context) (n, repeats int) {
	t.Helper()
	p, err := inbox.Of(store).ListEmailThreads(ctx, inbox.EmailThreadFilter{IncludeArchived: true}, 200, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, th := range p.Items {
		for _, m := range th.Messages {
			n++
			if seen[m.MessageID] {
				repeats++
			}
			seen[m.MessageID] = true
		}
	}
	return n, repeats
}

// TestSyncResumesAfterConnectionCut stops Dovecot in the middle of a sync:
// what was stored stays, the sync reports the failure, and the next sync
// (after the server is back) stores the rest, nothing twice.
func TestSyncResumesAfterConnectionCut(t *testing.T) {
	const n = 30
	store, srv, ctx := world(t, n)
	s, err := mailsync.New(store, config(srv))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	mailsync.SetAfterMessage(s, func(uint32) { once.Do(srv.Stop) })
	res, err := s.Sync(audit.WithActor(context.Background(), mailsync.Actor()), nil)
	var ie *mailsync.IMAPError
	if !errors.As(err, &ie) || res.Complete {
		t.Fatalf("sync with the server stopped: err %v, result %+v; want an IMAP error and an incomplete result", err, res)
	}
	got, _ := storedMessages(t, store, ctx)
	if got == 0 || got >= n || got != res.Stored {
		t.Fatalf("stored %d before the cut (result says %d), want some but not all of %d", got, res.Stored, n)
	}
	st, err := inbox.Of(store).EmailSyncState(ctx, s.Account(), "INBOX")
	if err != nil || st.LastUID != int64(got) {
		t.Errorf("sync state after the cut: last UID %d (%v), want %d", st.LastUID, err, got)
	}

	mailsync.SetAfterMessage(s, func(uint32) {})
	srv.Restart()
	res, err = s.Sync(audit.WithActor(context.Background(), mailsync.Actor()), nil)
	if err != nil || !res.Complete || res.Seen != n-got || res.Stored != n-got {
		t.Fatalf("resumed sync: %v %+v, want the %d remaining messages", err, res, n-got)
	}
	total, repeats := storedMessages(t, store, ctx)
	if total != n || repeats != 0 {
		t.Errorf("after resuming: %d messages stored, %d repeated; want %d and 0", total, repeats, n)
	}
}

// TestTwoInstancesSyncAtOnce: two syncers (two service instances on one
// database) read the same mailbox at the same time; every message is
// stored once.
func TestTwoInstancesSyncAtOnce(t *testing.T) {
	const n = 12
	store, srv, ctx := world(t, n)
	var wg sync.WaitGroup
	results := make([]*mailsync.Result, 2)
	for i := range results {
		s, err := mailsync.New(store, config(srv))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Sync(audit.WithActor(context.Background(), mailsync.Actor()), nil)
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		}()
	}
	wg.Wait()
	if results[0] == nil || results[1] == nil {
		t.FailNow()
	}
	if stored := results[0].Stored + results[1].Stored; stored != n {
		t.Errorf("the instances stored %d + %d messages, want %d in all", results[0].Stored, results[1].Stored, n)
	}
	total, repeats := storedMessages(t, store, ctx)
	if total != n || repeats != 0 {
		t.Errorf("%d messages stored, %d repeated; want %d and 0", total, repeats, n)
	}
}

// TestAutomaticSyncIsAttributedToItsOwnAgent: a scheduled sync writes as
// the sync's agent, one session per run; and a message over the size cap
// is reported, not read, and not retried.
func TestAutomaticSyncIsAttributedToItsOwnAgent(t *testing.T) {
	store, srv, ctx := world(t, 2)
	big := append(message(3, "jane@planet.example", "team@pr.example"), []byte(strings.Repeat("x", 4000)+"\r\n")...)
	srv.Append("INBOX", big)
	cfg := config(srv)
	cfg.MaxMessageBytes = 2000
	s, err := mailsync.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	actor := mailsync.Actor()
	var progress []int
	res, err := s.Sync(audit.WithActor(context.Background(), actor), func(done, total int, _ string) {
		if total != 3 {
			t.Errorf("progress total %d, want 3", total)
		}
		progress = append(progress, done)
	})
	if err != nil || res.Stored != 2 || res.Failed != 1 || res.Problems[0].Reason != "too_large" || res.Problems[0].UID != 3 {
		t.Fatalf("sync = %v %+v, want 2 stored and message 3 too large", err, res)
	}
	if fmt.Sprint(progress) != "[1 2 3]" {
		t.Errorf("progress %v, want [1 2 3]", progress)
	}
	page, err := store.ChangeLog(ctx, repo.ChangeFilter{Collection: "email_threads"}, 50, 0)
	if err != nil || page.Total == 0 {
		t.Fatalf("change log: %v %d", err, page.Total)
	}
	for _, e := range page.Items {
		if e.AgentID != "email-sync" || e.SessionID != actor.SessionID {
			t.Errorf("change %s by agent %s session %s, want email-sync %s", e.ID, e.AgentID, e.SessionID, actor.SessionID)
		}
	}
	res, err = s.Sync(audit.WithActor(context.Background(), mailsync.Actor()), nil)
	if err != nil || res.Seen != 0 {
		t.Errorf("next sync: %v %+v, want nothing (the large message is not retried)", err, res)
	}
}

func TestConfigCheck(t *testing.T) {
	for _, tt := range []struct {
		cfg  mailsync.Config
		want string
	}{
		{mailsync.Config{Addr: "imap.example.com", User: "u", Password: "p"}, "host:port"},
		{mailsync.Config{Addr: "imap.example.com:143", Security: "plain", User: "u", Password: "p"}, "loopback"},
		{mailsync.Config{Addr: "imap.example.com:993", Security: "ssl", User: "u", Password: "p"}, "use tls, starttls"},
		{mailsync.Config{Addr: "imap.example.com:993", Password: "p"}, "user is not set"},
		{mailsync.Config{Addr: "imap.example.com:993", User: "u"}, "password is not set"},
		{mailsync.Config{Addr: "imap.example.com:993", User: "u", Auth: "xoauth2"}, "token"},
		{mailsync.Config{Addr: "imap.gmail.com:993", User: "u", Token: "t"}, ""},
		{mailsync.Config{Addr: "127.0.0.1:143", Security: "plain", User: "u", Password: "p"}, ""},
	} {
		err := tt.cfg.Check()
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Check(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

// TestTLSAndOAuth2 connects the ways real mailboxes need: implicit TLS and
// STARTTLS, with a password, an XOAUTH2 bearer token (Gmail, Microsoft 365)
// or OAUTHBEARER; a wrong token is refused.
func TestTLSAndOAuth2(t *testing.T) {
	store := testenv.OpenStore(t, testenv.Options{})
	ctx := audit.WithActor(context.Background(), repo.SystemActor("test-setup"))
	first, last, email := "Jane", "Doe", "jane@planet.example"
	if _, err := directory.Of(store).CreateContact(ctx, directory.ContactFields{FirstName: &first, LastName: &last, Email: &email}, nil); err != nil {
		t.Fatal(err)
	}
	srv := imaptest.StartWith(t, imaptest.Options{TLS: true, OAuth2: true})
	srv.Append("INBOX", message(1, "team@pr.example", email))
	tokenFile := t.TempDir() + "/token"
	if err := os.WriteFile(tokenFile, []byte(srv.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsConf := &tls.Config{RootCAs: srv.RootCAs}
	for _, tt := range []struct {
		name string
		cfg  mailsync.Config
		ok   bool
	}{
		{"TLS with a password", mailsync.Config{Addr: srv.TLSAddr, Security: mailsync.SecurityTLS, Password: srv.Password}, true},
		{"STARTTLS with a password", mailsync.Config{Addr: srv.Addr, Security: mailsync.SecurityStartTLS, Password: srv.Password}, true},
		{"TLS with XOAUTH2", mailsync.Config{Addr: srv.TLSAddr, Token: srv.Token}, true},
		{"STARTTLS with OAUTHBEARER from a token file", mailsync.Config{Addr: srv.Addr, Security: mailsync.SecurityStartTLS, Auth: mailsync.AuthOAuthBearer, TokenFile: tokenFile}, true},
		{"TLS with a wrong token", mailsync.Config{Addr: srv.TLSAddr, Token: "expired"}, false},
		{"TLS with a wrong password", mailsync.Config{Addr: srv.TLSAddr, Password: "nope"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.User, tt.cfg.TLSConfig = srv.User, tlsConf
			s, err := mailsync.New(store, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Sync(audit.WithActor(context.Background(), mailsync.Actor()), nil)
			var ie *mailsync.IMAPError
			switch {
			case tt.ok && (err != nil || !res.Complete || len(res.Mailboxes) != 1 || res.Mailboxes[0].LastUID != 1):
				t.Errorf("sync: %v %+v, want a complete sync up to UID 1", err, res)
			case !tt.ok && !errors.As(err, &ie):
				t.Errorf("sync: %v, want an authentication failure", err)
			}
		})
	}
	if n, _ := storedMessages(t, store, ctx); n != 1 {
		t.Errorf("%d messages stored, want 1", n)
	}
}

// TestKeepAttachments: configured to, the sync streams attachment bytes
// into GridFS (as media are) and records the file on the message.
func TestKeepAttachments(t *testing.T) {
	store, srv, ctx := world(t, 0)
	payload := strings.Repeat("attachment bytes ", 40000) // ~680 KB, several chunks
	raw := strings.ReplaceAll(`Message-ID: <att@pr.example>
From: team@pr.example
To: jane@planet.example
Subject: Files
Date: Mon, 2 Mar 2026 09:00:00 +0000
Content-Type: multipart/mixed; boundary=b

--b
Content-Type: text/plain

See attached.
--b
Content-Type: text/plain; name="notes.txt"
Content-Disposition: attachment; filename="notes.txt"

`, "\n", "\r\n") + payload + "\r\n--b--\r\n"
	srv.Append("INBOX", []byte(raw))
	cfg := config(srv)
	cfg.KeepAttachments = true
	s, err := mailsync.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Sync(audit.WithActor(context.Background(), mailsync.Actor()), nil)
	if err != nil || res.Stored != 1 {
		t.Fatalf("sync: %v %+v", err, res)
	}
	p, err := inbox.Of(store).ListEmailThreads(ctx, inbox.EmailThreadFilter{}, 10, 0)
	if err != nil || len(p.Items) != 1 {
		t.Fatalf("threads: %v %d", err, len(p.Items))
	}
	m := p.Items[0].Messages[0]
	if m.BodyText != "See attached." || len(m.Attachments) != 1 {
		t.Fatalf("message = %+v", m)
	}
	a := m.Attachments[0]
	sum := sha256.Sum256([]byte(payload))
	if a.FileID == "" || a.SizeBytes != int64(len(payload)) || a.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("attachment = %+v, want a file of %d bytes", a, len(payload))
	}
	var file struct {
		Length int64 `bson:"length"`
	}
	if err := store.RawCollections().Database.Collection("fs.files").FindOne(ctx, bson.M{"_id": a.FileID}).Decode(&file); err != nil || file.Length != a.SizeBytes {
		t.Errorf("GridFS file %s: %v, length %d", a.FileID, err, file.Length)
	}
}

// TestFailedMessageIsRetried: a message over the size cap is held, the mark
// moves past it, and a later sync with a larger cap (the setting changed
// and the service restarted on the same store) stores it.
func TestFailedMessageIsRetried(t *testing.T) {
	store, srv, ctx := world(t, 2)
	big := []byte(strings.ReplaceAll("Message-ID: <big@pr.example>\nFrom: team@pr.example\nTo: jane@planet.example\nSubject: Big\nDate: Mon, 2 Mar 2026 10:00:00 +0000\n\n"+
		strings.Repeat("x", 8<<10)+"\n", "\n", "\r\n"))
	srv.Append("INBOX", big)
	cfg := config(srv)
	cfg.MaxMessageBytes = 4 << 10
	small, err := mailsync.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := small.Sync(audit.WithActor(context.Background(), mailsync.Actor()), nil)
	if err != nil || res.Stored != 2 || res.Failed != 1 || res.Problems[0].Reason != inbox.HeldTooLarge || res.Problems[0].UID != 3 {
		t.Fatalf("sync with a 4 KiB cap: %v %+v; want 2 stored and UID 3 too large", err, res)
	}
	st, err := inbox.Of(store).EmailSyncStatus(ctx, "", 50, 0)
	if err != nil || st.HeldTotal != 1 || st.Held[0].UID != 3 || st.Held[0].SizeBytes == 0 || st.Mailboxes[0].LastUID != 3 {
		t.Fatalf("status: %v %+v; want UID 3 held and the mark at 3", err, st)
	}
	cfg.MaxMessageBytes = 1 << 20
	large, err := mailsync.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err = large.Sync(audit.WithActor(context.Background(), mailsync.Actor()), nil)
	if err != nil || res.Seen != 0 || res.Retried != 1 || res.Recovered != 1 || res.Stored != 1 {
		t.Fatalf("sync with a 1 MiB cap: %v %+v; want the held message retried and stored", err, res)
	}
	if n, _ := storedMessages(t, store, ctx); n != 3 {
		t.Errorf("%d messages stored; want 3", n)
	}
	st, err = inbox.Of(store).EmailSyncStatus(ctx, "", 50, 0)
	if err != nil || st.HeldTotal != 0 {
		t.Errorf("status after the retry: %v %+v; want nothing held", err, st)
	}
}
