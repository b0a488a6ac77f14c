package pitches

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/directory"
	"outreach/repo/pipeline"
)

// Pitches: an email to one or more contacts of an opportunity, drafted,
// approved by a team member the operator's policy allows (never the agent
// that drafted it), then sent from the team's mailbox, one message per
// recipient (the merge fields make each one personal). Every step is a
// change through the write path; a recipient's send is a change with action
// send, which no rollback undoes.

// Pitch states.
const (
	PitchDraft     = "draft"
	PitchApproved  = "approved"
	PitchScheduled = "scheduled"
	PitchSending   = "sending"
	PitchSent      = "sent"
	PitchFailed    = "failed"
	PitchCancelled = "cancelled"
)

// PitchStates are the states of a pitch.
var PitchStates = []string{PitchDraft, PitchApproved, PitchScheduled, PitchSending, PitchSent, PitchFailed, PitchCancelled}

// Recipient states.
const (
	RecipientPending    = "pending"
	RecipientSending    = "sending"
	RecipientSent       = "sent"
	RecipientBounced    = "bounced"
	RecipientReplied    = "replied"
	RecipientSuppressed = "suppressed"
	RecipientFailed     = "failed"
)

// RecipientStates are the states of a pitch's recipient.
var RecipientStates = []string{RecipientPending, RecipientSending, RecipientSent, RecipientBounced, RecipientReplied, RecipientSuppressed, RecipientFailed}

// MergeFields are the fields a pitch's subject and body may hold as
// {{name}}.
var MergeFields = []string{"first_name", "last_name", "name", "email"}

// Pitch is an email pitch of an opportunity.
type Pitch struct {
	repo.Meta     `bson:",inline"`
	OpportunityID string `bson:"opportunity_id" json:"opportunity_id"`
	// From is the sender: the team mailbox configured when the pitch was
	// drafted.
	From       string           `bson:"from" json:"from"`
	Subject    string           `bson:"subject" json:"subject"`
	Body       string           `bson:"body" json:"body"`
	State      string           `bson:"state" json:"state"`
	Recipients []PitchRecipient `bson:"recipients" json:"recipients"`
	// ContentHash is the SHA-256 of what is sent (sender, subject, body,
	// recipients); an approval holds for this hash only.
	ContentHash string     `bson:"content_hash" json:"content_hash"`
	DraftedBy   PitchActor `bson:"drafted_by" json:"drafted_by"`
	// Approval is the approval in force; an edit clears it (the voided one
	// is kept in VoidedApprovals).
	Approval        *PitchApproval  `bson:"approval,omitempty" json:"approval,omitempty"`
	VoidedApprovals []PitchApproval `bson:"voided_approvals,omitempty" json:"voided_approvals,omitempty"`
	// ScheduledAt is when the delivery worker sends it (UTC); ScheduledZone
	// the zone it was given in.
	ScheduledAt   *time.Time `bson:"scheduled_at,omitempty" json:"scheduled_at,omitempty"`
	ScheduledZone string     `bson:"scheduled_zone,omitempty" json:"scheduled_zone,omitempty"`
	// Claim is the sender that holds the pitch while it sends, and until
	// when; another instance takes it over only after the lease ends.
	ClaimedBy    string     `bson:"claimed_by,omitempty" json:"claimed_by,omitempty"`
	ClaimedUntil *time.Time `bson:"claimed_until,omitempty" json:"claimed_until,omitempty"`
	SentAt       *time.Time `bson:"sent_at,omitempty" json:"sent_at,omitempty"`
	FailReason   string     `bson:"fail_reason,omitempty" json:"fail_reason,omitempty"`
	// StageNote says why the sent pitch did not move its opportunity to
	// pitched (a guard of the pipeline refused the move).
	StageNote string `bson:"stage_note,omitempty" json:"stage_note,omitempty"`
}

