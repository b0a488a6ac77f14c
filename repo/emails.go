package repo

import "time"

// EmailThread is a conversation synced from the shared inbox. Its stored
// shape is fixed here so the interaction log reads it from the first day;
// the email tools extend this file.
type EmailThread struct {
	Meta             `bson:",inline"`
	Subject          string                 `bson:"subject" json:"subject"`
	ContactIDs       []string               `bson:"contact_ids" json:"contact_ids"`
	OpportunityLinks []EmailOpportunityLink `bson:"opportunity_links" json:"opportunity_links"`
	Messages         []EmailMessage         `bson:"messages" json:"messages"`
	LastMessageAt    time.Time              `bson:"last_message_at" json:"last_message_at"`
}

// EmailOpportunityLink links a thread to an opportunity; its id is what
// unlink_email_opportunity takes.
type EmailOpportunityLink struct {
	ID            string    `bson:"id" json:"id"`
	OpportunityID string    `bson:"opportunity_id" json:"opportunity_id"`
	LinkedAt      time.Time `bson:"linked_at" json:"linked_at"`
}

// EmailMessage is one message of a thread. ID is ours (a UUID, the id the
// interaction log shows); MessageID is the RFC 822 Message-ID that keeps a
// message from being stored twice.
type EmailMessage struct {
	ID          string            `bson:"id" json:"id"`
	MessageID   string            `bson:"message_id" json:"message_id"`
	InReplyTo   string            `bson:"in_reply_to,omitempty" json:"in_reply_to,omitempty"`
	References  []string          `bson:"references,omitempty" json:"references,omitempty"`
	From        string            `bson:"from" json:"from"`
	To          []string          `bson:"to" json:"to"`
	Cc          []string          `bson:"cc,omitempty" json:"cc,omitempty"`
	Subject     string            `bson:"subject" json:"subject"`
	Date        time.Time         `bson:"date" json:"date"`
	BodyText    string            `bson:"body_text" json:"body_text"`
	Attachments []EmailAttachment `bson:"attachments,omitempty" json:"attachments,omitempty"`
	// ContactIDs are the known contacts among From, To and Cc.
	ContactIDs []string `bson:"contact_ids" json:"contact_ids"`
}

// EmailAttachment is an attachment's metadata; the bytes are not kept.
type EmailAttachment struct {
	Filename  string `bson:"filename" json:"filename"`
	MIMEType  string `bson:"mime_type" json:"mime_type"`
	SizeBytes int64  `bson:"size_bytes" json:"size_bytes"`
}
