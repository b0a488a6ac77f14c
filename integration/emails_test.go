package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/integration/testenv"
	"outreach/mailsync"
	"outreach/mailsync/imaptest"
)

// crlf turns a readable message into the wire's line endings.
func crlf(s string) []byte {
	return []byte(strings.ReplaceAll(strings.TrimLeft(s, "\n"), "\n", "\r\n"))
}

type syncResult struct {
	Seen           int      `json:"seen"`
	Stored         int      `json:"stored"`
	Duplicates     int      `json:"duplicates"`
	Skipped        int      `json:"skipped"`
	Failed         int      `json:"failed"`
	ThreadsTouched int      `json:"threads_touched"`
	ThreadIDs      []string `json:"thread_ids"`
	Problems       []struct {
		Mailbox string `json:"mailbox"`
		UID     uint32 `json:"uid"`
		Reason  string `json:"reason"`
		Detail  string `json:"detail"`
	} `json:"problems"`
	Mailboxes []struct {
		Mailbox   string `json:"mailbox"`
		Rescanned bool   `json:"rescanned"`
		LastUID   uint32 `json:"last_uid"`
	} `json:"mailboxes"`
	Retried   int  `json:"retried"`
	Recovered int  `json:"recovered"`
	Complete  bool `json:"complete"`
}

type emailMessage struct {
	ID          string   `json:"id"`
	ThreadID    string   `json:"thread_id"`
	MessageID   string   `json:"message_id"`
	From        string   `json:"from"`
	To          []string `json:"to"`
	Cc          []string `json:"cc"`
	Subject     string   `json:"subject"`
	Date        string   `json:"date"`
	BodyText    string   `json:"body_text"`
	ContactIDs  []string `json:"contact_ids"`
	FromContact string   `json:"from_contact_id"`
	Attachments []struct {
		Filename  string `json:"filename"`
		MIMEType  string `json:"mime_type"`
		SizeBytes int64  `json:"size_bytes"`
	} `json:"attachments"`
}

type emailThread struct {
	ID                 string         `json:"id"`
	Subject            string         `json:"subject"`
	ContactIDs         []string       `json:"contact_ids"`
	Messages           []emailMessage `json:"messages"`
	LastContactReplyAt *string        `json:"last_contact_reply_at"`
	Contacts           []struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		Email string `json:"email"`
	} `json:"contacts"`
	Opportunities []struct {
		ID     string `json:"id"`
		LinkID string `json:"link_id"`
		Title  string `json:"title"`
	} `json:"opportunities"`
}