// PitchRecipient is one recipient of a pitch and what happened to them.
type PitchRecipient struct {
	ContactID string `bson:"contact_id" json:"contact_id"`
	Email     string `bson:"email" json:"email"`
	FirstName string `bson:"first_name" json:"first_name"`
	LastName  string `bson:"last_name,omitempty" json:"last_name,omitempty"`
	State     string `bson:"state" json:"state"`
	// Reason is why the recipient was suppressed, failed or bounced.
	Reason string `bson:"reason,omitempty" json:"reason,omitempty"`
	// Guard is the guard that refused the recipient (do_not_contact,
	// suppression, double_pitch, embargo, domain_cap, daily_cap, contact).
	Guard string `bson:"guard,omitempty" json:"guard,omitempty"`
	// MessageID is the Message-ID of the recipient's message, kept from
	// the first attempt on: a retry sends the same one.
	MessageID   string     `bson:"message_id,omitempty" json:"message_id,omitempty"`
	AttemptedAt *time.Time `bson:"attempted_at,omitempty" json:"attempted_at,omitempty"`
	// Attempts counts the SMTP transactions started; more than one means a
	// second copy with the same Message-ID may have gone.
	Attempts  int        `bson:"attempts,omitempty" json:"attempts,omitempty"`
	SentAt    *time.Time `bson:"sent_at,omitempty" json:"sent_at,omitempty"`
	RepliedAt *time.Time `bson:"replied_at,omitempty" json:"replied_at,omitempty"`
	// Note says what reconciliation found (a copy in the Sent folder, or a
	// second copy that may have gone).
	Note string `bson:"note,omitempty" json:"note,omitempty"`
}

// PitchActor is who drafted or approved a pitch.
type PitchActor struct {
	UserID  string `bson:"user_id" json:"user_id"`
	AgentID string `bson:"agent_id" json:"agent_id"`
	KeyID   string `bson:"key_id,omitempty" json:"key_id,omitempty"`
}

// PitchApproval is an approval: who, when, which content.
type PitchApproval struct {
	By          PitchActor `bson:"by" json:"by"`
	At          time.Time  `bson:"at" json:"at"`
	ContentHash string     `bson:"content_hash" json:"content_hash"`
	// OverrideReason lets the pitch go to contacts the team pitched within
	// the double-pitch window; only an approver gives it.
	OverrideReason string     `bson:"override_reason,omitempty" json:"override_reason,omitempty"`
	VoidedAt       *time.Time `bson:"voided_at,omitempty" json:"voided_at,omitempty"`
}

var mergeField = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// checkMerge checks that text uses only known merge fields.
func checkMerge(field, text string) error {
	for _, m := range mergeField.FindAllStringSubmatch(text, -1) {
		if !slices.Contains(MergeFields, m[1]) {
			return repo.Invalid(field, "merge field {{%s}} is unknown; use one of: {{%s}}", m[1], strings.Join(MergeFields, "}}, {{"))
		}
	}
	return nil
}

// Merge fills the merge fields of text for recipient r.
func Merge(text string, r PitchRecipient) string {
	first, last := r.FirstName, r.LastName
	return mergeField.ReplaceAllStringFunc(text, func(m string) string {
		switch strings.TrimSpace(strings.Trim(m, "{}")) {
		case "first_name":
			return first
		case "last_name":
			return last
		case "name":
			return strings.TrimSpace(first + " " + last)
		case "email":
			return r.Email
		}
		return m
	})
}

// RecipientName is the display name of a recipient.
func RecipientName(r PitchRecipient) string {
	return strings.TrimSpace(r.FirstName + " " + r.LastName)
}

