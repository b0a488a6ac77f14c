package integration

import (
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"outreach/integration/testenv"
	"outreach/mailsync"
	"outreach/mailsync/imaptest"
)

// mail is one RFC 822 message with CRLF line ends.
func mail(id, from, to, subject, date, inReplyTo, body string) []byte {
	h := fmt.Sprintf("Message-ID: <%s>\nFrom: %s\nTo: %s\nSubject: %s\nDate: %s\n", id, from, to, subject, date)
	if inReplyTo != "" {
		h += fmt.Sprintf("In-Reply-To: <%s>\nReferences: <%s>\n", inReplyTo, inReplyTo)
	}
	return crlf(h + "\n" + body + "\n")
}

// Defect: email_received never fired. A message from a known contact that
// joins a thread linked to an opportunity notifies the opportunity's
// subscribers, whether it comes by import_email or by the sync; mail the
// team sends (copied to the shared inbox) does not.
func TestEmailReceivedNotifiesSubscribers(t *testing.T) {
	imap := imaptest.Start(t)
	env := testenv.NewWith(t, testenv.Options{Mail: &mailsync.Config{Addr: imap.Addr, Security: mailsync.SecurityPlain, User: imap.User, Password: imap.Password}})
	c := env.Client(env.AdminKey, "email-notify")
	mk(t, c, "create_contact", M{"first_name": "Jane", "last_name": "Doe", "email": "jane@planet.example"})
	opp := mk(t, c, "create_opportunity", M{"title": "Launch story"})
	c.Must("subscribe_opportunity", M{"opportunity_id": opp}, nil)
	imp := func(raw []byte) (out struct {
		Outcome  string `json:"outcome"`
		ThreadID string `json:"thread_id"`
	}) {
		t.Helper()
		c.Must("import_email", M{"raw_base64": base64.StdEncoding.EncodeToString(raw)}, &out)
		if out.Outcome != "stored" {
			t.Fatalf("import_email: %+v; want stored", out)
		}
		return out
	}
	type note struct {
		Event         string         `json:"event"`
		OpportunityID string         `json:"opportunity_id"`
		Data          map[string]any `json:"data"`
	}
	notes := func() []note {
		t.Helper()
		var out struct {
			Notifications []note `json:"notifications"`
		}
		c.Must("list_notifications", M{}, &out)
		return out.Notifications
	}

	first := imp(mail("n1@planet.example", "Jane Doe <jane@planet.example>", "team@pr.example", "Story idea", "Mon, 2 Mar 2026 09:00:00 +0000", "", "Shall we talk?"))
	c.Must("link_email_opportunity", M{"thread_id": first.ThreadID, "opportunity_id": opp}, nil)
	if n := notes(); len(n) != 0 {
		t.Fatalf("before any reply: %+v; want no notification", n)
	}
	// The team's own message in the thread is not news.
	imp(mail("n2@pr.example", "team@pr.example", "jane@planet.example", "Re: Story idea", "Mon, 2 Mar 2026 10:00:00 +0000", "n1@planet.example", "Yes, Tuesday?"))
	if n := notes(); len(n) != 0 {
		t.Fatalf("after the team's message: %+v; want no notification", n)
	}
	// Jane's reply, imported.
	reply := imp(mail("n3@planet.example", "jane@planet.example", "team@pr.example", "Re: Story idea", "Mon, 2 Mar 2026 11:00:00 +0000", "n2@pr.example", "Tuesday works."))
	if reply.ThreadID != first.ThreadID {
		t.Fatalf("the reply started thread %s; want %s", reply.ThreadID, first.ThreadID)
	}
	got := notes()
	if len(got) != 1 || got[0].Event != "email_received" || got[0].OpportunityID != opp || got[0].Data["thread_id"] != first.ThreadID ||
		got[0].Data["message_id"] != "n3@planet.example" {
		t.Fatalf("after Jane's imported reply: %+v; want one email_received for the thread", got)
	}
	// Jane's next reply, synced from the inbox.
	imap.Append("INBOX", mail("n4@planet.example", "jane@planet.example", "team@pr.example", "Re: Story idea", "Tue, 3 Mar 2026 08:00:00 +0000", "n3@planet.example", "See you."))
	var r syncResult
	c.Must("sync_emails", M{}, &r)
	if r.Stored != 1 {
		t.Fatalf("sync: %+v; want 1 stored", r)
	}
	got = notes()
	var events []string
	for _, n := range got {
		events = append(events, fmt.Sprint(n.Event, " ", n.Data["message_id"]))
	}
	if diff := cmp.Diff(events, []string{"email_received n4@planet.example", "email_received n3@planet.example"}); diff != "" {
		t.Errorf("notifications after the sync (-got +want):\n%s", diff)
	}
}
