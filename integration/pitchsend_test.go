package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	netmail "net/mail"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/mailsync"
	"outreach/pitchsend"
	"outreach/pitchsend/mailtest"
	"outreach/repo"
	"outreach/repo/pitches"
)

// Pitches sent for real: Postfix on loopback as the submission server
// (STARTTLS, authentication), delivering into Dovecot, whose mailboxes the
// test reads over IMAP and whose team INBOX the inbox sync reads.

type mailEnv struct {
	*testenv.Env
	mail  *mailtest.Servers
	agent *testenv.Client
	admin *testenv.Client
}

func newMailEnv(t *testing.T, mailboxes ...string) *mailEnv {
	t.Helper()
	s := mailtest.Start(t, mailboxes...)
	env := testenv.NewWith(t, testenv.Options{
		Mail: &mailsync.Config{Addr: s.IMAP, Security: mailsync.SecurityPlain, User: mailtest.Team, Password: s.Passwords[mailtest.Team],
			Mailboxes: []string{"INBOX"}, Timeout: 10 * time.Second},
		Pitches: &pitchsend.Config{Addr: s.Submission, Security: pitchsend.SecurityStartTLS, User: mailtest.Team, Password: s.Passwords[mailtest.Team],
			From: "PR Team <" + mailtest.Team + ">", TLSConfig: &tls.Config{RootCAs: s.RootCAs, ServerName: "127.0.0.1"}, Timeout: 10 * time.Second},
	})
	return &mailEnv{Env: env, mail: s, agent: env.Client(env.Key("read", "write"), "pitching"), admin: env.Admin()}
}

func header(t *testing.T, raw []byte) netmail.Header {
	t.Helper()
	m, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return m.Header
}

