package repo

import (
	"strings"
	"testing"
	"time"
)

// TestIngestEmailThreading stores messages directly: replies join their
// thread, an unknown sender is skipped, a repeat is a duplicate, a body is
// capped, and a full thread continues in a new one.
func TestIngestEmailThreading(t *testing.T) {
	s, ctx := openTestStore(t) // its cleanup runs Verify
	first, last, email := "Jane", "Doe", "Jane@Planet.example"
	c, err := s.CreateContact(ctx, ContactFields{FirstName: &first, LastName: &last, Email: &email}, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	msg := func(id, replyTo, body string, i int) IncomingEmail {
		return IncomingEmail{MessageID: id, InReplyTo: replyTo, From: "jane@planet.example", To: []string{"team@pr.example"},
			Subject: "Re: Launch", Date: at.Add(time.Duration(i) * time.Hour), BodyText: body}
	}
	r1, err := s.IngestEmail(ctx, msg("a@x", "", "one", 0))
	if err != nil || r1.Outcome != EmailStored || !r1.NewThread {
		t.Fatalf("first: %+v %v", r1, err)
	}
	r2, err := s.IngestEmail(ctx, msg("b@x", "a@x", strings.Repeat("é", MaxEmailBodyText), 1))
	if err != nil || r2.ThreadID != r1.ThreadID || r2.NewThread {
		t.Fatalf("reply: %+v %v, want thread %s", r2, err, r1.ThreadID)
	}
	if r, err := s.IngestEmail(ctx, msg("b@x", "a@x", "again", 1)); err != nil || r.Outcome != EmailDuplicate || r.EmailID != r2.EmailID {
		t.Errorf("repeat: %+v %v, want a duplicate of %s", r, err, r2.EmailID)
	}
	other := msg("c@x", "", "hi", 2)
	other.From, other.To = "stranger@nowhere.example", []string{"team@pr.example"}
	if r, err := s.IngestEmail(ctx, other); err != nil || r.Outcome != EmailSkipped {
		t.Errorf("unknown sender: %+v %v, want skipped", r, err)
	}
	th, err := s.EmailThread(ctx, r1.ThreadID)
	if err != nil {
		t.Fatal(err)
	}
	m := th.Messages[1]
	if !m.BodyTruncated || len(m.BodyText) > MaxEmailBodyText || !strings.HasPrefix(m.BodyText, "é") || strings.ContainsRune(m.BodyText, '\uFFFD') {
		t.Errorf("long body: truncated %v, %d bytes", m.BodyTruncated, len(m.BodyText))
	}
	if th.LastContactReplyAt == nil || !th.LastContactReplyAt.Equal(at.Add(time.Hour)) || m.FromContactID != c.ID {
		t.Errorf("reply marks: %v %q", th.LastContactReplyAt, m.FromContactID)
	}
	maxThreadBytes = 2 * MaxEmailBodyText
	t.Cleanup(func() { maxThreadBytes = MaxThreadBytes })
	r3, err := s.IngestEmail(ctx, msg("d@x", "b@x", strings.Repeat("x", MaxEmailBodyText), 3))
	if err != nil || r3.ThreadID == r1.ThreadID || !r3.NewThread {
		t.Errorf("reply to a full thread: %+v %v, want a new thread", r3, err)
	}
}
