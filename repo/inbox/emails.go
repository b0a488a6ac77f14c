package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger"
	"outreach/repo"
	"outreach/repo/directory"
	"outreach/repo/outbox"
	"outreach/repo/pipeline"
	"outreach/repo/textlist"
)

// EmailThread is a conversation synced from the shared inbox (or imported).
// Its messages are embedded, oldest first; the interaction log unwinds them.
type EmailThread struct {
	repo.Meta        `bson:",inline"`
	Subject          string                 `bson:"subject" json:"subject"`
	ContactIDs       []string               `bson:"contact_ids" json:"contact_ids"`
	OpportunityLinks []EmailOpportunityLink `bson:"opportunity_links" json:"opportunity_links"`
	Messages         []EmailMessage         `bson:"messages" json:"messages"`
	LastMessageAt    time.Time              `bson:"last_message_at" json:"last_message_at"`
	// SubjectKey is the normalised subject (no Re:/Fwd:/AW: prefixes, lower
	// case) that threads a message without reply headers.
	SubjectKey string `bson:"subject_key,omitempty" json:"-"`
	// LastContactReplyAt is the date of the newest message sent by a known
	// contact: what an agenda reads to see who answered. It moves nothing.
	LastContactReplyAt *time.Time `bson:"last_contact_reply_at,omitempty" json:"last_contact_reply_at,omitempty"`
}

// EmailOpportunityLink links a thread to an opportunity; its id is what
// unlink_email_opportunity takes.
type EmailOpportunityLink struct {
	ID            string    `bson:"id" json:"id"`
	OpportunityID string    `bson:"opportunity_id" json:"opportunity_id"`
	LinkedAt      time.Time `bson:"linked_at" json:"linked_at"`
}

// EmailMessage is one message of a thread. ID is ours (a UUID, the id the
// interaction log shows); MessageID is the RFC 822 Message-ID (or, for a
// message without one, a key derived from its content) that keeps a message
// from being stored twice: a unique index holds it across threads.
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
	// FromContactID is set when a known contact sent the message (a reply
	// from outside the team).
	FromContactID string `bson:"from_contact_id,omitempty" json:"from_contact_id,omitempty"`
	// BodyTruncated says the text was cut at MaxEmailBodyText.
	BodyTruncated bool `bson:"body_truncated,omitempty" json:"body_truncated,omitempty"`
	// Source is where the message came from: "imap:<mailbox>" or "import".
	Source string `bson:"source,omitempty" json:"source,omitempty"`
}

// MaxEmailBodyText caps a message's stored text, in bytes, so a thread stays
// far inside a document's size limit.
const MaxEmailBodyText = 64 << 10

// SubjectWindow is how far apart in time two messages with the same
// normalised subject (and a shared contact) may be and still be one thread
// when no reply header ties them.
const SubjectWindow = 30 * 24 * time.Hour

// ingestMu serialises IngestEmail in the process.
var ingestMu sync.Mutex

// ContentKey is the stable key of a message without a Message-ID: a hash of
// what identifies it, in the form of a Message-ID so it shares the index.
func ContentKey(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		io.WriteString(h, p)
		h.Write([]byte{0})
	}
	return "sha256-" + hex.EncodeToString(h.Sum(nil))[:40] + "@outreach.invalid"
}

var subjectPrefix = regexp.MustCompile(`(?i)^\s*(re|fwd?|aw|wg|sv|vs|antw|rif|r|tr|odp|res|enc|réf|ref)\s*(\[\d+\]|\(\d+\))?\s*[:：]\s*`)

// SubjectKey normalises a subject for threading: reply and forward prefixes
// in several languages (Re:, Fwd:, AW:, WG:, SV:…) removed however often
// they repeat, whitespace collapsed, lower case.
func SubjectKey(subject string) string {
	s := subject
	for {
		t := subjectPrefix.ReplaceAllString(s, "")
		t = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(t), "[fwd]"))
		if t == s {
			break
		}
		s = t
	}
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}

