package pitches

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/ledger"
	"outreach/repo"
	"outreach/repo/directory"
	"outreach/repo/inbox"
	"outreach/repo/pipeline"
)

// The sending side of pitches: the suppression list, the claim a sender
// takes on a due pitch, the guards checked per recipient just before the
// SMTP transaction, and the records of each attempt and outcome. The SMTP
// and IMAP work is package pitchsend's; every record it keeps goes through
// here.

// Suppression reasons.
const (
	SuppressHardBounce  = "hard_bounce"
	SuppressUnsubscribe = "unsubscribe"
	SuppressManual      = "manual"
)

// SuppressionReasons are the reasons an address is on the suppression list.
var SuppressionReasons = []string{SuppressHardBounce, SuppressUnsubscribe, SuppressManual}

// Suppression is an address pitches are never sent to.
type Suppression struct {
	repo.Meta  `bson:",inline"`
	Email      string `bson:"email" json:"email"`
	EmailLower string `bson:"email_lower" json:"-"`
	Reason     string `bson:"reason" json:"reason"`
	Note       string `bson:"note,omitempty" json:"note,omitempty"`
	// PitchID is the pitch whose bounce or unsubscribe link added it.
	PitchID string `bson:"pitch_id,omitempty" json:"pitch_id,omitempty"`
}

// normalAddress checks and lower-cases an address.
func normalAddress(field, email string) (string, string, error) {
	a, err := mail.ParseAddress(strings.TrimSpace(email))
	if err != nil || a.Name != "" {
		return "", "", repo.Invalid(field, "%q is not an email address", email)
	}
	return a.Address, strings.ToLower(a.Address), nil
}

// Suppressed returns the active suppression of an address, or nil.
func (s *Store) Suppressed(ctx context.Context, email string) (*Suppression, error) {
	var out []Suppression
	if err := s.FindAll(ctx, repo.CollSuppressions, bson.M{"email_lower": strings.ToLower(strings.TrimSpace(email)), "archived_at": nil}, nil, &out); err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].ArchivedAt == nil && out[i].EmailLower == strings.ToLower(strings.TrimSpace(email)) {
			return &out[i], nil
		}
	}
	return nil, nil
}

// AddSuppression puts an address on the suppression list. An address
// already on it is answered with its suppression and added reports false.
func (s *Store) AddSuppression(ctx context.Context, email, reason, note, pitchID string) (sup *Suppression, added bool, err error) {
	if err := pipeline.OneOf("reason", reason, SuppressionReasons); err != nil {
		return nil, false, err
	}
	addr, lower, err := normalAddress("email", email)
	if err != nil {
		return nil, false, err
	}
	if cur, err := s.Suppressed(ctx, lower); err != nil || cur != nil {
		return cur, false, err
	}
	sup = &Suppression{Email: addr, EmailLower: lower, Reason: reason, Note: strings.TrimSpace(note), PitchID: pitchID}
	if err := repo.Insert(ctx, s.Store, repo.CollSuppressions, sup); err != nil {
		return nil, false, err
	}
	return sup, true, nil
}

// RemoveSuppression takes an address off the suppression list (archives
// its suppression; restore is not offered: add it again).
func (s *Store) RemoveSuppression(ctx context.Context, email string) (*Suppression, error) {
	if a, _ := audit.ActorFrom(ctx); !slices.Contains(a.Scopes, repo.ScopeAdmin) {
		return nil, repo.Errorf(repo.CodePermissionDenied, "only a key with the admin scope takes an address off the suppression list")
	}
	_, lower, err := normalAddress("email", email)
	if err != nil {
		return nil, err
	}
	cur, err := s.Suppressed(ctx, lower)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, &repo.Error{Code: repo.CodeNotFound, Field: "email", Message: fmt.Sprintf("email: %s is not on the suppression list", lower)}
	}
	return repo.Archive[*Suppression](ctx, s.Store, repo.CollSuppressions, cur.ID, nil)
}

// ListSuppressions lists the suppression list, newest first.
func (s *Store) ListSuppressions(ctx context.Context, reason string, limit, offset int) (repo.Page[Suppression], error) {
	f := bson.M{"archived_at": nil}
	if reason != "" {
		f["reason"] = reason
	}
	return repo.ListPage[Suppression](ctx, s.Store, repo.CollSuppressions, f, repo.NewestFirst, limit, offset)
}

