package tools

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"outreach/audit"
	"outreach/backup"
	"outreach/mailauth"
	"outreach/mailsync"
	"outreach/repo"
	"outreach/repo/inbox"
	"outreach/slackmsg"
)

// Option configures the tool list.
type Option func(*options)

type options struct {
	mail            *mailsync.Syncer
	mailbox         *mailauth.Mailbox // the mailbox connected by signing in (get_sync_status, disconnect_mailbox)
	keepAttachments bool
	slack           *slackmsg.Client
	backupStatus    func() backup.Status // get_service_info, for admins
	toolsets        []string             // nil: every toolset (toolsets.go)
	listed          []string             // the toolsets a client naming none is served (catalog.go); nil: toolsets
	serverCard      bool                 // serve the server card (server/card.go)
	limits          *RateLimits
	pitches         PitchSender // send_pitch's sender (pitches.go)
	observe         func(tool, code string, d time.Duration)
}

// WithMailSync gives sync_emails the configured shared inbox.
func WithMailSync(m *mailsync.Syncer) Option { return func(o *options) { o.mail = m } }

// WithMailbox gives get_sync_status and disconnect_mailbox the team mailbox
// connected by signing in.
func WithMailbox(m *mailauth.Mailbox) Option { return func(o *options) { o.mailbox = m } }

// syncStatus is get_sync_status's result: the sync's marks and held
// messages, and the mailbox connection when it is made by signing in.
type syncStatus struct {
	*inbox.SyncStatus
	// Mailbox: the connection's state, reason and problem; paused says the
	// sync and pitch sending wait for an admin to connect it.
	Mailbox *mailauth.Status `json:"mailbox,omitempty"`
}

// WithEmailAttachments keeps the bytes of imported attachments in GridFS.
func WithEmailAttachments(keep bool) Option { return func(o *options) { o.keepAttachments = keep } }

type disconnectMailboxIn struct {
	Reason string `json:"reason,omitempty" jsonschema:"why, kept with the connection (at most 500 characters)"`
}

type disconnectMailboxOut struct {
	// Done says what was done: revoked at the provider, or forgotten here only.
	Done    string          `json:"done"`
	Mailbox mailauth.Status `json:"mailbox"`
}

// maxImportBytes caps import_email's decoded message (the request body
// limit caps it anyway; this says so clearly).
const maxImportBytes = 1 << 20

// threadSummary is a thread in a list: everything but the message bodies.
type threadSummary struct {
	ID                 string                       `json:"id"`
	Subject            string                       `json:"subject"`
	ContactIDs         []string                     `json:"contact_ids"`
	OpportunityLinks   []inbox.EmailOpportunityLink `json:"opportunity_links"`
	MessageCount       int                          `json:"message_count"`
	LastMessageAt      time.Time                    `json:"last_message_at"`
	LastContactReplyAt *time.Time                   `json:"last_contact_reply_at,omitempty"`
	LastSummary        string                       `json:"last_summary"`
	CreatedAt          time.Time                    `json:"created_at"`
	ArchivedAt         *time.Time                   `json:"archived_at"`
}

func summarize(t inbox.EmailThread) threadSummary {
	s := threadSummary{ID: t.ID, Subject: t.Subject, ContactIDs: t.ContactIDs, OpportunityLinks: t.OpportunityLinks, MessageCount: len(t.Messages),
		LastMessageAt: t.LastMessageAt, LastContactReplyAt: t.LastContactReplyAt, CreatedAt: t.CreatedAt, ArchivedAt: t.ArchivedAt}
	if n := len(t.Messages); n > 0 {
		s.LastSummary = firstLine(t.Messages[n-1].BodyText)
	}
	return s
}

func firstLine(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	if r := []rune(strings.TrimSpace(line)); len(r) > 200 {
		return string(r[:200])
	}
	return strings.TrimSpace(line)
}