// contactsByAddress returns the active contacts holding any of addrs
// (matched as the contacts tools match email: ignoring case), by lower-cased
// address.
func (s *Store) contactsByAddress(ctx context.Context, addrs []string) (map[string]string, error) {
	var lower []string
	for _, a := range addrs {
		if a = strings.ToLower(strings.TrimSpace(a)); a != "" && !slices.Contains(lower, a) {
			lower = append(lower, a)
		}
	}
	out := map[string]string{}
	if len(lower) == 0 {
		return out, nil
	}
	cur, err := s.Find(ctx, repo.CollContacts, bson.M{"email_lower": bson.M{"$in": lower}, "archived_at": nil},
		options.Find().SetProjection(bson.M{"_id": 1, "email_lower": 1}).SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, ledger.DriverErr(err, "contact", "query")
	}
	var docs []struct {
		ID    string `bson:"_id"`
		Email string `bson:"email_lower"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, ledger.DriverErr(err, "contact", "query")
	}
	for _, d := range docs {
		if _, ok := out[d.Email]; !ok {
			out[d.Email] = d.ID
		}
	}
	return out, nil
}

// threadWith returns the thread (archived or not) holding a message keyed
// by one of keys, or nil.
func (s *Store) threadWith(ctx context.Context, filter bson.M) (*EmailThread, error) {
	var t EmailThread
	err := s.FindOne(ctx, repo.CollEmails, filter, options.FindOne().SetSort(bson.D{{Key: "last_message_at", Value: -1}, {Key: "_id", Value: -1}})).Decode(&t)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, ledger.DriverErr(err, "email thread", "query")
	}
	return &t, nil
}

// IngestEmail stores one message through the write path, once: a message
// whose key is already stored (in any thread) is a duplicate and writes
// nothing; a message without a known contact among From, To and Cc is
// skipped. Otherwise it joins the thread of a message it replies to (by
// In-Reply-To and References), or of a message that replies to it, or an
// active thread with the same normalised subject and a shared contact
// within SubjectWindow; else it starts a thread. Two instances storing the
// same message at once end with one copy: the unique index on the message
// key refuses the second, which then finds the first.
func (s *Store) IngestEmail(ctx context.Context, in IncomingEmail) (IngestResult, error) {
	// Within a process the look-up and the write are one step: the embedded
	// store (one process only) does not hold a unique index over array
	// elements, so this is what keeps two syncs of one process apart.
	ingestMu.Lock()
	defer ingestMu.Unlock()
	if strings.TrimSpace(in.MessageID) == "" {
		return IngestResult{}, repo.Invalid("message_id", "a message needs a key (its Message-ID or a content key)")
	}
	if in.Date.IsZero() {
		in.Date = repo.Now()
	}
	in.Date = in.Date.UTC().Truncate(time.Millisecond)
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		var res IngestResult
		res, err = s.ingestOnce(ctx, in)
		if err == nil {
			emailStored(ctx, s.Store, in, res) // a reply to a pitch (package pitches)
			return res, nil
		}
		if !ledger.IsConflict(err) && !mongo.IsDuplicateKeyError(err) {
			return IngestResult{}, err
		}
		time.Sleep(time.Duration(attempt+1) * 5 * time.Millisecond)
	}
	return IngestResult{}, err
}

func (s *Store) ingestOnce(ctx context.Context, in IncomingEmail) (IngestResult, error) {
	if dup, err := s.StoredEmail(ctx, in.MessageID); err != nil || dup != nil {
		if dup == nil {
			return IngestResult{}, err
		}
		return *dup, nil
	}
	byAddr, err := s.contactsByAddress(ctx, slices.Concat([]string{in.From}, in.To, in.Cc))
	if err != nil {
		return IngestResult{}, err
	}
	if len(byAddr) == 0 {
		return IngestResult{Outcome: EmailSkipped, MessageID: in.MessageID}, nil
	}
	var contacts []string
	for _, a := range slices.Concat([]string{in.From}, in.To, in.Cc) {
		if id, ok := byAddr[strings.ToLower(strings.TrimSpace(a))]; ok && !slices.Contains(contacts, id) {
			contacts = append(contacts, id)
		}
	}
	msg := EmailMessage{ID: uuid.NewString(), MessageID: in.MessageID, InReplyTo: in.InReplyTo, References: in.References,
		From: Mailbox(in.Names[in.From], in.From), To: mailboxes(in.To, in.Names), Cc: noneIfEmpty(mailboxes(in.Cc, in.Names)), Subject: in.Subject, Date: in.Date, BodyText: in.BodyText,
		Attachments: in.Attachments, ContactIDs: contacts, FromContactID: byAddr[strings.ToLower(strings.TrimSpace(in.From))], Source: in.Source}
	if len(msg.BodyText) > MaxEmailBodyText {
		cut := MaxEmailBodyText
		for cut > 0 && !utf8Start(msg.BodyText[cut]) {
			cut--
		}
		msg.BodyText, msg.BodyTruncated = msg.BodyText[:cut], true
	}
	target, err := s.threadFor(ctx, in, contacts)
	if err != nil {
		return IngestResult{}, err
	}
	if target != nil && threadBytes(target)+messageBytes(&msg) > maxThreadBytes {
		target = nil // the thread is full: the conversation goes on in a new one
	}
	if target == nil {
		t := &EmailThread{Subject: in.Subject, SubjectKey: SubjectKey(in.Subject), ContactIDs: contacts,
			OpportunityLinks: []EmailOpportunityLink{}, Messages: []EmailMessage{msg}}
		t.settle()
		if err := repo.Insert(ctx, s.Store, repo.CollEmails, t); err != nil {
			return IngestResult{}, err
		}
		return IngestResult{Outcome: EmailStored, ThreadID: t.ID, EmailID: msg.ID, MessageID: msg.MessageID, NewThread: true}, nil
	}
	var res IngestResult
	// The message and the email_received notifications of the thread's
	// linked opportunities are one unit: a notification exists exactly when
	// its message was stored.
	err = s.WriteGroup(ctx, func() ([]ledger.Mutation, error) {
		res = IngestResult{Outcome: EmailStored, ThreadID: target.ID, EmailID: msg.ID, MessageID: msg.MessageID}
		t, m, err := repo.Prepare(ctx, s.Store, repo.CollEmails, target.ID, audit.ActionUpdate, func(t *EmailThread) error {
			if i := slices.IndexFunc(t.Messages, func(m EmailMessage) bool { return m.MessageID == in.MessageID }); i >= 0 {
				res = IngestResult{Outcome: EmailDuplicate, ThreadID: t.ID, EmailID: t.Messages[i].ID, MessageID: in.MessageID}
				return nil // stored meanwhile: nothing changes, nothing is written
			}
			if t.ArchivedAt != nil {
				return repo.ErrConflict // archived meanwhile: look again
			}
			t.Messages = append(t.Messages, msg)
			for _, c := range contacts {
				if !slices.Contains(t.ContactIDs, c) {
					t.ContactIDs = append(t.ContactIDs, c)
				}
			}
			t.settle()
			return nil
		})
		if err != nil || m == nil {
			return nil, err
		}
		evs, err := s.emailEvents(ctx, t, &msg)
		if err != nil {
			return nil, err
		}
		return append([]ledger.Mutation{*m}, evs...), nil
	})
	if err != nil {
		return IngestResult{}, err
	}
	return res, nil
}

// emailEvents are the email_received notifications of message m joining
// thread t: one event per active opportunity the thread is linked to, when
// a known contact sent the message (mail the team sends, copied to the
// shared inbox, is not news to the team).
func (s *Store) emailEvents(ctx context.Context, t *EmailThread, m *EmailMessage) ([]ledger.Mutation, error) {
	if m.FromContactID == "" {
		return nil, nil
	}
	var out []ledger.Mutation
	for _, l := range t.OpportunityLinks {
		o, err := repo.Find[*pipeline.Opportunity](ctx, s.Store, repo.CollOpportunities, l.OpportunityID)
		if repo.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if o.Archived() {
			continue
		}
		subject := m.Subject
		if subject == "" {
			subject = t.Subject
		}
		muts, err := outbox.Of(s.Store).EventMutations(ctx, outbox.OppEvent{Kind: outbox.EventEmailReceived, OppID: o.ID, Title: o.Title,
			Text: fmt.Sprintf("email on %q from %s: %s", o.Title, m.From, subject),
			Data: map[string]any{"thread_id": t.ID, "email_id": m.ID, "message_id": m.MessageID, "from": m.From,
				"from_contact_id": m.FromContactID, "subject": subject, "date": m.Date}})
		if err != nil {
			return nil, err
		}
		out = append(out, muts...)
	}
	return out, nil
}

// MaxThreadBytes bounds the text a thread document holds, far inside
// MongoDB's 16 MiB document limit; a conversation that outgrows it goes on
// in a new thread with the same subject.
const MaxThreadBytes = 8 << 20

// maxThreadBytes is MaxThreadBytes; tests lower it.
var maxThreadBytes = MaxThreadBytes

// messageBytes estimates a message's stored size.
func messageBytes(m *EmailMessage) int {
	n := len(m.BodyText) + len(m.Subject) + len(m.MessageID) + len(m.From) + 256
	for _, a := range slices.Concat(m.To, m.Cc, m.References, m.ContactIDs) {
		n += len(a) + 8
	}
	for _, a := range m.Attachments {
		n += len(a.Filename) + len(a.MIMEType) + 128
	}
	return n
}

func threadBytes(t *EmailThread) int {
	n := 0
	for i := range t.Messages {
		n += messageBytes(&t.Messages[i])
	}
	return n
}

// Mailbox writes an address with its display name as a mail header does,
// "Jürgen Bläser <j@example.com>" (the name decoded, quoted when it holds a
// character the mail grammar reserves), or the bare address without one.
func Mailbox(name, addr string) string {
	name = strings.TrimSpace(name)
	if name == "" || strings.EqualFold(name, addr) {
		return addr
	}
	if strings.ContainsAny(name, `()<>[]:;@\,."`) {
		name = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name) + `"`
	}
	return name + " <" + addr + ">"
}