// ---------------------------------------------------------------------------
// Unsubscribe links: the address and the pitch, signed with a key derived
// from the URL-signing secret (which is never in the store).

func (s *Store) unsubscribeKey(ctx context.Context) ([]byte, error) {
	k, err := pipeline.Of(s.Store).SigningKey(ctx)
	if err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, k)
	m.Write([]byte("outreach unsubscribe v1"))
	return m.Sum(nil), nil
}

// UnsubscribeToken signs an address and a pitch id for the unsubscribe URL.
func (s *Store) UnsubscribeToken(ctx context.Context, email, pitchID string) (string, error) {
	k, err := s.unsubscribeKey(ctx)
	if err != nil {
		return "", err
	}
	payload := base64.RawURLEncoding.EncodeToString([]byte(strings.ToLower(email) + "\n" + pitchID))
	m := hmac.New(sha256.New, k)
	m.Write([]byte(payload))
	return payload + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}

// ErrBadUnsubscribe is an unsubscribe token that is not the service's.
var ErrBadUnsubscribe = errors.New("the unsubscribe link is not valid")

// CheckUnsubscribeToken checks a token's signature and returns its
// address and pitch id.
func (s *Store) CheckUnsubscribeToken(ctx context.Context, token string) ([2]string, error) {
	k, err := s.unsubscribeKey(ctx)
	if err != nil {
		return [2]string{}, err
	}
	payload, sig, ok := strings.Cut(token, ".")
	got, err1 := base64.RawURLEncoding.DecodeString(sig)
	raw, err2 := base64.RawURLEncoding.DecodeString(payload)
	m := hmac.New(sha256.New, k)
	m.Write([]byte(payload))
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(got, m.Sum(nil)) {
		return [2]string{}, ErrBadUnsubscribe
	}
	email, pitchID, _ := strings.Cut(string(raw), "\n")
	return [2]string{email, pitchID}, nil
}

// UnsubscribeAddress checks a token and puts its address on the
// suppression list; added is false when it already was.
func (s *Store) UnsubscribeAddress(ctx context.Context, token string) (email string, added bool, err error) {
	t, err := s.CheckUnsubscribeToken(ctx, token)
	if err != nil {
		return "", false, err
	}
	_, added, err = s.AddSuppression(ctx, t[0], SuppressUnsubscribe, "unsubscribe link of a pitch", t[1])
	return t[0], added, err
}

// ---------------------------------------------------------------------------
// Claims and records of a send.

// ErrNotDue is a pitch a sender cannot claim: not scheduled, not due, or
// held by another sender whose lease has not ended.
var ErrNotDue = errors.New("pitch not due")

// pitchWrite changes a pitch through the write path; send marks the change
// as a send, which no rollback undoes. Every write of a delivery (the
// claim, each attempt and outcome, the end) is a send: the change log shows
// a pitch's delivery as its send changes, and a rollback skips them all,
// listing them as not reversible.
func (s *Store) pitchWrite(ctx context.Context, id string, send bool, fn func(*Pitch) error) (*Pitch, error) {
	var out *Pitch
	err := s.WriteGroup(ctx, func() ([]ledger.Mutation, error) {
		p, m, err := repo.Prepare(ctx, s.Store, repo.CollPitches, id, audit.ActionUpdate, fn)
		if err != nil {
			return nil, err
		}
		out = p
		if m == nil {
			return nil, nil
		}
		if send {
			m.Action, m.Irreversible = audit.ActionSend, true
		}
		return []ledger.Mutation{*m}, nil
	})
	return out, err
}

// DuePitches lists the pitches a sender should take now: scheduled and
// due, or sending under a lease that ended (a sender that stopped).
func (s *Store) DuePitches(ctx context.Context) ([]string, error) {
	var ps []Pitch
	t := repo.Now()
	if err := s.FindAll(ctx, repo.CollPitches, bson.M{"state": bson.M{"$in": []string{PitchScheduled, PitchSending}}, "archived_at": nil}, nil, &ps); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range ps {
		if claimable(&p, t) {
			out = append(out, p.ID)
		}
	}
	return out, nil
}