// inbox is the shared mailbox of TestEmailSync: threads between the team
// and two known contacts, an unknown address, and awkward messages.
func inbox(big []byte) [][]byte {
	return [][]byte{
		// 1: the team writes to Jane (quoted-printable, UTF-8).
		crlf(`
Message-ID: <m1@pr.example>
From: Team <team@pr.example>
To: Jane Doe <jane@planet.example>
Subject: Launch embargo
Date: Mon, 2 Mar 2026 09:00:00 +0000
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: quoted-printable

Embargo until Thursday, caf=C3=A9 at ten.
Details below.
`),
		// 2: Jane answers (multipart/alternative: the text part is kept).
		crlf(`
Message-ID: <m2@planet.example>
In-Reply-To: <m1@pr.example>
References: <m1@pr.example>
From: jane@planet.example
To: team@pr.example
Subject: Re: Launch embargo
Date: Mon, 2 Mar 2026 11:00:00 +0000
MIME-Version: 1.0
Content-Type: multipart/alternative; boundary="alt"

--alt
Content-Type: text/plain; charset=utf-8

Works for me.
--alt
Content-Type: text/html; charset=utf-8

<p>HTML works for me.</p>
--alt--
`),
		// 3: to an unknown address: skipped.
		crlf(`
Message-ID: <m3@pr.example>
From: team@pr.example
To: stranger@nowhere.example
Subject: Hello
Date: Mon, 2 Mar 2026 12:00:00 +0000

Who are you?
`),
		// 4: Omar (his address typed in another case), Jane in Cc; an
		// encoded subject, Latin-1 body in base64, no Message-ID.
		crlf(`
From: =?utf-8?B?T21hcg==?= <OMAR@Ledger.Example>
To: team@pr.example
Cc: jane@planet.example
Subject: =?ISO-8859-1?Q?Caf=E9_interview?=
Date: Tue, 3 Mar 2026 08:00:00 +0100
Content-Type: text/plain; charset=iso-8859-1
Content-Transfer-Encoding: base64

R3L832UsIHdoZW4gY2FuIHdlIHRhbGs/
`),
		// 5: the team answers Omar without reply headers: joined by subject.
		crlf(`
Message-ID: <m5@pr.example>
From: team@pr.example
To: omar@ledger.example
Subject: AW: Café interview
Date: Tue, 3 Mar 2026 09:00:00 +0000
Content-Type: text/plain; charset=utf-8

Thursday at 3.
`),
		// 6: a reply chain across subjects: Jane changes the subject.
		crlf(`
Message-ID: <m6@planet.example>
In-Reply-To: <m2@planet.example>
References: <m1@pr.example> <m2@planet.example>
From: jane@planet.example
To: team@pr.example
Subject: Photographer for the launch?
Date: Wed, 4 Mar 2026 10:00:00 +0000

Can we bring a photographer?
`),
		// 7: nested multiparts with an attachment named in RFC 2231.
		crlf(`
Message-ID: <m7@pr.example>
From: team@pr.example
To: jane@planet.example
Subject: Press kit
Date: Thu, 5 Mar 2026 09:00:00 +0000
Content-Type: multipart/mixed; boundary=outer

--outer
Content-Type: multipart/alternative; boundary=inner

--inner
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: base64

S2l0IGF0dGFjaGVkLg==
--inner
Content-Type: text/html; charset=utf-8

<p>Kit attached.</p>
--inner--
--outer
Content-Type: application/pdf
Content-Disposition: attachment; filename*=UTF-8''Press%20kit%20%C3%BC.pdf
Content-Transfer-Encoding: base64

JVBERi0xLjQK
--outer--
`),
		// 8: HTML only, windows-1252, an odd date, joined by subject.
		crlf(`
Message-ID: <m8@planet.example>
From: jane@planet.example
To: team@pr.example
Subject: RE: Press kit
Date: 2026-03-06 10:00:00
Content-Type: text/html; charset=windows-1252
Content-Transfer-Encoding: quoted-printable

<html><head><style>p{color:red}</style></head><body><p>Got it =80 thanks</p><script>x()</script></body></html>
`),
		// 9: malformed.
		crlf(`
From jane@planet.example
This is not a header line

body
`),
		// 10: a 20 MB attachment.
		big,
	}
}

// bigMessage is a message from Jane with an attachment of n bytes.
func bigMessage(n int) []byte {
	var b bytes.Buffer
	b.Write(crlf(`
Message-ID: <m10@planet.example>
From: jane@planet.example
To: team@pr.example
Subject: Raw footage
Date: Sat, 7 Mar 2026 10:00:00 +0000
Content-Type: multipart/mixed; boundary=big

--big
Content-Type: text/plain

Footage attached.
--big
Content-Type: video/mp4
Content-Disposition: attachment; filename="footage.mp4"
Content-Transfer-Encoding: base64

`))
	data := bytes.Repeat([]byte("0123456789abcdef"), n/16)
	enc := base64.StdEncoding.EncodeToString(data)
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n--big--\r\n")
	return b.Bytes()
}