func hashPitch(p *Pitch) string {
	ids := make([]string, 0, len(p.Recipients))
	for _, r := range p.Recipients {
		ids = append(ids, r.ContactID+"\x00"+r.Email)
	}
	b, _ := json.Marshal([]any{p.From, p.Subject, p.Body, ids})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func pitchActor(ctx context.Context) PitchActor {
	a, _ := audit.ActorFrom(ctx)
	return PitchActor{UserID: a.UserID, AgentID: a.AgentID, KeyID: a.KeyID}
}

// pitchRecipients reads the contacts as recipients: each must be active,
// on the opportunity, and have an address.
func (s *Store) pitchRecipients(ctx context.Context, o *pipeline.Opportunity, ids []string) ([]PitchRecipient, error) {
	ids = pipeline.UniqueIDs(ids)
	if len(ids) == 0 {
		return nil, repo.Invalid("contact_ids", "give at least one contact (a contact of the opportunity with an email address)")
	}
	if err := s.MustExist(ctx, repo.CollContacts, "contact_ids", ids...); err != nil {
		return nil, err
	}
	out := make([]PitchRecipient, 0, len(ids))
	for _, id := range ids {
		c, err := repo.Find[*directory.Contact](ctx, s.Store, repo.CollContacts, id)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(o.ContactIDs, id) {
			return nil, repo.Invalid("contact_ids", "contact %s is not on opportunity %s; add it with add_opportunity_contact first", directory.ContactLabel(c), o.ID)
		}
		if strings.TrimSpace(c.Email) == "" {
			return nil, repo.Invalid("contact_ids", "contact %s has no email address; set it with update_contact", directory.ContactLabel(c))
		}
		out = append(out, PitchRecipient{ContactID: id, Email: strings.TrimSpace(c.Email), FirstName: c.FirstName, LastName: c.LastName, State: RecipientPending})
	}
	return out, nil
}

// PitchInput is what create_pitch takes.
type PitchInput struct {
	OpportunityID string
	ContactIDs    []string
	Subject, Body string
}

func checkPitchText(subject, body string) (string, string, error) {
	subject = strings.TrimSpace(subject)
	if subject == "" {
		return "", "", repo.Invalid("subject", "must not be empty")
	}
	if strings.ContainsAny(subject, "\r\n") {
		return "", "", repo.Invalid("subject", "must be one line")
	}
	if strings.TrimSpace(body) == "" {
		return "", "", repo.Invalid("body", "must not be empty")
	}
	if err := checkMerge("subject", subject); err != nil {
		return "", "", err
	}
	if err := checkMerge("body", body); err != nil {
		return "", "", err
	}
	return subject, body, nil
}

// CreatePitch drafts a pitch of an active opportunity to some of its
// contacts, from the team mailbox.
func (s *Store) CreatePitch(ctx context.Context, in PitchInput) (*Pitch, error) {
	subject, body, err := checkPitchText(in.Subject, in.Body)
	if err != nil {
		return nil, err
	}
	if err := s.MustExist(ctx, repo.CollOpportunities, "opportunity_id", in.OpportunityID); err != nil {
		return nil, err
	}
	o, err := pipeline.Of(s.Store).Opportunity(ctx, in.OpportunityID)
	if err != nil {
		return nil, err
	}
	rs, err := s.pitchRecipients(ctx, o, in.ContactIDs)
	if err != nil {
		return nil, err
	}
	p := &Pitch{OpportunityID: o.ID, From: s.PitchPolicy().From, Subject: subject, Body: body, State: PitchDraft,
		Recipients: rs, DraftedBy: pitchActor(ctx)}
	p.ContentHash = hashPitch(p)
	if err := repo.Insert(ctx, s.Store, repo.CollPitches, p); err != nil {
		return nil, err
	}
	return p, nil
}

// Pitch returns a pitch.
func (s *Store) Pitch(ctx context.Context, id string) (*Pitch, error) {
	return repo.Find[*Pitch](ctx, s.Store, repo.CollPitches, id)
}

// PitchPatch is a change to a pitch; nil fields are left as they are.
type PitchPatch struct {
	Subject, Body *string
	ContactIDs    *[]string
}

func editable(p *Pitch) error {
	if p.Archived() {
		return repo.Errorf(repo.CodeFailedPrecondition, "pitch %s is archived", p.ID)
	}
	switch p.State {
	case PitchDraft, PitchApproved, PitchScheduled:
		return nil
	}
	return &repo.Error{Code: repo.CodeFailedPrecondition, Field: "id", Message: fmt.Sprintf("pitch %s is %s; only a draft, approved or scheduled pitch can be changed (draft a new one with create_pitch)", p.ID, p.State)}
}

// voidApproval clears p's approval (kept among the voided ones) and
// returns the pitch to draft.
func voidApproval(p *Pitch) {
	if p.Approval != nil {
		a := *p.Approval
		t := repo.Now()
		a.VoidedAt = &t
		p.VoidedApprovals = append(p.VoidedApprovals, a)
		p.Approval = nil
	}
	p.State, p.ScheduledAt, p.ScheduledZone = PitchDraft, nil, ""
}

// UpdatePitch changes a pitch's subject, body or recipients; a change of
// what is sent voids its approval.
func (s *Store) UpdatePitch(ctx context.Context, id string, pt PitchPatch) (*Pitch, error) {
	cur, err := s.Pitch(ctx, id)
	if err != nil {
		return nil, err
	}
	var rs []PitchRecipient
	if pt.ContactIDs != nil {
		o, err := pipeline.Of(s.Store).Opportunity(ctx, cur.OpportunityID)
		if err != nil {
			return nil, err
		}
		if rs, err = s.pitchRecipients(ctx, o, *pt.ContactIDs); err != nil {
			return nil, err
		}
	}
	return repo.Modify(ctx, s.Store, repo.CollPitches, id, audit.ActionUpdate, func(p *Pitch) error {
		if err := editable(p); err != nil {
			return err
		}
		subject, body := p.Subject, p.Body
		if pt.Subject != nil {
			subject = *pt.Subject
		}
		if pt.Body != nil {
			body = *pt.Body
		}
		subject, body, err := checkPitchText(subject, body)
		if err != nil {
			return err
		}
		p.Subject, p.Body = subject, body
		if rs != nil {
			p.Recipients = rs
		}
		if h := hashPitch(p); h != p.ContentHash {
			p.ContentHash = h
			voidApproval(p)
		}
		return nil
	})
}

// ApprovePitch approves a pitch for sending: the actor's key must have the
// policy's approver scope and must not be the key or agent that drafted it.
// The approval records the content hash approved.
func (s *Store) ApprovePitch(ctx context.Context, id, contentHash, override string) (*Pitch, error) {
	a, _ := audit.ActorFrom(ctx)
	pol := s.PitchPolicy()
	if !slices.Contains(a.Scopes, pol.ApproverScope) && !slices.Contains(a.Scopes, repo.ScopeAdmin) {
		return nil, repo.Errorf(repo.CodePermissionDenied, "approving a pitch needs a key with the %s scope (the operator's pitch approver policy)", pol.ApproverScope)
	}
	override = strings.TrimSpace(override)
	return repo.Modify(ctx, s.Store, repo.CollPitches, id, audit.ActionUpdate, func(p *Pitch) error {
		if p.Archived() {
			return repo.Errorf(repo.CodeFailedPrecondition, "pitch %s is archived", p.ID)
		}
		if p.State != PitchDraft {
			return &repo.Error{Code: repo.CodeFailedPrecondition, Field: "id", Message: fmt.Sprintf("pitch %s is %s; only a draft is approved", p.ID, p.State)}
		}
		d := p.DraftedBy
		if (d.KeyID != "" && d.KeyID == a.KeyID) || (d.AgentID != "" && d.AgentID == a.AgentID) {
			return &repo.Error{Code: repo.CodePermissionDenied, Field: "id", Message: fmt.Sprintf("pitch %s was drafted by this agent (%s); another team member approves it with their own key", p.ID, a.AgentID)}
		}
		if contentHash != "" && contentHash != p.ContentHash {
			return &repo.Error{Code: repo.CodeConflict, Field: "content_hash", Message: fmt.Sprintf("content_hash: the pitch changed since you read it (now %s); read it again with get_pitch and approve what is there", p.ContentHash)}
		}
		p.Approval = &PitchApproval{By: pitchActor(ctx), At: repo.Now(), ContentHash: p.ContentHash, OverrideReason: override}
		p.State = PitchApproved
		return nil
	})
}

// SchedulePitch hands an approved pitch to the delivery worker, to send at
// (nil: now).
func (s *Store) SchedulePitch(ctx context.Context, id string, at *time.Time, zone string) (*Pitch, error) {
	if s.PitchPolicy().From == "" {
		return nil, repo.Errorf(repo.CodeFailedPrecondition, "no team mailbox is configured for sending (OUTREACH_SMTP_FROM); pitches can be drafted and approved but not sent")
	}
	return repo.Modify(ctx, s.Store, repo.CollPitches, id, audit.ActionUpdate, func(p *Pitch) error {
		if p.Archived() {
			return repo.Errorf(repo.CodeFailedPrecondition, "pitch %s is archived", p.ID)
		}
		if p.State != PitchApproved && p.State != PitchScheduled {
			return &repo.Error{Code: repo.CodeFailedPrecondition, Field: "id", Message: fmt.Sprintf("pitch %s is %s; only an approved pitch is sent (approve_pitch first)", p.ID, p.State)}
		}
		if err := approvalHolds(p); err != nil {
			return err
		}
		t := repo.Now()
		if at != nil && at.After(t) {
			t = at.UTC().Truncate(time.Millisecond)
		}
		p.State, p.ScheduledAt, p.ScheduledZone = PitchScheduled, &t, zone
		return nil
	})
}

func approvalHolds(p *Pitch) error {
	if p.Approval == nil || p.Approval.ContentHash != p.ContentHash || hashPitch(p) != p.ContentHash {
		return &repo.Error{Code: repo.CodeFailedPrecondition, Field: "id", Message: fmt.Sprintf("pitch %s has no approval for its current content; approve_pitch again", p.ID)}
	}
	return nil
}

// CancelPitch cancels a pitch that has not started sending.
func (s *Store) CancelPitch(ctx context.Context, id string) (*Pitch, error) {
	return repo.Modify(ctx, s.Store, repo.CollPitches, id, audit.ActionUpdate, func(p *Pitch) error {
		if err := editable(p); err != nil {
			return err
		}
		p.State, p.ScheduledAt = PitchCancelled, nil
		return nil
	})
}

// ArchivePitch archives a pitch that is not being sent.
func (s *Store) ArchivePitch(ctx context.Context, id string) (*Pitch, error) {
	return repo.Archive(ctx, s.Store, repo.CollPitches, id, func(p *Pitch) error {
		if p.State == PitchScheduled || p.State == PitchSending {
			return &repo.Error{Code: repo.CodeFailedPrecondition, Field: "id", Message: fmt.Sprintf("pitch %s is %s; cancel it first (cancel_pitch)", p.ID, p.State)}
		}
		return nil
	})
}

// PitchFilter selects pitches.
type PitchFilter struct {
	OpportunityID, ContactID, State string
	IncludeArchived                 bool
}

// ListPitches lists pitches, newest first.
func (s *Store) ListPitches(ctx context.Context, f PitchFilter, limit, offset int) (repo.Page[Pitch], error) {
	filter := bson.M{}
	if f.OpportunityID != "" {
		filter["opportunity_id"] = f.OpportunityID
	}
	if f.ContactID != "" {
		filter["recipients.contact_id"] = f.ContactID
	}
	if f.State != "" {
		filter["state"] = f.State
	}
	return repo.ListPage[Pitch](ctx, s.Store, repo.CollPitches, repo.Active(filter, f.IncludeArchived), repo.NewestFirst, limit, offset)
}

// PitchBrief is a pitch as a contact's dossier shows it: the pitch and what
// happened to that contact.
type PitchBrief struct {
	ID             string     `json:"id"`
	OpportunityID  string     `json:"opportunity_id"`
	Subject        string     `json:"subject"`
	State          string     `json:"state"`
	RecipientState string     `json:"recipient_state"`
	Reason         string     `json:"reason,omitempty"`
	SentAt         *time.Time `json:"sent_at"`
	RepliedAt      *time.Time `json:"replied_at"`
}

// ContactPitches lists the active pitches to a contact, newest first.
func (s *Store) ContactPitches(ctx context.Context, contactID string) ([]PitchBrief, error) {
	var ps []Pitch
	if err := s.FindAll(ctx, repo.CollPitches, bson.M{"recipients.contact_id": contactID, "archived_at": nil}, nil, &ps); err != nil {
		return nil, err
	}
	slices.SortFunc(ps, func(a, b Pitch) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	out := []PitchBrief{}
	for _, p := range ps {
		if p.Archived() {
			continue
		}
		for _, r := range p.Recipients {
			if r.ContactID == contactID {
				out = append(out, PitchBrief{ID: p.ID, OpportunityID: p.OpportunityID, Subject: Merge(p.Subject, r), State: p.State,
					RecipientState: r.State, Reason: r.Reason, SentAt: r.SentAt, RepliedAt: r.RepliedAt})
			}
		}
	}
	return out, nil
}

// PitchSchedule reads the scheduled_at of pitch id: an RFC 3339 time with
// its zone offset, or a local time (2026-12-01T09:00) in the recipients'
// time zone (their contacts' timezone, which must be set and the same for
// all). It returns the instant and the zone to show it in.
func (s *Store) PitchSchedule(ctx context.Context, id, text string) (*time.Time, string, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, "", nil
	}
	if e, err := pipeline.ParseEmbargo("scheduled_at", text); err == nil {
		return &e.Until, e.Zone, nil
	}
	var local time.Time
	var perr error
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if local, perr = time.Parse(layout, text); perr == nil {
			break
		}
	}
	if perr != nil {
		return nil, "", repo.Invalid("scheduled_at", "%q is neither an RFC 3339 time with a zone offset (2026-12-01T09:00:00-05:00) nor a local time in the recipients' zone (2026-12-01T09:00)", text)
	}
	p, err := s.Pitch(ctx, id)
	if err != nil {
		return nil, "", err
	}
	zone := ""
	for _, r := range p.Recipients {
		c, err := repo.Find[*directory.Contact](ctx, s.Store, repo.CollContacts, r.ContactID)
		if err != nil {
			return nil, "", err
		}
		if c.Timezone == "" || (zone != "" && c.Timezone != zone) {
			return nil, "", repo.Invalid("scheduled_at", "%q has no zone offset, and the recipients have no one time zone (contact %s: %q); give the offset, e.g. %s+01:00", text, directory.ContactLabel(c), c.Timezone, text)
		}
		zone = c.Timezone
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, "", repo.Invalid("scheduled_at", "the recipients' time zone %q is not known", zone)
	}
	t := time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), local.Minute(), local.Second(), 0, loc).UTC()
	return &t, zone, nil
}