func claimable(p *Pitch, t time.Time) bool {
	switch {
	case p.Archived():
		return false
	case p.State == PitchScheduled:
		return p.ScheduledAt == nil || !p.ScheduledAt.After(t)
	case p.State == PitchSending:
		return p.ClaimedUntil == nil || p.ClaimedUntil.Before(t)
	}
	return false
}

// ClaimPitch takes a due pitch for sender owner until now+lease, through
// the write path with the version check: of two senders, one wins; the
// other gets ErrNotDue.
func (s *Store) ClaimPitch(ctx context.Context, id, owner string, lease time.Duration) (*Pitch, error) {
	return s.pitchWrite(ctx, id, true, func(p *Pitch) error {
		t := repo.Now()
		if !claimable(p, t) {
			return ErrNotDue
		}
		if err := approvalHolds(p); err != nil {
			return err
		}
		until := t.Add(lease)
		p.State, p.ClaimedBy, p.ClaimedUntil = PitchSending, owner, &until
		return nil
	})
}

func holds(p *Pitch, owner string) error {
	if p.State != PitchSending || p.ClaimedBy != owner {
		return fmt.Errorf("pitch %s is no longer held by this sender (%s, held by %q): %w", p.ID, p.State, p.ClaimedBy, ErrNotDue)
	}
	return nil
}

func recipientOf(p *Pitch, contactID string) (*PitchRecipient, error) {
	for i := range p.Recipients {
		if p.Recipients[i].ContactID == contactID {
			return &p.Recipients[i], nil
		}
	}
	return nil, fmt.Errorf("pitch %s has no recipient %s", p.ID, contactID)
}

// RecordAttempt records, before the SMTP DATA command, that recipient
// contactID's message with messageID is about to go, and extends the
// lease. A second attempt (after a crash) counts up and is noted.
func (s *Store) RecordAttempt(ctx context.Context, id, owner, contactID, messageID string, lease time.Duration) (*Pitch, error) {
	return s.pitchWrite(ctx, id, true, func(p *Pitch) error {
		if err := holds(p, owner); err != nil {
			return err
		}
		r, err := recipientOf(p, contactID)
		if err != nil {
			return err
		}
		t := repo.Now()
		until := t.Add(lease)
		p.ClaimedUntil = &until
		if r.MessageID == "" {
			r.MessageID = messageID
		}
		r.State, r.AttemptedAt = RecipientSending, &t
		r.Attempts++
		if r.Attempts > 1 {
			r.Note = fmt.Sprintf("attempt %d: an earlier attempt was cut off after it began; if the Sent folder had no copy the message was sent again with the same Message-ID, so the recipient may have two copies", r.Attempts)
		}
		return nil
	})
}

// RecordRecipient records the outcome for recipient contactID: sent (a
// send change, not reversible), suppressed by a guard, or failed.
func (s *Store) RecordRecipient(ctx context.Context, id, owner, contactID, state, guard, reason, note string) (*Pitch, error) {
	if !slices.Contains([]string{RecipientSent, RecipientSuppressed, RecipientFailed}, state) {
		return nil, fmt.Errorf("recipient outcome %q", state)
	}
	return s.pitchWrite(ctx, id, true, func(p *Pitch) error {
		if err := holds(p, owner); err != nil {
			return err
		}
		r, err := recipientOf(p, contactID)
		if err != nil {
			return err
		}
		r.State, r.Guard, r.Reason = state, guard, reason
		if note != "" {
			r.Note = note
		}
		if state == RecipientSent {
			t := repo.Now()
			r.SentAt = &t
		}
		return nil
	})
}