func TestPitchSendOverSMTP(t *testing.T) {
	e := newMailEnv(t, "nia@paper.test", "dana@paper.test", "omar@paper.test")
	nia := mk(t, e.agent, "create_contact", M{"first_name": "Nia", "last_name": "Okafor", "email": "nia@paper.test"})
	dana := mk(t, e.agent, "create_contact", M{"first_name": "Dana", "last_name": "Ruiz", "email": "dana@paper.test", "do_not_contact": true, "do_not_contact_reason": "asked in May"})
	omar := mk(t, e.agent, "create_contact", M{"first_name": "Omar", "last_name": "Sy", "email": "omar@paper.test"})
	refused := mk(t, e.agent, "create_contact", M{"first_name": "Rae", "last_name": "Fuss", "email": "refused@paper.test"})
	gone := mk(t, e.agent, "create_contact", M{"first_name": "Noa", "last_name": "Gone", "email": "nobody@paper.test"})
	opp := mk(t, e.agent, "create_opportunity", M{"title": "Launch story", "stage": "drafting", "contact_ids": []string{nia, dana, omar, refused, gone}})
	e.agent.Must("add_suppression", M{"email": "omar@paper.test", "note": "asked by phone"}, nil)

	id := mk(t, e.agent, "create_pitch", M{"opportunity_id": opp, "contact_ids": []string{nia, dana, omar, refused, gone},
		"subject": "{{first_name}}, our launch", "body": "Hi {{first_name}},\n\nthe launch is on 3 December."})
	e.agent.Fail("approve_pitch", M{"id": id}, repo.CodePermissionDenied)
	e.admin.Must("approve_pitch", M{"id": id}, nil)
	var p pitchView
	e.agent.Must("send_pitch", M{"id": id}, &p)
	if p.State != "sent" {
		t.Fatalf("sent pitch: %+v\n%s", p, e.mail.Log())
	}
	by := map[string]int{}
	for i, r := range p.Recipients {
		by[r.ContactID] = i
	}
	rn, rd, ro, rr := p.Recipients[by[nia]], p.Recipients[by[dana]], p.Recipients[by[omar]], p.Recipients[by[refused]]
	if rn.State != "sent" || rn.MessageID == "" || rn.Attempts != 1 {
		t.Errorf("Nia: %+v", rn)
	}
	if rd.State != "suppressed" || rd.Guard != "do_not_contact" || !strings.Contains(rd.Reason, "asked in May") {
		t.Errorf("Dana (do-not-contact): %+v", rd)
	}
	if ro.State != "suppressed" || ro.Guard != "suppression" || !strings.Contains(ro.Reason, "manual") {
		t.Errorf("Omar (suppressed): %+v", ro)
	}
	if rr.State != "failed" || !strings.Contains(rr.Reason, "refused") || !strings.Contains(rr.Reason, "554") && !strings.Contains(rr.Reason, "550") {
		t.Errorf("Rae (refused by the server): %+v", rr)
	}

	// Nia's message arrived with the right headers; nothing reached the
	// refused recipients; the team's Sent folder has the copy.
	got := e.mail.WaitMessages("nia@paper.test", "INBOX", 1)
	h := header(t, got[0])
	if h.Get("Message-Id") != "<"+rn.MessageID+">" || h.Get("Subject") != "Nia, our launch" || !strings.Contains(h.Get("From"), mailtest.Team) {
		t.Errorf("headers: %v", h)
	}
	if h.Get("List-Unsubscribe-Post") != "List-Unsubscribe=One-Click" || !strings.HasPrefix(h.Get("List-Unsubscribe"), "<http://127.0.0.1:") {
		t.Errorf("unsubscribe headers: %v", h)
	}
	for _, who := range []string{"dana@paper.test", "omar@paper.test"} {
		if m := e.mail.Messages(who, "INBOX"); len(m) != 0 {
			t.Errorf("%s received %d messages although a guard refused them", who, len(m))
		}
	}
	sentIDs := map[string]bool{}
	for _, m := range e.mail.Messages(mailtest.Team, "Sent") {
		sentIDs[header(t, m).Get("Message-Id")] = true
	}
	if len(sentIDs) != 2 || !sentIDs["<"+rn.MessageID+">"] || !sentIDs["<"+p.Recipients[by[gone]].MessageID+">"] {
		t.Errorf("Sent folder: %v", sentIDs)
	}
	var o struct {
		Stage string `json:"stage"`
	}
	// The sent pitch moves its opportunity to pitched, unless a pipeline
	// guard refuses: Dana, do-not-contact, is still on the opportunity.
	e.agent.Must("get_opportunity", M{"id": opp}, &o)
	if o.Stage != "drafting" || !strings.Contains(p.StageNote, "do-not-contact") {
		t.Errorf("opportunity after the send: %s; stage note %q", o.Stage, p.StageNote)
	}
	e.agent.Must("remove_opportunity_contact", M{"opportunity_id": opp, "contact_id": dana}, nil)
	e.agent.Must("update_opportunity_stage", M{"id": opp, "stage": "pitched"}, nil)

	// The delivery is a series of send changes, none reversible.
	var log struct {
		Changes []struct {
			ID         string `json:"id"`
			Reversible bool   `json:"reversible"`
		} `json:"changes"`
	}
	e.agent.Must("get_change_log", M{"action": "send", "record_id": id}, &log)
	if len(log.Changes) == 0 {
		t.Fatal("no send changes")
	}
	for _, c := range log.Changes {
		if c.Reversible {
			t.Errorf("send change %s is reversible", c.ID)
		}
	}
	e.agent.Fail("rollback_change", M{"id": log.Changes[0].ID}, repo.CodeFailedPrecondition)

	// The message to a mailbox that does not exist comes back as a
	// delivery status notification to the team mailbox.
	if rg := p.Recipients[by[gone]]; rg.State != "sent" {
		t.Errorf("Noa (accepted by the submission server): %+v", rg)
	}
	e.mail.WaitMessages(mailtest.Team, "INBOX", 1)

	// The reply comes back through the inbox sync and moves the opportunity;
	// the same sync reads the bounce: Noa is bounced and suppressed.
	reply := fmt.Sprintf("From: Nia Okafor <nia@paper.test>\r\nTo: %s\r\nSubject: Re: Nia, our launch\r\nDate: %s\r\nMessage-ID: <reply-1@paper.test>\r\nIn-Reply-To: <%s>\r\nReferences: <%s>\r\n\r\nSounds good, call me.\r\n",
		mailtest.Team, time.Now().Format(time.RFC1123Z), rn.MessageID, rn.MessageID)
	e.mail.Append(mailtest.Team, "INBOX", []byte(reply))
	e.agent.Must("sync_emails", M{}, nil)
	p = getPitch(t, e.agent, id)
	if r := p.Recipients[by[nia]]; r.State != "replied" {
		t.Errorf("Nia after the reply: %+v", r)
	}
	e.agent.Must("get_opportunity", M{"id": opp}, &o)
	if o.Stage != "responded" {
		t.Errorf("opportunity after the reply: %s", o.Stage)
	}
	if r := p.Recipients[by[gone]]; r.State != "bounced" || !strings.Contains(r.Reason, "5.1.1") {
		t.Errorf("Noa after the bounce: %+v", r)
	}
	var hard struct {
		Suppressions []struct {
			Email   string `json:"email"`
			PitchID string `json:"pitch_id"`
		} `json:"suppressions"`
	}
	e.agent.Must("list_suppressions", M{"reason": "hard_bounce"}, &hard)
	if len(hard.Suppressions) != 1 || hard.Suppressions[0].Email != "nobody@paper.test" || hard.Suppressions[0].PitchID != id {
		t.Errorf("hard bounces: %+v", hard)
	}

	// The contact's dossier shows the pitch and what happened to them.
	var dossier struct {
		EmailPitches []struct {
			ID             string `json:"id"`
			Subject        string `json:"subject"`
			RecipientState string `json:"recipient_state"`
			Reason         string `json:"reason"`
		} `json:"email_pitches"`
	}
	e.agent.Must("get_contact_dossier", M{"contact_id": nia}, &dossier)
	if len(dossier.EmailPitches) != 1 || dossier.EmailPitches[0].ID != id || dossier.EmailPitches[0].RecipientState != "replied" || dossier.EmailPitches[0].Subject != "Nia, our launch" {
		t.Errorf("Nia's dossier: %+v", dossier.EmailPitches)
	}
	e.agent.Must("get_contact_dossier", M{"contact_id": dana}, &dossier)
	if len(dossier.EmailPitches) != 1 || dossier.EmailPitches[0].RecipientState != "suppressed" || !strings.Contains(dossier.EmailPitches[0].Reason, "do-not-contact") {
		t.Errorf("Dana's dossier: %+v", dossier.EmailPitches)
	}

	// The unsubscribe URL: signed, works once.
	link := strings.Trim(h.Get("List-Unsubscribe"), "<>")
	u, _ := url.Parse(link)
	bad := *u
	q := bad.Query()
	q.Set("t", q.Get("t")+"x")
	bad.RawQuery = q.Encode()
	if code, _ := unsubPost(t, bad.String()); code != http.StatusForbidden {
		t.Errorf("tampered link: %d", code)
	}
	if code, body := unsubGet(t, link); code != http.StatusOK || !strings.Contains(body, "<form") {
		t.Errorf("GET shows the form: %d %s", code, body)
	}
	var sups struct {
		Suppressions []struct {
			Email, Reason string
		} `json:"suppressions"`
	}
	e.agent.Must("list_suppressions", M{"reason": "unsubscribe"}, &sups)
	if len(sups.Suppressions) != 0 {
		t.Fatalf("a GET unsubscribed: %+v", sups)
	}
	if code, body := unsubPost(t, link); code != http.StatusOK || !strings.Contains(body, "is unsubscribed") {
		t.Errorf("one-click POST: %d %s", code, body)
	}
	before := len(changes(t, e.agent, M{}))
	if code, body := unsubPost(t, link); code != http.StatusOK || !strings.Contains(body, "already") {
		t.Errorf("second POST: %d %s", code, body)
	}
	if after := len(changes(t, e.agent, M{})); after != before {
		t.Errorf("the second use wrote %d changes", after-before)
	}
	e.agent.Must("list_suppressions", M{"reason": "unsubscribe"}, &sups)
	if len(sups.Suppressions) != 1 || sups.Suppressions[0].Email != "nia@paper.test" {
		t.Errorf("suppressions after the unsubscribe: %+v", sups)
	}
}

