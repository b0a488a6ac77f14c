package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/repo"
	"outreach/repo/directory"
)

// The pipeline's guards: what a PR team relies on the server to stop.
//
//   - do-not-contact: a contact marked do_not_contact is never on an
//     opportunity at pitched or later (added to one, or one moved there),
//     and only a key with the admin scope clears the flag;
//   - double pitch: an opportunity does not move to pitched with a contact
//     the team pitched (another opportunity's stage history) within the
//     pitch window, unless the move carries an override_reason, which the
//     stage history keeps;
//   - embargo: coverage of an opportunity or campaign under embargo is not
//     published before embargo_until.
//
// Each guard is one function over a ruleView, called by the tools on the
// state they are about to write (the view is the store as it is) and by
// the state rules a rollback checks (the view with the rollback's pending
// states), so a rollback cannot bring back a state a guard forbids. The
// guards look at transitions (the stored state against the proposed one):
// marking a contact do-not-contact while they are on a pitched opportunity
// is allowed (it is how a team records the request), and the opportunity
// may still be edited; what is refused is pitching them again.

// StagePitched is the stage the double-pitch guard watches.
const StagePitched = "pitched"

// PitchedOrLater reports whether stage is pitched or a later open stage,
// or won: the stages at which the team has been in touch.
func PitchedOrLater(stage string) bool {
	return stage != StageLost && slices.Index(Stages, stage) >= slices.Index(Stages, StagePitched)
}

// opportunityGuards checks the proposed state o of opportunity id against
// its stored state was (nil for a new one): the do-not-contact guard, then
// the double-pitch guard. It returns nil when both hold.
func opportunityGuards(ctx context.Context, v *repo.RuleView, id string, was, o *Opportunity) (*repo.GuardError, error) {
	if o.Archived() || !PitchedOrLater(o.Stage) {
		return nil, nil
	}
	entering := was == nil || was.Archived() || !PitchedOrLater(was.Stage)
	for _, cid := range o.ContactIDs {
		if !entering && slices.Contains(was.ContactIDs, cid) {
			continue
		}
		st, err := v.Record(ctx, repo.CollContacts, cid)
		if err != nil || st == nil {
			return nil, err
		}
		c, err := repo.DecodeState[directory.Contact](cid, st)
		if err != nil {
			return nil, err
		}
		if c.DoNotContact {
			what := fmt.Sprintf("cannot be added to opportunity %s, which is %s", id, o.Stage)
			field := "contact_id"
			if entering {
				what = fmt.Sprintf("is on opportunity %s, which therefore cannot move to %s", id, o.Stage)
				field = "stage"
			}
			return &repo.GuardError{Rule: "do_not_contact", Field: field, Message: fmt.Sprintf(
				"contact %s is marked do-not-contact (reason on record: %q) and %s; remove the contact from the opportunity (remove_opportunity_contact) or, if they agreed to be contacted again, an admin clears do_not_contact with update_contact",
				directory.ContactLabel(c), c.DoNotContactReason, what)}, nil
		}
	}
	// Restoring an archived pitched opportunity is not a new pitch.
	if o.Stage != StagePitched || (was != nil && was.Stage == StagePitched) {
		return nil, nil
	}
	if n := len(o.StageHistory); n > 0 && o.StageHistory[n-1].Stage == StagePitched && o.StageHistory[n-1].OverrideReason != "" {
		return nil, nil
	}
	return DoublePitch(ctx, v, id, o)
}

// DoublePitch finds, for each contact of o, the latest pitch of that
// contact by another active opportunity within the pitch window.
func DoublePitch(ctx context.Context, v *repo.RuleView, id string, o *Opportunity) (*repo.GuardError, error) {
	window := v.Store().PitchWindow()
	since := repo.Now().Add(-window)
	for _, cid := range o.ContactIDs {
		others, err := v.Matching(ctx, repo.CollOpportunities, bson.M{"contact_ids": cid}, func(st bson.M) bool {
			return repo.Str(st, "_id") != id && st["archived_at"] == nil
		})
		if err != nil {
			return nil, err
		}
		var (
			best   *Opportunity
			bestAt time.Time
		)
		for _, st := range others {
			other, err := repo.DecodeState[Opportunity](repo.Str(st, "_id"), st)
			if err != nil {
				return nil, err
			}
			if !slices.Contains(other.ContactIDs, cid) {
				continue
			}
			for _, h := range other.StageHistory {
				if h.Stage == StagePitched && !h.At.Before(since) && h.At.After(bestAt) {
					best, bestAt = other, h.At
				}
			}
		}
		if best == nil {
			continue
		}
		who := cid
		if st, err := v.Record(ctx, repo.CollContacts, cid); err == nil && st != nil {
			if c, err := repo.DecodeState[directory.Contact](cid, st); err == nil {
				who = directory.ContactLabel(c)
			}
		}
		owner, err := ownerLabel(ctx, v, best)
		if err != nil {
			return nil, err
		}
		return &repo.GuardError{Rule: "double_pitch", Field: "override_reason", Message: fmt.Sprintf(
			"contact %s was already pitched by the team on %s in opportunity %s (%q, owner: %s), within the %s double-pitch window; coordinate with the owner, or pass override_reason to pitch anyway (it is kept in the stage history)",
			who, bestAt.UTC().Format(time.RFC3339), best.ID, best.Title, owner, WindowText(window))}, nil
	}
	return nil, nil
}

func WindowText(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d-day", d/(24*time.Hour))
	}
	return d.String()
}

