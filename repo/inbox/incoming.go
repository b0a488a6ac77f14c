package inbox

import (
	"context"
	"fmt"
	"time"

	"outreach/repo"
)

// What the inbox is offered (a message as parsed), what it did with it,
// and what follows once a message is stored: an area above the inbox
// registers it from its init (OnEmailStored), and Open refuses to start
// while it is missing.

// EmailAttachment is an attachment's metadata. FileID names its bytes in
// the GridFS bucket when attachment bytes are kept (off by default).
type EmailAttachment struct {
	Filename  string `bson:"filename" json:"filename"`
	MIMEType  string `bson:"mime_type" json:"mime_type"`
	SizeBytes int64  `bson:"size_bytes" json:"size_bytes"`
	FileID    string `bson:"file_id,omitempty" json:"file_id,omitempty"`
	SHA256    string `bson:"sha256,omitempty" json:"sha256,omitempty"`
}

// IncomingEmail is a parsed message offered to the inbox's IngestEmail. Addresses are
// bare, lower case (they match contacts and make content keys); Names holds
// the display names given with them, by address.
type IncomingEmail struct {
	MessageID   string
	InReplyTo   string
	References  []string
	From        string
	To, Cc      []string
	Names       map[string]string
	Subject     string
	Date        time.Time
	BodyText    string
	Attachments []EmailAttachment
	Source      string
}

// Outcomes of the inbox's IngestEmail.
const (
	EmailStored    = "stored"
	EmailDuplicate = "duplicate"
	EmailSkipped   = "skipped" // no known contact in From, To or Cc
)

// IngestResult says what the inbox's IngestEmail did with a message.
// EmailID is the stored message's own id (messages[].id of its thread, the
// id the interaction log shows); MessageID is its RFC 822 Message-ID (or
// content key), as messages[].message_id: one name, one meaning everywhere.
type IngestResult struct {
	Outcome   string `json:"outcome"`
	ThreadID  string `json:"thread_id,omitempty"`
	EmailID   string `json:"email_id,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	NewThread bool   `json:"new_thread,omitempty"`
}

var emailStored func(ctx context.Context, s *repo.Store, in IncomingEmail, res IngestResult)

// OnEmailStored registers what follows an incoming message once it is
// stored as res (package pitches: a reply to a pitch marks its recipient
// replied). It runs after the store, best effort: it logs its failures and
// the message stays stored.
func OnEmailStored(fn func(ctx context.Context, s *repo.Store, in IncomingEmail, res IngestResult)) {
	if emailStored != nil {
		panic("inbox: a reaction to a stored email is registered twice")
	}
	emailStored = fn
}

func init() {
	repo.RegisterNeed(func() error {
		if emailStored == nil {
			return fmt.Errorf("nothing reacts to a stored email (link package outreach/repo/pitches)")
		}
		return nil
	})
}