// FinishPitch ends a send: sent when a recipient was sent, else failed with
// reason. A sent pitch moves its opportunity to pitched when it was before
// that stage (the approval's override_reason goes with it); a guard refusing
// that move is noted in the pitch, not an error.
func (s *Store) FinishPitch(ctx context.Context, id, owner, reason string) (*Pitch, error) {
	p, err := s.pitchWrite(ctx, id, true, func(p *Pitch) error {
		if err := holds(p, owner); err != nil {
			return err
		}
		sent := slices.ContainsFunc(p.Recipients, func(r PitchRecipient) bool { return r.State == RecipientSent })
		t := repo.Now()
		p.ClaimedBy, p.ClaimedUntil = "", nil
		if sent {
			p.State, p.SentAt, p.FailReason = PitchSent, &t, ""
		} else {
			if reason == "" {
				reason = "no recipient was sent the pitch (see each recipient's reason)"
			}
			p.State, p.FailReason = PitchFailed, reason
		}
		return nil
	})
	if err != nil || p.State != PitchSent {
		return p, err
	}
	o, err := pipeline.Of(s.Store).Opportunity(ctx, p.OpportunityID)
	if err != nil || o.Archived() || pipeline.PitchedOrLater(o.Stage) || o.Stage == pipeline.StageLost {
		return p, nil
	}
	mv := pipeline.StageMove{Stage: pipeline.StagePitched, Note: fmt.Sprintf("Pitch %q sent (pitch %s)", p.Subject, p.ID)}
	if p.Approval != nil {
		mv.OverrideReason = p.Approval.OverrideReason
	}
	if _, err := pipeline.Of(s.Store).ChangeStage(ctx, p.OpportunityID, mv); err != nil {
		note := "the pitch was sent, but opportunity " + p.OpportunityID + " was not moved to pitched: " + err.Error()
		if q, werr := s.pitchWrite(ctx, id, false, func(p *Pitch) error { p.StageNote = note; return nil }); werr == nil {
			p = q
		} else {
			s.Log.Warn().Err(err).Str("pitch", p.ID).Msg(note)
		}
	}
	return p, nil
}

// RecipientGuard checks the guards for recipient r of pitch p as things
// stand now: the contact (active, address unchanged), do-not-contact, the
// suppression list, an embargo on the opportunity or campaign, the
// double-pitch window (across pitches and stage history; the approval's
// override_reason lets it go) and the daily and per-domain caps. It returns
// the guard's name and its reason, or "" when the recipient may be sent.
func (s *Store) RecipientGuard(ctx context.Context, p *Pitch, r PitchRecipient) (guard, reason string, err error) {
	c, err := repo.Find[*directory.Contact](ctx, s.Store, repo.CollContacts, r.ContactID)
	if err != nil {
		return "contact", "the contact no longer exists", nil
	}
	if c.Archived() {
		return "contact", fmt.Sprintf("contact %s is archived", directory.ContactLabel(c)), nil
	}
	if !strings.EqualFold(strings.TrimSpace(c.Email), r.Email) {
		return "contact", fmt.Sprintf("contact %s's address changed since approval (now %q); draft the pitch again", directory.ContactLabel(c), c.Email), nil
	}
	if c.DoNotContact {
		return "do_not_contact", fmt.Sprintf("contact %s is marked do-not-contact (reason on record: %q)", directory.ContactLabel(c), c.DoNotContactReason), nil
	}
	if sup, err := s.Suppressed(ctx, r.Email); err != nil {
		return "", "", err
	} else if sup != nil {
		return "suppression", fmt.Sprintf("%s is on the suppression list (%s since %s)", r.Email, sup.Reason, sup.CreatedAt.Format(time.RFC3339)), nil
	}
	o, err := pipeline.Of(s.Store).Opportunity(ctx, p.OpportunityID)
	if err != nil {
		return "", "", err
	}
	v := s.View()
	if until, src, err := pipeline.EmbargoOf(ctx, v, o.ID, o.CampaignID); err != nil {
		return "", "", err
	} else if until.After(repo.Now()) {
		return "embargo", fmt.Sprintf("the %s is under embargo until %s; schedule the pitch after it", src, until.Format(time.RFC3339)), nil
	}
	override := p.Approval != nil && p.Approval.OverrideReason != ""
	if !override {
		if g, err := pipeline.DoublePitch(ctx, v, o.ID, &pipeline.Opportunity{ContactIDs: []string{r.ContactID}}); err != nil {
			return "", "", err
		} else if g != nil {
			return "double_pitch", g.Message, nil
		}
		if other, at, err := s.pitchedBy(ctx, p.ID, r.ContactID, repo.Now().Add(-pipeline.Of(s.Store).PitchWindow())); err != nil {
			return "", "", err
		} else if other != "" {
			return "double_pitch", fmt.Sprintf("contact %s was sent pitch %s on %s, within the %s double-pitch window; an approver may pass override_reason to approve_pitch to send anyway",
				directory.ContactLabel(c), other, at.Format(time.RFC3339), pipeline.WindowText(pipeline.Of(s.Store).PitchWindow())), nil
		}
	}
	total, domain, err := s.sentSince(ctx, repo.Now().Add(-24*time.Hour), domainOf(r.Email))
	if err != nil {
		return "", "", err
	}
	pol := s.PitchPolicy()
	if total >= pol.DailyCap {
		return "daily_cap", fmt.Sprintf("the team sent %d pitches in the last 24 hours, the daily cap (OUTREACH_PITCH_DAILY_CAP)", total), nil
	}
	if domain >= pol.DomainCap {
		return "domain_cap", fmt.Sprintf("the team sent %d pitches to %s in the last 24 hours, the per-domain cap (OUTREACH_PITCH_DOMAIN_CAP)", domain, domainOf(r.Email)), nil
	}
	return "", "", nil
}