func TestEmailSync(t *testing.T) {
	imap := imaptest.Start(t)
	env := testenv.NewWith(t, testenv.Options{Mail: &mailsync.Config{Addr: imap.Addr, Security: mailsync.SecurityPlain, User: imap.User, Password: imap.Password}})
	c := env.Client(env.AdminKey, "sync-session")
	jane := mk(t, c, "create_contact", M{"first_name": "Jane", "last_name": "Doe", "email": "Jane@Planet.example"})
	omar := mk(t, c, "create_contact", M{"first_name": "Omar", "last_name": "Ali", "email": "omar@ledger.example"})
	const bigSize = 20 << 20
	imap.Append("INBOX", inbox(bigMessage(bigSize))...)

	// The first sync is called by a client that asks for progress.
	var mu sync.Mutex
	var progress []float64
	pc := mcp.NewClient(&mcp.Implementation{Name: "progress-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Progress)
			mu.Unlock()
		},
	})
	cs, err := pc.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: env.URL,
		HTTPClient: &http.Client{Transport: sessionBearer{key: env.AdminKey, session: "sync-session"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "sync_emails", Arguments: M{}}
	params.SetProgressToken("sync-1")
	out, err := cs.CallTool(context.Background(), params)
	if err != nil || out.IsError {
		t.Fatalf("sync_emails: %v %+v", err, out)
	}
	var r syncResult
	if err := json.Unmarshal([]byte(out.Content[0].(*mcp.TextContent).Text), &r); err != nil {
		t.Fatal(err)
	}
	// Notifications may arrive after the result: wait for them (the bound
	// only ends a test that would hang; they come in milliseconds).
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		mu.Lock()
		n := len(progress)
		mu.Unlock()
		if n == 10 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	if len(progress) != 10 || progress[9] != 10 {
		t.Errorf("progress notifications %v, want 1 to 10", progress)
	}
	mu.Unlock()
	if r.Seen != 10 || r.Stored != 8 || r.Skipped != 1 || r.Failed != 1 || r.Duplicates != 0 || r.ThreadsTouched != 4 || !r.Complete {
		t.Fatalf("first sync = %+v, want 10 seen, 8 stored, 1 skipped, 1 failed, 4 threads, complete", r)
	}
	if p := r.Problems[0]; p.Reason != "malformed" || p.UID != 9 || p.Mailbox != "INBOX" {
		t.Errorf("problem = %+v, want the malformed message 9 of INBOX", p)
	}

	var list struct {
		Total   int `json:"total"`
		Threads []struct {
			ID           string   `json:"id"`
			Subject      string   `json:"subject"`
			MessageCount int      `json:"message_count"`
			ContactIDs   []string `json:"contact_ids"`
		} `json:"threads"`
	}
	c.Must("list_email_threads", M{}, &list)
	type shape struct {
		Subject  string
		Messages int
		Contacts []string
	}
	var got []shape
	ids := map[string]string{}
	for _, th := range list.Threads {
		cs := slices.Clone(th.ContactIDs)
		sort.Strings(cs)
		got = append(got, shape{th.Subject, th.MessageCount, cs})
		ids[th.Subject] = th.ID
	}
	both := []string{jane, omar}
	sort.Strings(both)
	want := []shape{ // newest last message first
		{"Raw footage", 1, []string{jane}},
		{"Press kit", 2, []string{jane}},
		{"Launch embargo", 3, []string{jane}},
		{"Café interview", 2, both},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("threads (-want +got):\n%s", diff)
	}

	thread := func(subject string) emailThread {
		var th emailThread
		c.Must("get_email_thread", M{"id": ids[subject]}, &th)
		return th
	}
	launch := thread("Launch embargo")
	bodies := []string{}
	for _, m := range launch.Messages {
		bodies = append(bodies, m.BodyText)
	}
	if diff := cmp.Diff([]string{"Embargo until Thursday, café at ten.\nDetails below.", "Works for me.", "Can we bring a photographer?"}, bodies); diff != "" {
		t.Errorf("launch thread bodies, oldest first (-want +got):\n%s", diff)
	}
	if launch.Messages[1].FromContact != jane || launch.LastContactReplyAt == nil || *launch.LastContactReplyAt != "2026-03-04T10:00:00Z" {
		t.Errorf("Jane's reply: from_contact_id %q, last_contact_reply_at %v", launch.Messages[1].FromContact, launch.LastContactReplyAt)
	}
	if len(launch.Contacts) != 1 || launch.Contacts[0].ID != jane || launch.Contacts[0].Name != "Jane Doe" {
		t.Errorf("launch contacts = %+v", launch.Contacts)
	}
	cafe := thread("Café interview")
	if m := cafe.Messages[0]; m.BodyText != "Grüße, when can we talk?" || m.From != "Omar <omar@ledger.example>" || !strings.HasPrefix(m.MessageID, "sha256-") ||
		m.Date != "2026-03-03T07:00:00Z" || !slices.Contains(m.ContactIDs, jane) {
		t.Errorf("Omar's message = %+v", m)
	}
	kit := thread("Press kit")
	if a := kit.Messages[0].Attachments; len(a) != 1 || a[0].Filename != "Press kit ü.pdf" || a[0].MIMEType != "application/pdf" || a[0].SizeBytes != 9 {
		t.Errorf("press kit attachments = %+v", a)
	}
	if m := kit.Messages[1]; m.BodyText != "Got it € thanks" || m.Date != "2026-03-06T10:00:00Z" {
		t.Errorf("HTML-only message = %q at %s", m.BodyText, m.Date)
	}
	footage := thread("Raw footage")
	if a := footage.Messages[0].Attachments; len(a) != 1 || a[0].SizeBytes != bigSize || a[0].Filename != "footage.mp4" {
		t.Errorf("20 MB attachment = %+v", a)
	}

	// The interaction log shows one entry per message, with the message's id.
	var log struct {
		Total   int `json:"total_entries"`
		Entries []struct {
			Type, ID, Title, Summary string
		} `json:"entries"`
	}
	c.Must("get_interaction_log", M{"contact_id": omar}, &log)
	if log.Total != 2 || log.Entries[0].ID != cafe.Messages[1].ID || log.Entries[1].ID != cafe.Messages[0].ID ||
		log.Entries[1].Title != "Café interview" || log.Entries[1].Summary != "Grüße, when can we talk?" {
		t.Errorf("Omar's log = %+v", log)
	}
	c.Must("get_interaction_log", M{"contact_id": jane}, &log)
	if log.Total != 7 {
		t.Errorf("Jane's log has %d entries, want 7 (her messages and those she is copied on)", log.Total)
	}
	var contactMail struct {
		Total    int            `json:"total"`
		Messages []emailMessage `json:"messages"`
	}
	c.Must("get_contact_emails", M{"contact_id": omar}, &contactMail)
	if contactMail.Total != 2 || contactMail.Messages[0].ThreadID != cafe.ID {
		t.Errorf("get_contact_emails(omar) = %+v", contactMail)
	}
	c.Must("get_contact_emails", M{"contact_id": jane, "since": "2026-03-05", "limit": 2}, &contactMail)
	if contactMail.Total != 3 || len(contactMail.Messages) != 2 || contactMail.Messages[0].Subject != "Raw footage" {
		t.Errorf("get_contact_emails(jane, since 5 March, limit 2) = total %d, %d messages", contactMail.Total, len(contactMail.Messages))
	}
	c.Must("search_emails", M{"query": "EMBARGO"}, &contactMail)
	if contactMail.Total != 2 {
		t.Errorf("search_emails(EMBARGO) found %d, want 2", contactMail.Total)
	}
	c.Must("search_emails", M{"query": "café at ten."}, &contactMail)
	if contactMail.Total != 1 || contactMail.Messages[0].ID != launch.Messages[0].ID {
		t.Errorf("search_emails is not literal: %+v", contactMail)
	}

	// The sync writes as the caller: user, agent key and session.
	var changes struct {
		Changes []struct {
			UserID    string `json:"user_id"`
			SessionID string `json:"session_id"`
			Tool      string `json:"tool"`
		} `json:"changes"`
	}
	c.Must("get_change_log", M{"record_id": launch.ID}, &changes)
	if len(changes.Changes) != 3 {
		t.Errorf("launch thread has %d changes, want 3 (created, then two messages)", len(changes.Changes))
	}
	for _, ch := range changes.Changes {
		if ch.UserID != env.AdminUserID || ch.SessionID != "sync-session" || ch.Tool != "sync_emails" {
			t.Errorf("change attributed to %+v", ch)
		}
	}

	// A second sync adds nothing.
	c.Must("sync_emails", M{}, &r)
	if r.Seen != 0 || r.Stored != 0 || !r.Complete {
		t.Errorf("second sync = %+v, want nothing seen or stored", r)
	}
	// A message appended later arrives on the next sync, in its thread.
	imap.Append("INBOX", crlf(`
Message-ID: <m11@ledger.example>
In-Reply-To: <m5@pr.example>
From: omar@ledger.example
To: team@pr.example
Subject: Re: AW: Café interview
Date: Wed, 4 Mar 2026 09:00:00 +0000

Thursday works.
`))
	c.Must("sync_emails", M{}, &r)
	if r.Seen != 1 || r.Stored != 1 || len(r.ThreadIDs) != 1 || r.ThreadIDs[0] != cafe.ID {
		t.Errorf("sync after an append = %+v, want 1 stored in %s", r, cafe.ID)
	}
	// UIDVALIDITY changed under the sync: a full rescan, no duplicates.
	imap.SetUIDValidity("INBOX", imap.UIDValidity("INBOX")+1000)
	c.Must("sync_emails", M{}, &r)
	if r.Seen != 11 || r.Stored != 0 || r.Duplicates != 9 || r.Skipped != 1 || len(r.Mailboxes) != 1 || !r.Mailboxes[0].Rescanned {
		t.Errorf("sync after UIDVALIDITY changed = %+v, want 11 seen, 9 duplicates, rescanned", r)
	}
	c.Must("list_email_threads", M{}, &list)
	n := 0
	for _, th := range list.Threads {
		n += th.MessageCount
	}
	if list.Total != 4 || n != 9 {
		t.Errorf("after the rescan: %d threads with %d messages, want 4 with 9", list.Total, n)
	}
	c.Must("sync_emails", M{}, &r)
	if r.Seen != 0 {
		t.Errorf("sync after the rescan saw %d messages again", r.Seen)
	}
	// The server gone: a retryable unavailable, nothing written.
	imap.Stop()
	if e := c.Fail("sync_emails", M{}, "unavailable"); !e.Retryable {
		t.Errorf("sync with the server down: %+v, want retryable", e)
	}
}

