package inbox_test

import (
	"strings"
	"testing"
	"time"

	"outreach/repo/directory"
	"outreach/repo/inbox"
	"outreach/repo/repotest"
)

// TestIngestEmailThreading stores messages directly: replies join their
// thread, an unknown sender is skipped, a repeat is a duplicate, a body is
// capped, and a full thread continues in a new one.
func TestIngestEmailThreading(t *testing.T) {
	s, ctx := repotest.OpenVerified(t, "directory_test") // its cleanup runs Verify
	in := inbox.Of(s)
	first, last, email := "Jane", "Doe", "Jane@Planet.example"
	c, err := directory.Of(s).CreateContact(ctx, directory.ContactFields{FirstName: &first, LastName: &last, Email: &email}, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	msg := func(id, replyTo, body string, i int) inbox.IncomingEmail {
		return inbox.IncomingEmail{MessageID: id, InReplyTo: replyTo, From: "jane@planet.example", To: []string{"team@pr.example"},
			Subject: "Re: Launch", Date: at.Add(time.Duration(i) * time.Hour), BodyText: body}
	}
	r1, err := in.IngestEmail(ctx, msg("a@x", "", "one", 0))
	if err != nil || r1.Outcome != inbox.EmailStored || !r1.NewThread {
		t.Fatalf("first: %+v %v", r1, err)
	}
	r2, err := in.IngestEmail(ctx, msg("b@x", "a@x", strings.Repeat("é", inbox.MaxEmailBodyText), 1))
	if err != nil || r2.ThreadID != r1.ThreadID || r2.NewThread {
		t.Fatalf("reply: %+v %v, want thread %s", r2, err, r1.ThreadID)
	}
	if r, err := in.IngestEmail(ctx, msg("b@x", "a@x", "again", 1)); err != nil || r.Outcome != inbox.EmailDuplicate || r.EmailID != r2.EmailID {
		t.Errorf("repeat: %+v %v, want a duplicate of %s", r, err, r2.EmailID)
	}
	other := msg("c@x", "", "hi", 2)
	other.From, other.To = "stranger@nowhere.example", []string{"team@pr.example"}
	if r, err := in.IngestEmail(ctx, other); err != nil || r.Outcome != inbox.EmailSkipped {
		t.Errorf("unknown sender: %+v %v, want skipped", r, err)
	}
	th, err := in.EmailThread(ctx, r1.ThreadID)
	if err != nil {
		t.Fatal(err)
	}
	m := th.Messages[1]
	if !m.BodyTruncated || len(m.BodyText) > inbox.MaxEmailBodyText || !strings.HasPrefix(m.BodyText, "é") || strings.ContainsRune(m.BodyText, '\uFFFD') {
		t.Errorf("long body: truncated %v, %d bytes", m.BodyTruncated, len(m.BodyText))
	}
	if th.LastContactReplyAt == nil || !th.LastContactReplyAt.Equal(at.Add(time.Hour)) || m.FromContactID != c.ID {
		t.Errorf("reply marks: %v %q", th.LastContactReplyAt, m.FromContactID)
	}
	*inbox.MaxThreadBytesVar = 2 * inbox.MaxEmailBodyText
	t.Cleanup(func() { *inbox.MaxThreadBytesVar = inbox.MaxThreadBytes })
	r3, err := in.IngestEmail(ctx, msg("d@x", "b@x", strings.Repeat("x", inbox.MaxEmailBodyText), 3))
	if err != nil || r3.ThreadID == r1.ThreadID || !r3.NewThread {
		t.Errorf("reply to a full thread: %+v %v, want a new thread", r3, err)
	}
}