// ownerLabel names the owner of o: its owner_id, or else whoever moved it
// to pitched last, as "Name (user id)".
func ownerLabel(ctx context.Context, v *repo.RuleView, o *Opportunity) (string, error) {
	uid := o.OwnerID
	suffix := ""
	if uid == "" {
		for i := len(o.StageHistory) - 1; i >= 0; i-- {
			if o.StageHistory[i].Stage == StagePitched {
				uid, suffix = o.StageHistory[i].By.UserID, ", who pitched it; no owner set"
				break
			}
		}
	}
	if uid == "" {
		return "none set", nil
	}
	st, err := v.Record(ctx, repo.CollUsers, uid)
	if err != nil {
		return "", err
	}
	if st == nil {
		return uid + suffix, nil
	}
	return fmt.Sprintf("%s (%s%s)", repo.Str(st, "name"), uid, suffix), nil
}

// EmbargoOf returns the embargo in force on coverage placed in opportunity
// oppID and campaign campaignID: the later of the two embargoes, and which
// record sets it.
func EmbargoOf(ctx context.Context, v *repo.RuleView, oppID, campaignID string) (time.Time, string, error) {
	var until time.Time
	src := ""
	for _, r := range []struct{ coll, id string }{{repo.CollOpportunities, oppID}, {repo.CollCampaigns, campaignID}} {
		if r.id == "" {
			continue
		}
		st, err := v.Record(ctx, r.coll, r.id)
		if err != nil {
			return time.Time{}, "", err
		}
		if st == nil {
			continue
		}
		if t, ok := dateOf(st["embargo_until"]); ok && t.After(until) {
			until, src = t, fmt.Sprintf("%s %s", repo.KindOf(r.coll), r.id)
		}
	}
	return until, src, nil
}

func dateOf(v any) (time.Time, bool) {
	switch t := v.(type) {
	case bson.DateTime:
		return t.Time().UTC(), true
	case time.Time:
		return t.UTC(), true
	case *time.Time:
		if t != nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// coverageEmbargo checks that active coverage c is not published before
// the embargo of its opportunity or campaign.
func coverageEmbargo(ctx context.Context, v *repo.RuleView, c *Coverage) (*repo.GuardError, error) {
	if c.Archived() {
		return nil, nil
	}
	until, src, err := EmbargoOf(ctx, v, c.OpportunityID, c.CampaignID)
	if err != nil || until.IsZero() || !c.PublishedAt.Before(until) {
		return nil, err
	}
	return &repo.GuardError{Rule: "embargo", Field: "published_at", Message: fmt.Sprintf(
		"coverage %q would be published at %s, before the embargo of %s lifts at %s; coverage cannot be recorded as published before the embargo: give a published_at at or after it, or change embargo_until on the %s",
		c.Title, c.PublishedAt.UTC().Format(time.RFC3339), src, until.Format(time.RFC3339), strings.Fields(src)[0])}, nil
}

// embargoCoverage checks, for an opportunity or campaign (field names the
// link in coverage) whose embargo is until, that none of its active
// coverage was published before it.
func embargoCoverage(ctx context.Context, v *repo.RuleView, field, id string, until *time.Time) (*repo.GuardError, error) {
	if until == nil {
		return nil, nil
	}
	early, err := v.Matching(ctx, repo.CollCoverage, bson.M{field: id, "archived_at": nil}, func(st bson.M) bool {
		t, ok := dateOf(st["published_at"])
		return repo.Str(st, field) == id && st["archived_at"] == nil && ok && t.Before(*until)
	})
	if err != nil || len(early) == 0 {
		return nil, err
	}
	t, _ := dateOf(early[0]["published_at"])
	return &repo.GuardError{Rule: "embargo", Field: "embargo_until", Message: fmt.Sprintf(
		"coverage %s (%q) was published at %s, before the embargo_until %s; an embargo cannot start after coverage it covers was published: correct that coverage's published_at first, or choose an earlier embargo_until",
		repo.Str(early[0], "_id"), repo.Str(early[0], "title"), t.Format(time.RFC3339), until.UTC().Format(time.RFC3339))}, nil
}

// Embargo is an embargo as given: the instant, and the zone offset it was
// given in, kept for display.
type Embargo struct {
	Until time.Time
	Zone  string
}

// ParseEmbargo reads an RFC 3339 time with a zone offset ("Z" or ±hh:mm);
// "" clears. field names the argument in errors.
func ParseEmbargo(field, s string) (*Embargo, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, repo.Invalid(field, "%q is not an RFC 3339 time with a time zone; give e.g. 2026-12-01T09:00:00+01:00 or 2026-12-01T08:00:00Z", s)
	}
	zone := t.Format("Z07:00")
	return &Embargo{Until: t.UTC().Truncate(time.Millisecond), Zone: zone}, nil
}

// EmbargoLocal shows an embargo in the zone it was given in.
func EmbargoLocal(until *time.Time, zone string) string {
	if until == nil {
		return ""
	}
	loc := time.UTC
	if zone != "" && zone != "Z" {
		if t, err := time.Parse("Z07:00", zone); err == nil {
			loc = t.Location()
		}
	}
	return until.In(loc).Format(time.RFC3339)
}

// embargoFields are the stored fields of e (nil clears).
func embargoFields(e *Embargo) (*time.Time, string) {
	if e == nil {
		return nil, ""
	}
	t := e.Until
	return &t, e.Zone
}