func TestEmailOpportunityLinks(t *testing.T) {
	env := testenv.New(t)
	c := env.Client(env.AdminKey, "link-session")
	jane := mk(t, c, "create_contact", M{"first_name": "Jane", "last_name": "Doe", "email": "jane@planet.example"})
	outlet := mk(t, c, "create_outlet", M{"name": "Planet"})
	c.Must("add_contact_outlet", M{"contact_id": jane, "outlet_id": outlet}, nil)
	opp := mk(t, c, "create_opportunity", M{"title": "Launch story"})
	var imp struct {
		Outcome   string `json:"outcome"`
		ThreadID  string `json:"thread_id"`
		EmailID   string `json:"email_id"`
		MessageID string `json:"message_id"`
	}
	raw := base64.StdEncoding.EncodeToString(crlf(`
Message-ID: <x1@planet.example>
From: jane@planet.example
To: team@pr.example
Subject: Story idea
Date: Mon, 2 Mar 2026 09:00:00 +0000

Shall we talk about the launch?
`))
	c.Must("import_email", M{"raw_base64": raw}, &imp)
	if imp.Outcome != "stored" || imp.ThreadID == "" || imp.EmailID == "" || imp.MessageID != "x1@planet.example" {
		t.Fatalf("import = %+v; want stored, with the message's id and its Message-ID", imp)
	}
	var changes struct {
		Changes []struct {
			UserID    string `json:"user_id"`
			SessionID string `json:"session_id"`
			Tool      string `json:"tool"`
		} `json:"changes"`
	}
	c.Must("get_change_log", M{"record_id": imp.ThreadID}, &changes)
	if len(changes.Changes) != 1 || changes.Changes[0].UserID != env.AdminUserID || changes.Changes[0].SessionID != "link-session" || changes.Changes[0].Tool != "import_email" {
		t.Errorf("import attributed to %+v, want the caller's session", changes.Changes)
	}
	c.Must("import_email", M{"raw_base64": raw}, &imp)
	if imp.Outcome != "duplicate" {
		t.Errorf("second import = %+v, want duplicate", imp)
	}
	c.Must("import_email", M{"raw_base64": base64.StdEncoding.EncodeToString(crlf("From: a@nowhere.example\nTo: b@nowhere.example\nSubject: x\n\nhi\n"))}, &imp)
	if imp.Outcome != "skipped" {
		t.Errorf("import without a known contact = %+v, want skipped", imp)
	}

	var link struct {
		Link struct {
			ID string `json:"id"`
		} `json:"link"`
	}
	c.Must("link_email_opportunity", M{"thread_id": imp.ThreadID, "opportunity_id": opp}, &link)
	e := c.Fail("link_email_opportunity", M{"thread_id": imp.ThreadID, "opportunity_id": opp}, "conflict")
	if !strings.Contains(e.Message, link.Link.ID) {
		t.Errorf("second link: %s, want the existing link's id", e.Message)
	}
	var log struct {
		Total   int `json:"total_entries"`
		Entries []struct {
			ID string `json:"id"`
		} `json:"entries"`
	}
	for _, q := range []M{{"opportunity_id": opp}, {"outlet_id": outlet}, {"contact_id": jane, "opportunity_id": opp}} {
		c.Must("get_interaction_log", q, &log)
		if log.Total != 1 || log.Entries[0].ID != imp.EmailID {
			t.Errorf("log %v = %+v, want the message %s", q, log, imp.EmailID)
		}
	}
	var th emailThread
	c.Must("get_email_thread", M{"id": imp.ThreadID}, &th)
	if len(th.Opportunities) != 1 || th.Opportunities[0].ID != opp || th.Opportunities[0].LinkID != link.Link.ID || th.Opportunities[0].Title != "Launch story" {
		t.Errorf("thread opportunities = %+v", th.Opportunities)
	}
	var threads struct {
		Total int `json:"total"`
	}
	c.Must("list_email_threads", M{"opportunity_id": opp}, &threads)
	if threads.Total != 1 {
		t.Errorf("threads of the opportunity = %d", threads.Total)
	}

	c.Must("unlink_email_opportunity", M{"id": link.Link.ID}, nil)
	c.Must("get_interaction_log", M{"opportunity_id": opp}, &log)
	if log.Total != 0 {
		t.Errorf("after unlink the opportunity's log has %d entries", log.Total)
	}
	c.Fail("unlink_email_opportunity", M{"id": link.Link.ID}, "not_found")
	// The unlink is a change like any other: rolling back the session
	// puts the link back, with its id.
	c.Must("link_email_opportunity", M{"thread_id": imp.ThreadID, "opportunity_id": opp}, &link)
	c2 := env.Client(env.AdminKey, "unlink-session")
	c2.Must("unlink_email_opportunity", M{"id": link.Link.ID}, nil)
	c2.Must("rollback_session", M{"session_id": "unlink-session"}, nil)
	c.Must("get_email_thread", M{"id": imp.ThreadID}, &th)
	if len(th.Opportunities) != 1 || th.Opportunities[0].LinkID != link.Link.ID {
		t.Errorf("after rolling back the unlink: %+v", th.Opportunities)
	}
}

