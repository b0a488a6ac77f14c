package tools

import (
	"context"
	"time"

	"outreach/repo"
	"outreach/repo/pitches"
)

// PitchSender sends a pitch that is due (package pitchsend).
type PitchSender interface {
	Deliver(ctx context.Context, id string) (*pitches.Pitch, error)
}

// WithPitchSender gives send_pitch the team mailbox's sender.
func WithPitchSender(p PitchSender) Option { return func(o *options) { o.pitches = p } }

// Pitches is the Pitches group: email pitches drafted by an agent,
// approved by a team member, sent from the team mailbox with the guards
// checked per recipient at the moment of sending; and the suppression list.
func Pitches(s *repo.Store, sender PitchSender) []Tool {
	type createIn struct {
		OpportunityID string   `json:"opportunity_id" jsonschema:"the opportunity pitched (UUID)"`
		ContactIDs    []string `json:"contact_ids" jsonschema:"the recipients: contacts of the opportunity with an email address (UUIDs); each gets a message of their own"`
		Subject       string   `json:"subject" max:"998" jsonschema:"the subject line; merge fields such as {{first_name}} are filled per recipient"`
		Body          string   `json:"body" max:"100000" jsonschema:"the plain-text body; merge fields {{first_name}}, {{last_name}}, {{name}}, {{email}} are filled per recipient"`
	}
	type idIn struct {
		ID string `json:"id" jsonschema:"the pitch's id (UUID)"`
	}
	type updateIn struct {
		ID         string    `json:"id" jsonschema:"the pitch's id (UUID)"`
		Subject    *string   `json:"subject,omitempty" max:"998" jsonschema:"new subject"`
		Body       *string   `json:"body,omitempty" max:"100000" jsonschema:"new body"`
		ContactIDs *[]string `json:"contact_ids,omitempty" jsonschema:"the complete new list of recipients (UUIDs)"`
	}
	type listIn struct {
		OpportunityID   string `json:"opportunity_id,omitempty" jsonschema:"only pitches of this opportunity (UUID)"`
		ContactID       string `json:"contact_id,omitempty" jsonschema:"only pitches to this contact (UUID)"`
		State           string `json:"state,omitempty" enum:"draft,approved,scheduled,sending,sent,failed,cancelled" jsonschema:"only pitches in this state"`
		IncludeArchived bool   `json:"include_archived,omitempty" jsonschema:"include archived pitches; default false"`
		Limit           *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum pitches; default 50"`
		Offset          *int   `json:"offset,omitempty" min:"0" jsonschema:"pitches to skip; default 0"`
	}
	type approveIn struct {
		ID             string `json:"id" jsonschema:"the pitch's id (UUID)"`
		ContentHash    string `json:"content_hash,omitempty" jsonschema:"the content_hash you reviewed (from get_pitch); refused with conflict when the pitch changed since"`
		OverrideReason string `json:"override_reason,omitempty" max:"2000" jsonschema:"why to send to contacts the team pitched within the double-pitch window; kept in the approval"`
		Confirm        bool   `json:"confirm,omitempty" jsonschema:"true when the user already agreed to this step: no confirmation is asked"`
	}
	type sendIn struct {
		ID          string `json:"id" jsonschema:"the pitch's id (UUID)"`
		ScheduledAt string `json:"scheduled_at,omitempty" jsonschema:"when to send: an RFC 3339 time with its zone offset (2026-12-01T09:00:00-05:00), or a local time (2026-12-01T09:00) in the recipients' time zone (their contacts' timezone, one for all); default now"`
		Confirm     bool   `json:"confirm,omitempty" jsonschema:"true when the user already agreed to this step: no confirmation is asked"`
	}
	type supIn struct {
		Email string `json:"email" jsonschema:"the email address"`
		Note  string `json:"note,omitempty" max:"2000" jsonschema:"why (kept with the entry)"`
	}
	type supOutIn struct {
		Email string `json:"email" jsonschema:"the email address"`
	}
	type supListIn struct {
		Reason string `json:"reason,omitempty" enum:"hard_bounce,unsubscribe,manual" jsonschema:"only entries with this reason"`
		Limit  *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum entries; default 50"`
		Offset *int   `json:"offset,omitempty" min:"0" jsonschema:"entries to skip; default 0"`
	}
	return []Tool{
		newTool("create_pitch", "Draft an email pitch of an opportunity to one or more of its contacts, from the team mailbox. Subject and body may hold merge fields ({{first_name}}, {{last_name}}, {{name}}, {{email}}), filled per recipient. The draft is sent only after approve_pitch by another team member and send_pitch.", create,
			func(ctx context.Context, in *createIn) (any, error) {
				if err := checkUUID("opportunity_id", in.OpportunityID); err != nil {
					return nil, err
				}
				if err := checkUUIDs("contact_ids", in.ContactIDs); err != nil {
					return nil, err
				}
				return pitches.Of(s).CreatePitch(ctx, pitches.PitchInput{OpportunityID: in.OpportunityID, ContactIDs: in.ContactIDs, Subject: in.Subject, Body: in.Body})
			}),
		newTool("get_pitch", "One pitch: its state, content hash, approval (who, when, which content), schedule and each recipient's state (pending, sending, sent, bounced, replied, suppressed with the guard and reason, failed) with the Message-ID sent.", read,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return pitches.Of(s).Pitch(ctx, in.ID)
			}),
		newTool("list_pitches", "List pitches, newest first, by opportunity, recipient contact and state.", read,
			func(ctx context.Context, in *listIn) (any, error) {
				limit, offset, err := page(in.Limit, in.Offset, defaultLimit)
				if err != nil {
					return nil, err
				}
				if err := optUUID("opportunity_id", in.OpportunityID); err != nil {
					return nil, err
				}
				if err := optUUID("contact_id", in.ContactID); err != nil {
					return nil, err
				}
				if err := checkOptEnums(optEnum{"state", in.State, pitches.PitchStates}); err != nil {
					return nil, err
				}
				p, err := pitches.Of(s).ListPitches(ctx, pitches.PitchFilter{OpportunityID: in.OpportunityID, ContactID: in.ContactID, State: in.State, IncludeArchived: in.IncludeArchived}, limit, offset)
				if err != nil {
					return nil, err
				}
				return envelope("pitches", p, limit, offset), nil
			}),
		newTool("update_pitch", "Change a draft, approved or scheduled pitch's subject, body or recipients; only the fields given change. A change of what is sent voids the approval (kept in voided_approvals) and returns the pitch to draft.", change,
			func(ctx context.Context, in *updateIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				if in.ContactIDs != nil {
					if err := checkUUIDs("contact_ids", *in.ContactIDs); err != nil {
						return nil, err
					}
				}
				return pitches.Of(s).UpdatePitch(ctx, in.ID, pitches.PitchPatch{Subject: in.Subject, Body: in.Body, ContactIDs: in.ContactIDs})
			}),
		newTool("approve_pitch", "Approve a draft pitch for sending. Needs a key with the scope the operator's policy names (admin by default) and a different agent and key than the one that drafted it. The approval records who, when and the content hash approved; an edit voids it. override_reason lets it go to contacts the team pitched within the double-pitch window.", change,
			func(ctx context.Context, in *approveIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return pitches.Of(s).ApprovePitch(ctx, in.ID, in.ContentHash, in.OverrideReason)
			}),
		newTool("send_pitch", "Send an approved pitch from the team mailbox, now or at scheduled_at (the delivery worker sends it when due). Just before each recipient's SMTP transaction the guards are checked again: do-not-contact, the suppression list, an embargo on the opportunity or campaign, the double-pitch window and the daily and per-domain caps; a refused recipient is suppressed with the reason, the others go. A send cannot be rolled back. A sent pitch moves its opportunity to pitched.", send,
			func(ctx context.Context, in *sendIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				at, zone, err := pitches.Of(s).PitchSchedule(ctx, in.ID, in.ScheduledAt)
				if err != nil {
					return nil, err
				}
				if sender == nil {
					return nil, repo.Errorf(repo.CodeFailedPrecondition, "no outgoing mail server is configured (OUTREACH_SMTP_ADDR); pitches can be drafted and approved but not sent")
				}
				ready := func() (bool, string) {
					if r, ok := sender.(interface {
						Ready(context.Context) (bool, string)
					}); ok {
						return r.Ready(ctx)
					}
					return true, ""
				}
				if at == nil || !at.After(time.Now()) {
					// Sent now through a mailbox that is not connected: refused
					// before anything is written (a pitch scheduled for later
					// waits for the connection instead).
					if ok, why := ready(); !ok {
						return nil, repo.Errorf(repo.CodeFailedPrecondition, "the team mailbox is not connected (%s): nothing was sent or scheduled; an admin connects it again (outreach mailbox connect), or give scheduled_at: a scheduled pitch waits for the connection", why)
					}
				}
				p, err := pitches.Of(s).SchedulePitch(ctx, in.ID, at, zone)
				if err != nil || p.ScheduledAt.After(time.Now()) {
					return p, err
				}
				if ok, _ := ready(); !ok && at != nil {
					// Its time came while it was being scheduled: it is
					// scheduled, and waits for the connection as any other.
					return p, nil
				}
				return sender.Deliver(ctx, in.ID)
			}),
		newTool("cancel_pitch", "Cancel a draft, approved or scheduled pitch; nothing is sent.", change,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return pitches.Of(s).CancelPitch(ctx, in.ID)
			}),
		newTool("archive_pitch", "Archive a pitch that is not scheduled or sending (soft delete).", change,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return pitches.Of(s).ArchivePitch(ctx, in.ID)
			}),
		newTool("add_suppression", "Put an address on the suppression list by hand: no pitch is sent to it. Hard bounces and unsubscribe links add addresses themselves.", change,
			func(ctx context.Context, in *supIn) (any, error) {
				sup, added, err := pitches.Of(s).AddSuppression(ctx, in.Email, pitches.SuppressManual, in.Note, "")
				if err != nil {
					return nil, err
				}
				if !added {
					return nil, &repo.Error{Code: repo.CodeFailedPrecondition, Field: "email", Message: "email: " + sup.Email + " is already on the suppression list (" + sup.Reason + ")"}
				}
				return sup, nil
			}),
		newTool("remove_suppression", "Take an address off the suppression list (for example after the journalist asked to be pitched again). Needs the admin scope.", change,
			func(ctx context.Context, in *supOutIn) (any, error) {
				return pitches.Of(s).RemoveSuppression(ctx, in.Email)
			}),
		newTool("list_suppressions", "List the suppression list, newest first: address, reason (hard_bounce, unsubscribe, manual), note and the pitch that caused it.", read,
			func(ctx context.Context, in *supListIn) (any, error) {
				limit, offset, err := page(in.Limit, in.Offset, defaultLimit)
				if err != nil {
					return nil, err
				}
				if err := checkOptEnums(optEnum{"reason", in.Reason, pitches.SuppressionReasons}); err != nil {
					return nil, err
				}
				p, err := pitches.Of(s).ListSuppressions(ctx, in.Reason, limit, offset)
				if err != nil {
					return nil, err
				}
				return envelope("suppressions", p, limit, offset), nil
			}),
	}
}