func mailboxes(addrs []string, names map[string]string) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = Mailbox(names[a], a)
	}
	return out
}

func noneIfEmpty(a []string) []string {
	if len(a) == 0 {
		return nil
	}
	return a
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func nonNil(a []string) []string {
	if a == nil {
		return []string{}
	}
	return a
}

// settle orders the messages oldest first (ties by key) and derives the
// thread's dates from them.
func (t *EmailThread) settle() {
	slices.SortStableFunc(t.Messages, func(a, b EmailMessage) int {
		if c := a.Date.Compare(b.Date); c != 0 {
			return c
		}
		return strings.Compare(a.MessageID, b.MessageID)
	})
	t.LastMessageAt = t.Messages[len(t.Messages)-1].Date
	t.LastContactReplyAt = nil
	for i := range t.Messages {
		if m := t.Messages[i]; m.FromContactID != "" {
			d := m.Date
			t.LastContactReplyAt = &d
		}
	}
	if t.SubjectKey == "" {
		t.SubjectKey = SubjectKey(t.Subject)
	}
}

// threadFor picks the active thread a new message joins, or nil.
func (s *Store) threadFor(ctx context.Context, in IncomingEmail, contacts []string) (*EmailThread, error) {
	var refs []string
	for _, r := range slices.Concat([]string{in.InReplyTo}, in.References) {
		if r != "" && !slices.Contains(refs, r) {
			refs = append(refs, r)
		}
	}
	if len(refs) > 0 {
		t, err := s.threadWith(ctx, bson.M{"messages.message_id": bson.M{"$in": refs}, "archived_at": nil})
		if err != nil || t != nil {
			return t, err
		}
	}
	// A reply stored before the message it answers (mailboxes are read in
	// any order) names this message in its own headers.
	t, err := s.threadWith(ctx, bson.M{"archived_at": nil, "$or": bson.A{
		bson.M{"messages.in_reply_to": in.MessageID}, bson.M{"messages.references": in.MessageID}}})
	if err != nil || t != nil {
		return t, err
	}
	key := SubjectKey(in.Subject)
	if key == "" {
		return nil, nil
	}
	return s.threadWith(ctx, bson.M{"archived_at": nil, "subject_key": key, "contact_ids": bson.M{"$in": contacts},
		"last_message_at": bson.M{"$gte": in.Date.Add(-SubjectWindow), "$lte": in.Date.Add(SubjectWindow)}})
}

// EmailThread returns one thread.
func (s *Store) EmailThread(ctx context.Context, id string) (*EmailThread, error) {
	return repo.Find[*EmailThread](ctx, s.Store, repo.CollEmails, id)
}

// EmailThreadFilter selects threads for ListEmailThreads.
type EmailThreadFilter struct {
	ContactID, OpportunityID string
	Since                    *time.Time
	IncludeArchived          bool
}

// ListEmailThreads lists threads, newest last message first, _id descending
// on ties.
func (s *Store) ListEmailThreads(ctx context.Context, f EmailThreadFilter, limit, offset int) (repo.Page[EmailThread], error) {
	filter := repo.Active(bson.M{}, f.IncludeArchived)
	if f.ContactID != "" {
		filter["contact_ids"] = f.ContactID
	}
	if f.OpportunityID != "" {
		filter["opportunity_links.opportunity_id"] = f.OpportunityID
	}
	ledger.Between(filter, "last_message_at", f.Since, nil)
	return repo.ListPage[EmailThread](ctx, s.Store, repo.CollEmails, filter, bson.D{{Key: "last_message_at", Value: -1}, {Key: "_id", Value: -1}}, limit, offset)
}

// EmailHit is one message found by SearchEmails or ContactEmails, with its thread.
type EmailHit struct {
	ThreadID string `json:"thread_id"`
	EmailMessage
}

// SearchEmails finds messages whose subject, body or sender contains query,
// literally and case-insensitively, newest first (ties by id descending);
// where the server has text search, its index narrows the threads first.
func (s *Store) SearchEmails(ctx context.Context, query string, limit int) (int, []EmailHit, error) {
	q := strings.ToLower(query)
	holds := func(subject, body, from string) bool {
		return strings.Contains(strings.ToLower(subject), q) || strings.Contains(strings.ToLower(body), q) ||
			strings.Contains(strings.ToLower(from), q)
	}
	keep := func(_ *EmailThread, m *EmailMessage) bool { return holds(m.Subject, m.BodyText, m.From) }
	t := textlist.Filter{Coll: repo.CollEmails, Text: query, TextIndex: true}
	ids, ok, err := textlist.IDs(ctx, s.Store, t)
	if err != nil {
		return 0, nil, err
	}
	if ok { // the threads the word index found, read by _id
		raws, err := s.FetchByID(ctx, repo.CollEmails, ids)
		if err != nil {
			return 0, nil, ledger.DriverErr(err, "email thread", "query")
		}
		return rawMessageHits(raws, holds, limit)
	}
	filter := bson.M{"archived_at": nil}
	bounded, cancel := textlist.ByPattern(ctx, s.Store, t, filter)
	defer cancel()
	total, hits, err := s.messages(bounded, filter, keep, limit)
	return total, hits, textlist.BoundErr(ctx, bounded, t, err)
}

// ContactEmails returns the messages that involve a contact (From, To or
// Cc), newest first, since a date when given.
func (s *Store) ContactEmails(ctx context.Context, contactID string, since *time.Time, limit int) (int, []EmailHit, error) {
	if _, err := repo.Find[*directory.Contact](ctx, s.Store, repo.CollContacts, contactID); err != nil {
		return 0, nil, err
	}
	filter := bson.M{"archived_at": nil, "messages.contact_ids": contactID}
	return s.messages(ctx, filter, func(_ *EmailThread, m *EmailMessage) bool {
		return slices.Contains(m.ContactIDs, contactID) && (since == nil || !m.Date.Before(*since))
	}, limit)
}

// messages reads the threads of filter and returns the total and the first
// limit of their messages that keep accepts, newest first.
func (s *Store) messages(ctx context.Context, filter bson.M, keep func(*EmailThread, *EmailMessage) bool, limit int) (int, []EmailHit, error) {
	cur, err := s.Find(ctx, repo.CollEmails, filter)
	if err != nil {
		return 0, nil, ledger.DriverErr(err, "email thread", "query")
	}
	var threads []EmailThread
	if err := cur.All(ctx, &threads); err != nil {
		return 0, nil, ledger.DriverErr(err, "email thread", "query")
	}
	total, hits := messageHits(threads, keep, limit)
	return total, hits, nil
}

// rawMessageHits is messageHits on active threads as stored: a message is
// read field by field where holds decides it, and only the page shown is
// decoded (a word in a tenth of 300,000 messages decoded 30,000 of them).
func rawMessageHits(threads []bson.Raw, holds func(subject, body, from string) bool, limit int) (int, []EmailHit, error) {
	type found struct {
		thread, id string
		date       time.Time
		raw        bson.Raw
	}
	var all []found
	for _, t := range threads {
		if v, err := t.LookupErr("archived_at"); err == nil && v.Type != bson.TypeNull {
			continue
		}
		msgs, ok := t.Lookup("messages").ArrayOK()
		if !ok {
			continue
		}
		vals, err := msgs.Values()
		if err != nil {
			return 0, nil, err
		}
		thread, _ := t.Lookup("_id").StringValueOK()
		for _, v := range vals {
			m, ok := v.DocumentOK()
			if !ok {
				continue
			}
			str := func(k string) string { s, _ := m.Lookup(k).StringValueOK(); return s }
			if !holds(str("subject"), str("body_text"), str("from")) {
				continue
			}
			f := found{thread: thread, id: str("id"), raw: m}
			if dt, ok := m.Lookup("date").DateTimeOK(); ok {
				f.date = bson.DateTime(dt).Time()
			}
			all = append(all, f)
		}
	}
	slices.SortFunc(all, func(a, b found) int {
		if c := b.date.Compare(a.date); c != 0 {
			return c
		}
		return strings.Compare(b.id, a.id)
	})
	hits := []EmailHit{}
	for _, f := range all[:min(limit, len(all))] {
		h := EmailHit{ThreadID: f.thread}
		if err := bson.Unmarshal(f.raw, &h.EmailMessage); err != nil {
			return 0, nil, err
		}
		hits = append(hits, h)
	}
	return len(all), hits, nil
}

// messageHits are the total and the first limit of the threads' messages
// that keep accepts, newest first.
func messageHits(threads []EmailThread, keep func(*EmailThread, *EmailMessage) bool, limit int) (int, []EmailHit) {
	hits := []EmailHit{}
	for i := range threads {
		t := &threads[i]
		for j := range t.Messages {
			if keep(t, &t.Messages[j]) {
				hits = append(hits, EmailHit{ThreadID: t.ID, EmailMessage: t.Messages[j]})
			}
		}
	}
	slices.SortFunc(hits, func(a, b EmailHit) int {
		if c := b.Date.Compare(a.Date); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	total := len(hits)
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return total, hits
}

// LinkEmailOpportunity links a thread to an active opportunity. Linking the
// same opportunity twice is a conflict naming the existing link.
func (s *Store) LinkEmailOpportunity(ctx context.Context, threadID, opportunityID string) (*EmailThread, *EmailOpportunityLink, error) {
	if _, err := s.EmailThread(ctx, threadID); err != nil {
		return nil, nil, err
	}
	if err := s.MustExist(ctx, repo.CollOpportunities, "opportunity_id", opportunityID); err != nil {
		return nil, nil, err
	}
	var link EmailOpportunityLink
	t, err := repo.Modify(ctx, s.Store, repo.CollEmails, threadID, audit.ActionLink, func(t *EmailThread) error {
		if t.ArchivedAt != nil {
			return repo.Errorf(repo.CodeFailedPrecondition, "email thread %s is archived; it cannot be linked", t.ID)
		}
		if i := slices.IndexFunc(t.OpportunityLinks, func(l EmailOpportunityLink) bool { return l.OpportunityID == opportunityID }); i >= 0 {
			return &repo.Error{Code: repo.CodeConflict, Field: "opportunity_id", Message: fmt.Sprintf("opportunity_id: thread %s is already linked to opportunity %s (link %s)", t.ID, opportunityID, t.OpportunityLinks[i].ID),
				Details: map[string]string{"link_id": t.OpportunityLinks[i].ID}}
		}
		link = EmailOpportunityLink{ID: uuid.NewString(), OpportunityID: opportunityID, LinkedAt: repo.Now()}
		t.OpportunityLinks = append(t.OpportunityLinks, link)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return t, &link, nil
}

// UnlinkEmailOpportunity removes one thread-opportunity link by its id; the
// unlink change entry keeps it.
func (s *Store) UnlinkEmailOpportunity(ctx context.Context, linkID string) (*EmailThread, error) {
	if ledger.CheckID(linkID) != nil {
		return nil, repo.NotFound("email opportunity link", linkID)
	}
	var owner repo.Meta
	if err := s.FindOne(ctx, repo.CollEmails, bson.M{"opportunity_links.id": linkID}).Decode(&owner); err != nil {
		return nil, ledger.DriverErr(err, "email opportunity link", linkID)
	}
	return repo.Modify(ctx, s.Store, repo.CollEmails, owner.ID, audit.ActionUnlink, func(t *EmailThread) error {
		if t.ArchivedAt != nil {
			return repo.Errorf(repo.CodeFailedPrecondition, "email thread %s is archived; it cannot be changed", t.ID)
		}
		i := slices.IndexFunc(t.OpportunityLinks, func(l EmailOpportunityLink) bool { return l.ID == linkID })
		if i < 0 {
			return repo.NotFound("email opportunity link", linkID)
		}
		t.OpportunityLinks = slices.Delete(t.OpportunityLinks, i, i+1)
		return nil
	})
}

// EmailSyncState is where the sync of one mailbox of one account stands:
// the mailbox's UIDVALIDITY and the highest UID handled under it. It is a
// settings record, written through the write path like any other.
type EmailSyncState struct {
	repo.Meta   `bson:",inline"`
	Name        string    `bson:"name" json:"name"`
	Account     string    `bson:"account" json:"account"`
	Mailbox     string    `bson:"mailbox" json:"mailbox"`
	UIDValidity int64     `bson:"uid_validity" json:"uid_validity"`
	LastUID     int64     `bson:"last_uid" json:"last_uid"`
	SyncedAt    time.Time `bson:"synced_at" json:"synced_at"`
}

// A mailbox's sync state is a singleton (repo.RegisterSingleton): the
// state EmailSyncState reads whatever is stored, never synced being its
// zero mark. So the rollback of its first sync moves the mark back to the
// start and the next sync reads the mailbox again, as after the rollback
// of any later sync.
func init() {
	repo.RegisterSingleton("email_sync", func(_ string, after bson.M) any {
		if name, _ := after["name"].(string); name != "email_sync" {
			return nil
		}
		account, _ := after["account"].(string)
		mailbox, _ := after["mailbox"].(string)
		return &EmailSyncState{Name: "email_sync", Account: account, Mailbox: mailbox}
	})
}

var syncStateSpace = uuid.MustParse("3f0b7a52-5d4e-4c1a-9b7e-2a6c8d9e0f11")

func syncStateID(account, mailbox string) string {
	return uuid.NewSHA1(syncStateSpace, []byte(account+"\x00"+mailbox)).String()
}

// EmailSyncState returns the sync state of a mailbox; a mailbox never synced
// has the zero state.
func (s *Store) EmailSyncState(ctx context.Context, account, mailbox string) (EmailSyncState, error) {
	var st EmailSyncState
	err := s.Collection(repo.CollSettings).FindOne(ctx, bson.M{"_id": syncStateID(account, mailbox)}).Decode(&st)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return EmailSyncState{Name: "email_sync", Account: account, Mailbox: mailbox}, nil
	}
	if err != nil {
		return st, ledger.DriverErr(err, "setting", "email sync state")
	}
	return st, nil
}

// SaveEmailSyncState records that a mailbox is synced up to lastUID under
// uidValidity. Under the same UIDVALIDITY the mark only moves forward, so
// two instances syncing at once never move it back.
func (s *Store) SaveEmailSyncState(ctx context.Context, account, mailbox string, uidValidity, lastUID int64) error {
	id := syncStateID(account, mailbox)
	for attempt := 0; attempt < 5; attempt++ {
		cur, err := s.EmailSyncState(ctx, account, mailbox)
		if err != nil {
			return err
		}
		if cur.ID == "" {
			st := &EmailSyncState{Meta: repo.Meta{ID: id}, Name: "email_sync", Account: account, Mailbox: mailbox,
				UIDValidity: uidValidity, LastUID: lastUID, SyncedAt: repo.Now()}
			err = repo.Insert(ctx, s.Store, repo.CollSettings, st)
			if ledger.IsConflict(err) {
				continue // another instance created it first
			}
			return err
		}
		_, err = repo.Modify(ctx, s.Store, repo.CollSettings, id, audit.ActionUpdate, func(st *EmailSyncState) error {
			if st.UIDValidity == uidValidity && st.LastUID >= lastUID {
				return nil
			}
			st.UIDValidity, st.LastUID, st.SyncedAt = uidValidity, lastUID, repo.Now()
			return nil
		})
		return err
	}
	return repo.ErrConflict
}

// PutEmailAttachment streams an attachment's bytes into the GridFS bucket
// (as media bytes are) and returns the file id, the size and the SHA-256.
// Bytes are never deleted; a file whose message turns out to be a
// duplicate stays unreferenced.
func (s *Store) PutEmailAttachment(ctx context.Context, filename, mimeType string, r io.Reader) (string, int64, string, error) {
	fileID := uuid.NewString()
	h := sha256.New()
	n, err := s.PutBlob(ctx, fileID, filename, io.TeeReader(r, h), bson.M{"email_attachment": true, "mime_type": mimeType})
	if err != nil {
		return "", n, "", err
	}
	return fileID, n, hex.EncodeToString(h.Sum(nil)), nil
}

// StoredEmail reports where a message keyed key is stored (a duplicate), or nil.
func (s *Store) StoredEmail(ctx context.Context, key string) (*IngestResult, error) {
	t, err := s.threadWith(ctx, bson.M{"messages.message_id": key})
	if err != nil || t == nil {
		return nil, err
	}
	res := &IngestResult{Outcome: EmailDuplicate, ThreadID: t.ID, MessageID: key}
	if i := slices.IndexFunc(t.Messages, func(m EmailMessage) bool { return m.MessageID == key }); i >= 0 {
		res.EmailID = t.Messages[i].ID
	}
	return res, nil
}

// KnownEmailContacts counts the active contacts among addrs.
func (s *Store) KnownEmailContacts(ctx context.Context, addrs []string) (int, error) {
	m, err := s.contactsByAddress(ctx, addrs)
	return len(m), err
}

// EmailThreadDetail is a thread with its linked contacts and opportunities,
// each trimmed to what an agent needs.
type EmailThreadDetail struct {
	*EmailThread
	Contacts      []map[string]any `json:"contacts"`
	Opportunities []map[string]any `json:"opportunities"`
}

// EmailThreadDetail returns get_email_thread's view of a thread.
func (s *Store) EmailThreadDetail(ctx context.Context, id string) (*EmailThreadDetail, error) {
	t, err := s.EmailThread(ctx, id)
	if err != nil {
		return nil, err
	}
	d := &EmailThreadDetail{EmailThread: t, Opportunities: []map[string]any{}}
	if d.Contacts, err = s.Trimmed(ctx, repo.CollContacts, bson.M{"_id": bson.M{"$in": nonNil(t.ContactIDs)}}, bson.D{{Key: "name", Value: 1}, {Key: "_id", Value: 1}},
		[]string{"name", "email", "archived_at"}); err != nil {
		return nil, err
	}
	for _, l := range t.OpportunityLinks {
		o, err := s.TrimmedOne(ctx, repo.CollOpportunities, l.OpportunityID, []string{"title", "stage", "archived_at"})
		if err != nil {
			return nil, err
		}
		if o == nil {
			o = map[string]any{"id": l.OpportunityID}
		}
		o["link_id"], o["linked_at"] = l.ID, l.LinkedAt
		d.Opportunities = append(d.Opportunities, o)
	}
	return d, nil
}

func emailThreadRule(ctx context.Context, v *repo.RuleView, id string, state bson.M) error {
	t, err := repo.DecodeState[EmailThread](id, state)
	if err != nil {
		return err
	}
	for i, c := range t.ContactIDs {
		if err := v.Linked(ctx, repo.CollContacts, fmt.Sprintf("contact_ids[%d]", i), c); err != nil {
			return err
		}
	}
	for _, l := range t.OpportunityLinks {
		if err := v.Linked(ctx, repo.CollOpportunities, fmt.Sprintf("opportunity link %s", l.ID), l.OpportunityID); err != nil {
			return err
		}
	}
	return nil
}

func init() { repo.RegisterRule(repo.CollEmails, emailThreadRule) }