func unsubPost(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Post(u, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func unsubGet(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *mailEnv) pitch(t *testing.T, opp string, approve M, contacts ...string) string {
	t.Helper()
	id := mk(t, e.agent, "create_pitch", M{"opportunity_id": opp, "contact_ids": contacts, "subject": "Hello {{first_name}}", "body": "Hi {{first_name}}, news."})
	args := M{"id": id}
	for k, v := range approve {
		args[k] = v
	}
	e.admin.Must("approve_pitch", args, nil)
	return id
}

func (e *mailEnv) send(t *testing.T, id string) pitchView {
	t.Helper()
	var p pitchView
	e.agent.Must("send_pitch", M{"id": id}, &p)
	return p
}

// Each guard at the moment of sending, per recipient: the refused
// recipient's mailbox stays empty and the reason is recorded.
func TestPitchGuardsAtSend(t *testing.T) {
	e := newMailEnv(t, "ada@paper.test", "ben@paper.test", "cy@paper.test", "dee@paper.test")
	ada := mk(t, e.agent, "create_contact", M{"first_name": "Ada", "last_name": "L", "email": "ada@paper.test"})
	ben := mk(t, e.agent, "create_contact", M{"first_name": "Ben", "last_name": "M", "email": "ben@paper.test"})
	cy := mk(t, e.agent, "create_contact", M{"first_name": "Cy", "last_name": "N", "email": "cy@paper.test"})
	dee := mk(t, e.agent, "create_contact", M{"first_name": "Dee", "last_name": "O", "email": "dee@paper.test"})
	first := mk(t, e.agent, "create_opportunity", M{"title": "First", "contact_ids": []string{ada}})
	second := mk(t, e.agent, "create_opportunity", M{"title": "Second", "contact_ids": []string{ada, ben, cy}})
	byHand := mk(t, e.agent, "create_opportunity", M{"title": "By hand", "stage": "pitched", "contact_ids": []string{ben}})

	// Double pitch across pitches: Ada, pitched by the first opportunity's
	// pitch, is refused for the second; an approver's override lets it go.
	if p := e.send(t, e.pitch(t, first, nil, ada)); p.Recipients[0].State != "sent" {
		t.Fatalf("first pitch: %+v", p)
	}
	p := e.send(t, e.pitch(t, second, nil, ada))
	if r := p.Recipients[0]; r.State != "suppressed" || r.Guard != "double_pitch" || p.State != "failed" {
		t.Errorf("double pitch: %+v", p)
	}
	if n := len(e.mail.WaitMessages("ada@paper.test", "INBOX", 1)); n != 1 {
		t.Errorf("Ada has %d messages after the refused pitch", n)
	}
	if p := e.send(t, e.pitch(t, second, M{"override_reason": "Ada asked for the follow-up"}, ada)); p.Recipients[0].State != "sent" {
		t.Errorf("override: %+v", p)
	}
	e.mail.WaitMessages("ada@paper.test", "INBOX", 2)

	// Double pitch across stage history: Ben's other opportunity was moved
	// to pitched by hand.
	p = e.send(t, e.pitch(t, second, nil, ben, cy))
	if r := p.Recipients[0]; r.State != "suppressed" || r.Guard != "double_pitch" || !strings.Contains(r.Reason, byHand) {
		t.Errorf("Ben (stage history): %+v", r)
	}
	if r := p.Recipients[1]; r.State != "sent" {
		t.Errorf("Cy goes: %+v", r)
	}
	e.mail.WaitMessages("cy@paper.test", "INBOX", 1)

	// An embargo in force on the campaign refuses the recipient.
	camp := mk(t, e.agent, "create_campaign", M{"name": "Embargoed", "embargo_until": time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)})
	emb := mk(t, e.agent, "create_opportunity", M{"title": "Under embargo", "campaign_id": camp, "contact_ids": []string{dee}})
	if p := e.send(t, e.pitch(t, emb, nil, dee)); p.Recipients[0].Guard != "embargo" || !strings.Contains(p.Recipients[0].Reason, camp) {
		t.Errorf("embargo: %+v", p.Recipients[0])
	}

	// The per-domain cap: three recipients at paper.test were sent pitches today.
	pol := pitches.Of(e.Store).PitchPolicy()
	pol.DomainCap = 3
	pitches.Of(e.Store).SetPitchPolicy(pol)
	free := mk(t, e.agent, "create_opportunity", M{"title": "Free", "contact_ids": []string{dee}})
	if p := e.send(t, e.pitch(t, free, nil, dee)); p.Recipients[0].Guard != "domain_cap" {
		t.Errorf("domain cap: %+v", p.Recipients[0])
	}
	for _, who := range []string{"ben@paper.test", "dee@paper.test"} {
		if m := e.mail.Messages(who, "INBOX"); len(m) != 0 {
			t.Errorf("%s received %d messages although a guard refused them", who, len(m))
		}
	}
}

// A sender stopped after the message went (and its copy is in the Sent
// folder) but before the record: the next sender finds the copy and
// records the recipient sent without a second copy. Two senders on one
// scheduled pitch: one copy.
func TestPitchCrashAndTwoSenders(t *testing.T) {
	e := newMailEnv(t, "eve@paper.test", "fay@paper.test")
	eve := mk(t, e.agent, "create_contact", M{"first_name": "Eve", "last_name": "P", "email": "eve@paper.test"})
	fay := mk(t, e.agent, "create_contact", M{"first_name": "Fay", "last_name": "Q", "email": "fay@paper.test"})
	opp := mk(t, e.agent, "create_opportunity", M{"title": "Crash", "contact_ids": []string{eve, fay}})
	ctx := audit.WithActor(context.Background(), repo.SystemActor("test"))
	cfg := pitchsend.Config{Addr: e.mail.Submission, Security: pitchsend.SecurityStartTLS, User: mailtest.Team, Password: e.mail.Passwords[mailtest.Team],
		From: mailtest.Team, TLSConfig: &tls.Config{RootCAs: e.mail.RootCAs, ServerName: "127.0.0.1"}, Timeout: 10 * time.Second,
		Inbox: e.Syncer, PublicURL: "http://127.0.0.1:1", Lease: time.Millisecond}
	crash := errors.New("crashed")
	crashing := cfg
	crashing.Instance = "crashing"
	crashing.AfterSend = func(string) error { return crash }
	s1, err := pitchsend.New(e.Store, crashing, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	id := e.pitch(t, opp, nil, eve)
	if _, err := pitches.Of(e.Store).SchedulePitch(ctx, id, nil, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Deliver(ctx, id); !errors.Is(err, crash) {
		t.Fatalf("crashing sender: %v", err)
	}
	if p := getPitch(t, e.agent, id); p.State != "sending" || p.Recipients[0].State != "sending" || p.Recipients[0].Attempts != 1 {
		t.Fatalf("after the crash: %+v", p)
	}
	restarted := cfg
	restarted.Instance = "restarted"
	s2, err := pitchsend.New(e.Store, restarted, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	s2.RunOnce(ctx)
	p := getPitch(t, e.agent, id)
	if p.State != "sent" || p.Recipients[0].State != "sent" || !strings.Contains(p.Recipients[0].Note, "Sent folder") {
		t.Errorf("after the restart: %+v", p)
	}
	if m := e.mail.WaitMessages("eve@paper.test", "INBOX", 1); len(m) != 1 {
		t.Errorf("Eve has %d copies", len(m))
	}

	// Two senders, one scheduled pitch.
	id2 := e.pitch(t, opp, M{"override_reason": "second try"}, fay)
	if _, err := pitches.Of(e.Store).SchedulePitch(ctx, id2, nil, ""); err != nil {
		t.Fatal(err)
	}
	a, b := cfg, cfg
	a.Instance, b.Instance = "a", "b"
	a.Lease, b.Lease = time.Minute, time.Minute
	sa, _ := pitchsend.New(e.Store, a, zerolog.Nop())
	sb, _ := pitchsend.New(e.Store, b, zerolog.Nop())
	var wg sync.WaitGroup
	for _, s := range []*pitchsend.Sender{sa, sb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Deliver(ctx, id2)
		}()
	}
	wg.Wait()
	if p := getPitch(t, e.agent, id2); p.State != "sent" || p.Recipients[0].Attempts != 1 {
		t.Errorf("two senders: %+v", p)
	}
	if m := e.mail.WaitMessages("fay@paper.test", "INBOX", 1); len(m) != 1 {
		t.Errorf("Fay has %d copies", len(m))
	}
}

// dropAfterData is an SMTP server that takes a message and then, instead of
// answering the end of DATA, closes the connection (drop) or says nothing
// until the client gives up (hang).
func dropAfterData(t *testing.T, hang bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				tp := textproto.NewConn(c)
				tp.PrintfLine("220 fake ESMTP")
				for {
					line, err := tp.ReadLine()
					if err != nil {
						return
					}
					switch cmd := strings.ToUpper(strings.Fields(line + " x")[0]); cmd {
					case "EHLO", "HELO":
						tp.PrintfLine("250-fake\r\n250 8BITMIME")
					case "DATA":
						tp.PrintfLine("354 go ahead")
						if _, err := tp.ReadDotBytes(); err != nil {
							return
						}
						if hang {
							c.SetReadDeadline(time.Now().Add(10 * time.Second))
							io.Copy(io.Discard, c) // until the client gives up
						}
						return
					case "QUIT":
						tp.PrintfLine("221 bye")
						return
					default:
						tp.PrintfLine("250 ok")
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// The server drops the connection, or stops answering, after the message
// was transmitted: the recipient is failed with a reason that says it may
// have been delivered, under which Message-ID.
func TestPitchSMTPDropsAfterData(t *testing.T) {
	for _, hang := range []bool{false, true} {
		env := testenv.NewWith(t, testenv.Options{Pitches: &pitchsend.Config{Addr: dropAfterData(t, hang), Security: pitchsend.SecurityPlain,
			Auth: "none", From: "team@outreach.test", Timeout: 2 * time.Second}})
		agent, admin := env.Client(env.Key("read", "write"), "drop"), env.Admin()
		c := mk(t, agent, "create_contact", M{"first_name": "Gus", "last_name": "R", "email": "gus@paper.test"})
		opp := mk(t, agent, "create_opportunity", M{"title": "Drop", "contact_ids": []string{c}})
		id := mk(t, agent, "create_pitch", M{"opportunity_id": opp, "contact_ids": []string{c}, "subject": "Hi", "body": "Hi {{first_name}}"})
		admin.Must("approve_pitch", M{"id": id}, nil)
		var p pitchView
		agent.Must("send_pitch", M{"id": id}, &p)
		r := p.Recipients[0]
		if p.State != "failed" || r.State != "failed" || r.MessageID == "" || !strings.Contains(r.Reason, "may have been delivered") || !strings.Contains(r.Reason, r.MessageID) {
			t.Errorf("hang=%v: %+v", hang, p)
		}
	}
}

// A pitch scheduled for later waits for the delivery worker, which sends
// it once it is due.
func TestPitchScheduled(t *testing.T) {
	e := newMailEnv(t, "hal@paper.test", "ida@paper.test")
	hal := mk(t, e.agent, "create_contact", M{"first_name": "Hal", "last_name": "S", "email": "hal@paper.test"})
	ida := mk(t, e.agent, "create_contact", M{"first_name": "Ida", "last_name": "T", "email": "ida@paper.test", "timezone": "Asia/Tokyo"})
	opp := mk(t, e.agent, "create_opportunity", M{"title": "Later", "contact_ids": []string{hal, ida}})
	later := e.pitch(t, opp, nil, ida)
	soon := e.pitch(t, opp, nil, hal)
	zone := time.FixedZone("", -5*3600)
	// A local time is read in the recipient's zone; without one it is refused.
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	local := time.Now().In(tokyo).Add(24 * time.Hour).Truncate(time.Minute)
	refuses(t, e.agent, "send_pitch", M{"id": soon, "scheduled_at": local.Format("2006-01-02T15:04")}, repo.CodeInvalid, "scheduled_at", "time zone")
	var p struct {
		State         string    `json:"state"`
		ScheduledAt   time.Time `json:"scheduled_at"`
		ScheduledZone string    `json:"scheduled_zone"`
	}
	e.agent.Must("send_pitch", M{"id": later, "scheduled_at": local.Format("2006-01-02T15:04")}, &p)
	if p.State != "scheduled" || p.ScheduledZone != "Asia/Tokyo" || !p.ScheduledAt.Equal(local) {
		t.Fatalf("scheduled in Tokyo time: %+v, want %s", p, local.UTC())
	}
	due := time.Now().Add(time.Second).Truncate(time.Second).Add(time.Second)
	e.agent.Must("send_pitch", M{"id": soon, "scheduled_at": due.In(zone).Format(time.RFC3339)}, &p)
	ctx := audit.WithActor(context.Background(), pitchsend.Actor())
	deadline := time.Now().Add(30 * time.Second)
	for getPitch(t, e.agent, soon).State == "scheduled" {
		if time.Now().After(deadline) {
			t.Fatal("the worker never sent the due pitch")
		}
		time.Sleep(100 * time.Millisecond)
		e.Sender.RunOnce(ctx)
	}
	var sent struct {
		State  string    `json:"state"`
		SentAt time.Time `json:"sent_at"`
	}
	e.agent.Must("get_pitch", M{"id": soon}, &sent)
	if sent.State != "sent" || sent.SentAt.Before(due) {
		t.Errorf("after the worker: %+v (due %s)", sent, due)
	}
	e.mail.WaitMessages("hal@paper.test", "INBOX", 1)
	// The pitch due in an hour stays scheduled, and Ida's mailbox empty.
	if p := getPitch(t, e.agent, later); p.State != "scheduled" || len(e.mail.Messages("ida@paper.test", "INBOX")) != 0 {
		t.Errorf("the later pitch: %+v", p)
	}
}