func domainOf(email string) string {
	_, d, _ := strings.Cut(strings.ToLower(email), "@")
	return d
}

// pitchedBy finds another pitch sent to contactID since since.
func (s *Store) pitchedBy(ctx context.Context, pitchID, contactID string, since time.Time) (string, time.Time, error) {
	var ps []Pitch
	if err := s.FindAll(ctx, repo.CollPitches, bson.M{"recipients.contact_id": contactID}, nil, &ps); err != nil {
		return "", time.Time{}, err
	}
	for _, p := range ps {
		if p.ID == pitchID {
			continue
		}
		for _, r := range p.Recipients {
			if r.ContactID == contactID && r.SentAt != nil && !r.SentAt.Before(since) {
				return p.ID, *r.SentAt, nil
			}
		}
	}
	return "", time.Time{}, nil
}

// sentSince counts recipients sent since since, in total and to domain.
func (s *Store) sentSince(ctx context.Context, since time.Time, domain string) (int, int, error) {
	var ps []Pitch
	if err := s.FindAll(ctx, repo.CollPitches, bson.M{"state": bson.M{"$in": []string{PitchSending, PitchSent}}}, nil, &ps); err != nil {
		return 0, 0, err
	}
	total, dom := 0, 0
	for _, p := range ps {
		for _, r := range p.Recipients {
			if r.SentAt != nil && !r.SentAt.Before(since) {
				total++
				if domainOf(r.Email) == domain {
					dom++
				}
			}
		}
	}
	return total, dom, nil
}

// ---------------------------------------------------------------------------
// Replies: a message of the inbox answering a pitch's message (by
// In-Reply-To or References) marks its recipient replied, links the thread
// to the pitch's opportunity and, when the policy says so, moves an
// opportunity at pitched to responded (with its notification).