// Emails is the Emails group: threads synced from the shared inbox over
// IMAP (or imported), linked to contacts and opportunities.
func Emails(s *repo.Store, opts ...Option) []Tool {
	var o options
	for _, f := range opts {
		f(&o)
	}
	type syncIn struct {
		Rescan bool `json:"rescan,omitempty" jsonschema:"read every message of each mailbox again, not only the new ones: what is stored counts as a duplicate, and a message skipped before is stored if a contact now holds one of its addresses; default false"`
	}
	type statusIn struct {
		Reason string `json:"reason,omitempty" enum:"no_contact,too_large,malformed,store_failed" jsonschema:"only held messages of this reason"`
		Limit  *int   `json:"limit,omitempty" jsonschema:"maximum held messages, 1 to 200; default 50"`
		Offset *int   `json:"offset,omitempty" jsonschema:"held messages to skip; default 0"`
	}
	type importIn struct {
		RawBase64 string `json:"raw_base64" max:"email_base64" jsonschema:"one RFC 822 message (headers and body, as a mail client saves an .eml file), base64-encoded; at most 1 MiB decoded"`
	}
	type listIn struct {
		ContactID       string `json:"contact_id,omitempty" jsonschema:"only threads involving this contact (UUID)"`
		OpportunityID   string `json:"opportunity_id,omitempty" jsonschema:"only threads linked to this opportunity (UUID)"`
		Since           string `json:"since,omitempty" jsonschema:"only threads with a message on or after this date (YYYY-MM-DD or ISO datetime)"`
		IncludeArchived bool   `json:"include_archived,omitempty" jsonschema:"include archived threads; default false"`
		Limit           *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum results; default 25"`
		Offset          *int   `json:"offset,omitempty" min:"0" jsonschema:"results to skip; default 0"`
	}
	type idIn struct {
		ID string `json:"id" jsonschema:"the email thread's id (UUID)"`
	}
	type searchIn struct {
		Query string `json:"query" jsonschema:"text to find in subjects, bodies and senders: case-insensitive, matched literally"`
		Limit *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum messages; default 20"`
	}
	type contactIn struct {
		ContactID string `json:"contact_id" jsonschema:"the contact (UUID)"`
		Since     string `json:"since,omitempty" jsonschema:"only messages on or after this date (YYYY-MM-DD or ISO datetime)"`
		Limit     *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum messages; default 50"`
	}
	type linkIn struct {
		ThreadID      string `json:"thread_id" jsonschema:"the email thread (UUID)"`
		OpportunityID string `json:"opportunity_id" jsonschema:"the opportunity to link it to (UUID)"`
	}
	type unlinkIn struct {
		ID string `json:"id" jsonschema:"the link's own id (UUID), as get_email_thread and link_email_opportunity show it; not the thread's id"`
	}
	hits := func(total, limit int, msgs []inbox.EmailHit) map[string]any {
		return map[string]any{"total": total, "showing": len(msgs), "limit": limit, "messages": msgs}
	}
	return []Tool{
		newTool("sync_emails", "Sync the shared inbox now over IMAP: new messages involving a known contact are stored in threads (once each, however often seen). Messages not stored are held (see get_sync_status) and tried again by every sync: a failed one each time, a skipped one once a contact holds one of its addresses. Returns counts of messages seen, stored, duplicates, skipped (no known contact) and failed (with reasons), held messages retried and recovered, and the threads touched. rescan: true reads every message again. Sends progress notifications when the client asks for them.", send,
			func(ctx context.Context, in *syncIn) (any, error) {
				if o.mail == nil {
					return nil, repo.Errorf(repo.CodeFailedPrecondition, "email sync is not configured on this server: set OUTREACH_IMAP_ADDR, OUTREACH_IMAP_USER and a password or OAuth2 token (see docs/operations.md, Configuration); import_email works without it")
				}
				res, err := o.mail.SyncWith(ctx, mailsync.SyncOptions{Rescan: in.Rescan}, func(done, total int, msg string) { Progress(ctx, done, total, msg) })
				if err != nil {
					var de *mailauth.DisconnectedError
					if errors.As(err, &de) {
						return nil, repo.Errorf(repo.CodeFailedPrecondition, "%s; get_sync_status shows the connection", de.Error())
					}
					var ie *mailsync.IMAPError
					if errors.As(err, &ie) {
						return nil, &repo.Error{Code: repo.CodeUnavailable, Retryable: true, Details: res,
							Message: "the IMAP server could not be reached or the connection failed (" + ie.Error() + "); what was stored stays, the next sync resumes after it, and details has the counts so far"}
					}
					return nil, err
				}
				return res, nil
			}),
		newTool("get_sync_status", "Where the sync of the shared inbox stands: each mailbox's mark (UIDVALIDITY, last UID handled, when) and the messages held, not stored, with their reason (no_contact: no known contact among From, To, Cc, kept with its headers until a contact claims it; too_large, malformed, store_failed: failed, tried again by every sync), counts by reason, newest first.", read,
			func(ctx context.Context, in *statusIn) (any, error) {
				limit, offset, err := page(in.Limit, in.Offset, defaultLimit)
				if err != nil {
					return nil, err
				}
				st, err := inbox.Of(s).EmailSyncStatus(ctx, in.Reason, limit, offset)
				if err != nil {
					return nil, err
				}
				out := syncStatus{SyncStatus: st}
				if o.mailbox != nil {
					mst, err := o.mailbox.Status(ctx)
					if err != nil {
						return nil, err
					}
					out.Mailbox = &mst
				}
				return out, nil
			}),
		newTool("disconnect_mailbox", "Disconnect the team mailbox connected by signing in (Google, Microsoft): revoke its refresh token at the provider where the provider offers revocation, and forget the tokens. The inbox sync and pitch sending then wait (scheduled pitches stay scheduled, nothing is marked failed) until an admin connects it again (outreach mailbox connect). reason is kept with the connection. Needs the admin scope.", adminChange,
			func(ctx context.Context, in *disconnectMailboxIn) (any, error) {
				if o.mailbox == nil {
					return nil, repo.Errorf(repo.CodeFailedPrecondition, "the team mailbox is not connected by signing in on this server (OUTREACH_MAILBOX_PROVIDER is not set; see docs/connect.md)")
				}
				reason := strings.TrimSpace(in.Reason)
				if len(reason) > 500 {
					return nil, repo.Invalid("reason", "is %d characters; at most 500", len(reason))
				}
				a, _ := audit.ActorFrom(ctx)
				if reason == "" {
					reason = "disconnected by an admin"
				}
				said, err := o.mailbox.Disconnect(ctx, reason+" ("+a.UserID+")")
				if err != nil {
					return nil, err
				}
				st, err := o.mailbox.Status(ctx)
				if err != nil {
					return nil, err
				}
				return disconnectMailboxOut{Done: said, Mailbox: st}, nil
			}),
		newTool("import_email", "Import one raw RFC 822 message (e.g. an .eml file), stored like a synced one: into its thread, linked to the known contacts among From, To and Cc. A message without a known contact is skipped; one already stored is reported as a duplicate. Returns outcome, thread_id, email_id (the stored message's own id, messages[].id of the thread) and message_id (its RFC 822 Message-ID, as messages[].message_id).", create,
			func(ctx context.Context, in *importIn) (any, error) {
				raw, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(in.RawBase64), ""))
				if err != nil {
					return nil, repo.Invalid("raw_base64", "is not base64 (standard alphabet, with padding): %v", err)
				}
				if len(raw) == 0 {
					return nil, repo.Invalid("raw_base64", "is empty; give one RFC 822 message")
				}
				if len(raw) > maxImportBytes {
					return nil, repo.Invalid("raw_base64", "the message is %d bytes; at most %d can be imported (sync larger ones from the inbox)", len(raw), maxImportBytes)
				}
				_, ir, err := mailsync.Import(ctx, s, raw, o.keepAttachments)
				if err != nil {
					return nil, err
				}
				return ir, nil
			}),
		newTool("list_email_threads", "List email threads, most recent message first; each with its contacts, opportunity links, message count and the first line of its latest message.", read,
			func(ctx context.Context, in *listIn) (any, error) {
				limit, offset, err := page(in.Limit, in.Offset, 25)
				if err != nil {
					return nil, err
				}
				f := inbox.EmailThreadFilter{ContactID: in.ContactID, OpportunityID: in.OpportunityID, IncludeArchived: in.IncludeArchived}
				if err := checkOptionalUUIDs("contact_id", in.ContactID, "opportunity_id", in.OpportunityID); err != nil {
					return nil, err
				}
				if f.Since, err = optionalTime("since", in.Since, false); err != nil {
					return nil, err
				}
				p, err := inbox.Of(s).ListEmailThreads(ctx, f, limit, offset)
				if err != nil {
					return nil, err
				}
				out := make([]threadSummary, len(p.Items))
				for i, t := range p.Items {
					out[i] = summarize(t)
				}
				return map[string]any{"total": p.Total, "showing": len(out), "limit": limit, "offset": offset, "threads": out}, nil
			}),
		newTool("get_email_thread", "One email thread: all its messages (oldest first, each with its own id as the interaction log shows it), its linked contacts and its linked opportunities (with the link ids unlink_email_opportunity takes).", read,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return inbox.Of(s).EmailThreadDetail(ctx, in.ID)
			}),
		newTool("search_emails", "Search email messages by subject, body and sender, newest first. The text is matched literally and case-insensitively.", read,
			func(ctx context.Context, in *searchIn) (any, error) {
				limit, _, err := page(in.Limit, nil, 20)
				if err != nil {
					return nil, err
				}
				if strings.TrimSpace(in.Query) == "" {
					return nil, repo.Invalid("query", "must not be empty")
				}
				total, msgs, err := inbox.Of(s).SearchEmails(ctx, in.Query, limit)
				if err != nil {
					return nil, err
				}
				return hits(total, limit, msgs), nil
			}),
		newTool("get_contact_emails", "The email messages a contact sent or received (From, To or Cc), newest first, each with its thread id.", read,
			func(ctx context.Context, in *contactIn) (any, error) {
				if err := checkUUID("contact_id", in.ContactID); err != nil {
					return nil, err
				}
				limit, _, err := page(in.Limit, nil, defaultLimit)
				if err != nil {
					return nil, err
				}
				var since *time.Time
				if in.Since != "" {
					t, err := parseTime("since", in.Since, false)
					if err != nil {
						return nil, err
					}
					since = &t
				}
				total, msgs, err := inbox.Of(s).ContactEmails(ctx, in.ContactID, since, limit)
				if err != nil {
					return nil, err
				}
				return hits(total, limit, msgs), nil
			}),
		newTool("link_email_opportunity", "Link an email thread to an opportunity; its messages then appear in the opportunity's interaction log. Linking the same opportunity twice is a conflict naming the existing link.", change,
			func(ctx context.Context, in *linkIn) (any, error) {
				if err := checkUUID("thread_id", in.ThreadID); err != nil {
					return nil, err
				}
				if err := checkUUID("opportunity_id", in.OpportunityID); err != nil {
					return nil, err
				}
				t, link, err := inbox.Of(s).LinkEmailOpportunity(ctx, in.ThreadID, in.OpportunityID)
				if err != nil {
					return nil, err
				}
				return map[string]any{"link": link, "thread": summarize(*t)}, nil
			}),
		newTool("unlink_email_opportunity", "Remove one link between an email thread and an opportunity, by the link's id. The change log keeps it; a rollback puts it back.", change,
			func(ctx context.Context, in *unlinkIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				t, err := inbox.Of(s).UnlinkEmailOpportunity(ctx, in.ID)
				if err != nil {
					return nil, err
				}
				return map[string]any{"thread": summarize(*t)}, nil
			}),
	}
}