func TestEmailToolsRefuseBadInput(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	uuidLike := "00000000-0000-4000-8000-000000000000"
	tests := []struct {
		tool  string
		args  M
		code  string
		field string
	}{
		{"sync_emails", M{}, "failed_precondition", ""},
		{"sync_emails", M{"mailbox": "INBOX"}, "invalid_argument", "mailbox"},
		{"import_email", M{}, "invalid_argument", "raw_base64"},
		{"import_email", M{"raw_base64": "%%%"}, "invalid_argument", "raw_base64"},
		{"import_email", M{"raw_base64": ""}, "invalid_argument", "raw_base64"},
		{"import_email", M{"raw_base64": base64.StdEncoding.EncodeToString([]byte("From jane\nnot a header\n\nx"))}, "invalid_argument", "raw_base64"},
		{"list_email_threads", M{"contact_id": "nope"}, "invalid_argument", "contact_id"},
		{"list_email_threads", M{"limit": 500}, "invalid_argument", "limit"},
		{"list_email_threads", M{"since": "2026-02-30"}, "invalid_argument", "since"},
		{"get_email_thread", M{"id": "x"}, "invalid_argument", "id"},
		{"get_email_thread", M{"id": uuidLike}, "not_found", ""},
		{"search_emails", M{}, "invalid_argument", "query"},
		{"search_emails", M{"query": "  "}, "invalid_argument", "query"},
		{"get_contact_emails", M{"contact_id": uuidLike}, "not_found", ""},
		{"get_contact_emails", M{"contact_id": "x"}, "invalid_argument", "contact_id"},
		{"link_email_opportunity", M{"thread_id": uuidLike, "opportunity_id": "x"}, "invalid_argument", "opportunity_id"},
		{"link_email_opportunity", M{"thread_id": uuidLike, "opportunity_id": uuidLike}, "not_found", ""},
		{"unlink_email_opportunity", M{"id": uuidLike}, "not_found", ""},
	}
	for _, tt := range tests {
		e := c.Fail(tt.tool, tt.args, tt.code)
		if e.Field != tt.field {
			t.Errorf("%s %v: field %q, want %q (%s)", tt.tool, tt.args, e.Field, tt.field, e.Message)
		}
	}
	var log struct {
		Total int `json:"total"`
	}
	c.Must("get_change_log", M{"collection": "email_threads"}, &log)
	if log.Total != 0 {
		t.Errorf("refused calls wrote %d changes", log.Total)
	}
}