// pitchReply handles message in, stored as res, as a possible reply to a
// pitch. It is best effort after the message is stored: a failure is
// logged, and the message stays stored.
func (s *Store) pitchReply(ctx context.Context, in inbox.IncomingEmail, res inbox.IngestResult) {
	if res.Outcome != inbox.EmailStored {
		return
	}
	refs := []string{}
	for _, id := range append([]string{in.InReplyTo}, in.References...) {
		if id = strings.Trim(strings.TrimSpace(id), "<>"); id != "" && !slices.Contains(refs, id) {
			refs = append(refs, id)
		}
	}
	if len(refs) == 0 {
		return
	}
	var ps []Pitch
	if err := s.FindAll(ctx, repo.CollPitches, bson.M{"recipients.message_id": bson.M{"$in": refs}}, nil, &ps); err != nil {
		s.Log.Warn().Err(err).Msg("pitch reply: look up pitches")
		return
	}
	from := strings.ToLower(strings.TrimSpace(in.From))
	for _, p := range ps {
		var replied *PitchRecipient
		for i, r := range p.Recipients {
			if slices.Contains(refs, r.MessageID) && strings.EqualFold(r.Email, from) {
				replied = &p.Recipients[i]
			}
		}
		if replied == nil {
			continue // our own copy, or someone else answering: not the recipient's reply
		}
		at := in.Date
		contactID := replied.ContactID
		if _, err := s.pitchWrite(ctx, p.ID, false, func(p *Pitch) error {
			r, err := recipientOf(p, contactID)
			if err != nil {
				return err
			}
			if r.State == RecipientReplied {
				return nil
			}
			r.State, r.RepliedAt = RecipientReplied, &at
			return nil
		}); err != nil {
			s.Log.Warn().Err(err).Str("pitch", p.ID).Msg("pitch reply: mark the recipient replied")
			continue
		}
		if t, err := inbox.Of(s.Store).EmailThread(ctx, res.ThreadID); err == nil && !slices.ContainsFunc(t.OpportunityLinks, func(l inbox.EmailOpportunityLink) bool { return l.OpportunityID == p.OpportunityID }) {
			if _, _, err := inbox.Of(s.Store).LinkEmailOpportunity(ctx, res.ThreadID, p.OpportunityID); err != nil {
				s.Log.Warn().Err(err).Str("pitch", p.ID).Msg("pitch reply: link the thread")
			}
		}
		if !s.PitchPolicy().RespondedOnReply {
			continue
		}
		if o, err := pipeline.Of(s.Store).Opportunity(ctx, p.OpportunityID); err == nil && !o.Archived() && o.Stage == pipeline.StagePitched {
			if _, err := pipeline.Of(s.Store).ChangeStage(ctx, o.ID, pipeline.StageMove{Stage: "responded", Note: fmt.Sprintf("%s replied to pitch %q (pitch %s)", from, p.Subject, p.ID)}); err != nil {
				s.Log.Warn().Err(err).Str("pitch", p.ID).Msg("pitch reply: move the opportunity to responded")
			}
		}
	}
}

// pitchRule is the rule a rollback keeps for pitches: it never leaves a
// pitch approved, scheduled or sending, from where it would be sent (again):
// what was sent stays sent, and sending again takes a new approval.
func pitchRule(_ context.Context, _ *repo.RuleView, id string, state bson.M) error {
	switch st := repo.Str(state, "state"); st {
	case PitchApproved, PitchScheduled, PitchSending:
		if state["archived_at"] == nil {
			return repo.Violated("pitch_send", "the rollback would leave pitch %s %s, ready to be sent; a rollback never re-arms a send: roll back to the draft, or approve and send it again", id, st)
		}
	}
	return nil
}

func init() { repo.RegisterRule(repo.CollPitches, pitchRule) }

// PitchBounce records a delivery report for the recipient email of the
// pitch message msgID: the recipient is bounced with the status and the
// server's words, and a permanent failure (hard) puts the address on the
// suppression list. It reports whether a pitch's recipient was found.
func (s *Store) PitchBounce(ctx context.Context, msgID, email, status, diagnostic string, hard bool) (bool, error) {
	msgID = strings.Trim(strings.TrimSpace(msgID), "<>")
	email = strings.ToLower(strings.TrimSpace(email))
	var ps []Pitch
	if err := s.FindAll(ctx, repo.CollPitches, bson.M{"recipients.message_id": msgID}, nil, &ps); err != nil {
		return false, err
	}
	for _, p := range ps {
		i := slices.IndexFunc(p.Recipients, func(r PitchRecipient) bool {
			return r.MessageID == msgID && (email == "" || strings.EqualFold(r.Email, email))
		})
		if i < 0 {
			continue
		}
		r := p.Recipients[i]
		reason := strings.TrimSpace("delivery failed: " + status + " " + diagnostic)
		if !hard {
			reason = strings.TrimSpace("delivery delayed or failed for now: " + status + " " + diagnostic)
		}
		if _, err := s.pitchWrite(ctx, p.ID, false, func(p *Pitch) error {
			rr, err := recipientOf(p, r.ContactID)
			if err != nil {
				return err
			}
			if rr.State == RecipientBounced || (!hard && rr.State == RecipientReplied) {
				return nil
			}
			if hard {
				rr.State = RecipientBounced
			}
			rr.Reason = reason
			return nil
		}); err != nil {
			return true, err
		}
		if hard {
			if _, _, err := s.AddSuppression(ctx, r.Email, SuppressHardBounce, reason, p.ID); err != nil {
				return true, err
			}
		}
		return true, nil
	}
	return false, nil
}