// TestServeSyncsTheConfiguredInbox runs the binary with the shared inbox in
// its environment: the automatic sync runs at start as its own agent, and
// sync_emails reads the same mailbox. A configuration that cannot work
// stops the start with the reason.
func TestServeSyncsTheConfiguredInbox(t *testing.T) {
	imap := imaptest.Start(t)
	imap.Append("INBOX", crlf(`
Message-ID: <early@pr.example>
From: team@pr.example
To: jane@planet.example
Subject: Before Jane was a contact
Date: Mon, 2 Mar 2026 09:00:00 +0000

Hello.
`))
	data := dataDir(t)
	mailEnv := []string{"OUTREACH_IMAP_ADDR=" + imap.Addr, "OUTREACH_IMAP_SECURITY=plain", "OUTREACH_IMAP_USER=" + imap.User,
		"OUTREACH_IMAP_PASSWORD=" + imap.Password, "OUTREACH_IMAP_INTERVAL=1h"}
	srv := startServer(t, data, mailEnv...)
	c := mustDial(t, srv.URL, srv.FirstKey)
	var changes struct {
		Total   int `json:"total"`
		Changes []struct {
			AgentID   string `json:"agent_id"`
			SessionID string `json:"session_id"`
		} `json:"changes"`
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); { // the automatic sync records where it stands
		c.must(t, "get_change_log", M{"collection": "settings", "agent_id": "email-sync"}, &changes)
		if changes.Total > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if changes.Total == 0 || !strings.HasPrefix(changes.Changes[0].SessionID, "email-sync-") {
		t.Fatalf("the automatic sync wrote no state as the email-sync agent: %+v\n%s", changes, srv.stderr)
	}
	// What the automatic sync did not store is where an agent can read it.
	var st struct {
		Held []struct {
			UID       int    `json:"uid"`
			Reason    string `json:"reason"`
			MessageID string `json:"message_id"`
		} `json:"held"`
	}
	c.must(t, "get_sync_status", M{}, &st)
	if len(st.Held) != 1 || st.Held[0].Reason != "no_contact" || st.Held[0].MessageID != "early@pr.example" {
		t.Errorf("get_sync_status after the automatic sync: %+v; want the message skipped for want of a contact", st)
	}
	var contact struct {
		ID string `json:"id"`
	}
	c.must(t, "create_contact", M{"first_name": "Jane", "last_name": "Doe", "email": "jane@planet.example"}, &contact)
	imap.Append("INBOX", crlf(`
Message-ID: <later@planet.example>
From: jane@planet.example
To: team@pr.example
Subject: Now I am known
Date: Tue, 3 Mar 2026 09:00:00 +0000

Hi.
`))
	var r syncResult
	c.must(t, "sync_emails", M{}, &r)
	// The message skipped before Jane was a contact is stored now too.
	if r.Seen != 1 || r.Stored != 2 || r.Retried != 1 || r.Recovered != 1 {
		t.Errorf("sync_emails on the served inbox = %+v, want the new message and the one skipped before stored", r)
	}
	srv.term(20 * time.Second)

	bad := exec.Command(binary(t), "serve", "--data", dataDir(t), "--addr", "127.0.0.1:0")
	bad.Env = append(os.Environ(), "OUTREACH_IMAP_ADDR=imap.example.com:143", "OUTREACH_IMAP_SECURITY=plain",
		"OUTREACH_IMAP_USER=u", "OUTREACH_IMAP_PASSWORD=p")
	out, err := bad.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "loopback") {
		t.Errorf("a plain connection to a remote server was not refused at start: %v\n%s", err, out)
	}
}
