package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger"
	"outreach/repo"
	"outreach/repo/directory"
	"outreach/repo/outbox"
	"outreach/repo/textlist"
)

// Stages of an opportunity, in pipeline order; won and lost are terminal.
const (
	StageResearching = "researching"
	StageWon         = "won"
	StageLost        = "lost"
)

// Stages are the allowed opportunity stages.
var Stages = []string{StageResearching, "drafting", "pitched", "responded", "in_progress", "placed", "published", StageWon, StageLost}

// Priorities are the allowed opportunity priorities.
var Priorities = []string{"high", "medium", "low"}

// OpportunityTypes are the allowed opportunity types.
var OpportunityTypes = []string{"pitch", "interview", "podcast_guest", "speaking", "contributed_article", "award_entry", "event", "other"}

// Terminal reports whether stage is won or lost.
func Terminal(stage string) bool { return stage == StageWon || stage == StageLost }

// Opportunity is the core pipeline record: a pitch or placement and its
// lifecycle.
type Opportunity struct {
	repo.Meta       `bson:",inline"`
	Title           string        `bson:"title" json:"title"`
	Description     string        `bson:"description,omitempty" json:"description,omitempty"`
	CampaignID      string        `bson:"campaign_id" json:"campaign_id"`
	OutletID        string        `bson:"outlet_id,omitempty" json:"outlet_id,omitempty"`
	ChannelID       string        `bson:"channel_id,omitempty" json:"channel_id,omitempty"`
	Stage           string        `bson:"stage" json:"stage"`
	Priority        string        `bson:"priority" json:"priority"`
	Type            string        `bson:"type,omitempty" json:"type,omitempty"`
	TargetDate      *time.Time    `bson:"target_date,omitempty" json:"target_date,omitempty"`
	NextAction      string        `bson:"next_action,omitempty" json:"next_action,omitempty"`
	NextActionDate  *time.Time    `bson:"next_action_date,omitempty" json:"next_action_date,omitempty"`
	NextActionOwner string        `bson:"next_action_owner,omitempty" json:"next_action_owner,omitempty"`
	ContactIDs      []string      `bson:"contact_ids" json:"contact_ids"`
	LostReason      string        `bson:"lost_reason,omitempty" json:"lost_reason,omitempty"`
	StageHistory    []StageChange `bson:"stage_history" json:"stage_history"`
	// OwnerID is the team member (a user id) who owns the opportunity.
	OwnerID string `bson:"owner_id,omitempty" json:"owner_id,omitempty"`
	// EmbargoUntil is when the material of the opportunity may be published
	// (UTC); EmbargoZone the offset it was given in, for display.
	EmbargoUntil *time.Time `bson:"embargo_until,omitempty" json:"embargo_until,omitempty"`
	EmbargoZone  string     `bson:"embargo_zone,omitempty" json:"embargo_zone,omitempty"`
}

// StageChange is one entry of an opportunity's stage history: the stage
// entered, when, and by whom.
type StageChange struct {
	Stage string    `bson:"stage" json:"stage"`
	At    time.Time `bson:"at" json:"at"`
	By    StageBy   `bson:"by" json:"by"`
	// LostReason is kept here too, so reopening (which clears the
	// opportunity's lost_reason) does not lose why it was lost.
	LostReason string `bson:"lost_reason,omitempty" json:"lost_reason,omitempty"`
	// NoteID is the note stored with the change, if any.
	NoteID string `bson:"note_id,omitempty" json:"note_id,omitempty"`
	// OverrideReason is why a move to pitched went ahead although the
	// double-pitch guard refused it.
	OverrideReason string `bson:"override_reason,omitempty" json:"override_reason,omitempty"`
}

// StageBy is who made a stage change: the same attribution as the change log.
type StageBy struct {
	UserID    string `bson:"user_id" json:"user_id"`
	AgentID   string `bson:"agent_id" json:"agent_id"`
	SessionID string `bson:"session_id" json:"session_id"`
}

func stageChange(ctx context.Context, stage, lostReason, noteID string) StageChange {
	a, _ := audit.ActorFrom(ctx)
	return StageChange{Stage: stage, At: repo.Now(), By: StageBy{UserID: a.UserID, AgentID: a.AgentID, SessionID: a.SessionID},
		LostReason: lostReason, NoteID: noteID}
}

func OneOf(field, v string, allowed []string) error {
	if !slices.Contains(allowed, v) {
		return repo.Invalid(field, "%q is not allowed; use one of: %s", v, strings.Join(allowed, ", "))
	}
	return nil
}

// UniqueIDs returns ids without repeats, in first-seen order, never nil.
func UniqueIDs(ids []string) []string {
	out := []string{}
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// place resolves the outlet and channel of a record after a change. cur are
// the stored values; outlet and channel the given ones (nil: not given, ""
// clears). A channel given without an outlet brings its own outlet; in every
// case the channel must belong to the outlet.
func (s *Store) place(ctx context.Context, curOutlet, curChannel string, outlet, channel *string) (string, string, error) {
	newOutlet, newChannel := curOutlet, curChannel
	if outlet != nil {
		newOutlet = *outlet
	}
	if channel != nil {
		newChannel = *channel
	}
	if newChannel == "" {
		return newOutlet, "", nil
	}
	var ch struct {
		OutletID string `bson:"outlet_id"`
	}
	if err := s.Collection(repo.CollChannels).FindOne(ctx, bson.M{"_id": newChannel}, options.FindOne().SetProjection(bson.M{"outlet_id": 1})).Decode(&ch); err != nil {
		return "", "", ledger.DriverErr(err, "channel", newChannel)
	}
	if channel != nil && outlet == nil {
		newOutlet = ch.OutletID
	}
	if newOutlet != ch.OutletID {
		return "", "", repo.Invalid("channel_id", "%s", directory.ChannelOutletError(newChannel, ch.OutletID, newOutlet))
	}
	return newOutlet, newChannel, nil
}

// OpportunityPatch is a change to an opportunity: nil fields are left as
// they are; an empty string or a nil date clears an optional field. The
// stage is changed only by ChangeStage.
type OpportunityPatch struct {
	Title, Description, CampaignID, OutletID, ChannelID *string
	Priority, Type, NextAction, NextActionOwner         *string
	LostReason                                          *string
	TargetDate, NextActionDate                          **time.Time
	ContactIDs                                          *[]string
	// OwnerID sets the owner (a user id; "" clears).
	OwnerID *string
	// Embargo, when given, sets (or, nil, clears) the embargo.
	Embargo **Embargo
}

// CreateOpportunity creates an opportunity: campaign_id defaults to the
// General campaign, stage to researching, priority to medium. Every linked
// record must exist and be active. The guards hold for a new opportunity
// too.
func (s *Store) CreateOpportunity(ctx context.Context, o *Opportunity) (*Opportunity, error) {
	return s.CreatePitchedOpportunity(ctx, o, "")
}

// CreatePitchedOpportunity is CreateOpportunity with the override_reason of
// a double pitch, for an opportunity created at stage pitched.
func (s *Store) CreatePitchedOpportunity(ctx context.Context, o *Opportunity, override string) (*Opportunity, error) {
	if strings.TrimSpace(override) != "" && o.Stage != StagePitched {
		return nil, repo.Invalid("override_reason", "is only taken with stage pitched (not %q): it overrides the double-pitch guard", o.Stage)
	}
	o.Title = strings.TrimSpace(o.Title)
	if o.Title == "" {
		return nil, repo.Invalid("title", "must not be empty")
	}
	if o.Stage == "" {
		o.Stage = StageResearching
	}
	if o.Priority == "" {
		o.Priority = "medium"
	}
	if err := checkOpportunity(o); err != nil {
		return nil, err
	}
	if err := s.checkLinks(ctx, OpportunityPatch{CampaignID: strp(o.CampaignID), OutletID: strp(o.OutletID), ChannelID: strp(o.ChannelID), ContactIDs: &o.ContactIDs}); err != nil {
		return nil, err
	}
	if o.CampaignID == "" {
		id, err := s.generalID(ctx)
		if err != nil {
			return nil, err
		}
		o.CampaignID = id
	}
	var err error
	if o.OutletID, o.ChannelID, err = s.place(ctx, "", "", nilIfEmpty(o.OutletID), nilIfEmpty(o.ChannelID)); err != nil {
		return nil, err
	}
	o.ContactIDs = UniqueIDs(o.ContactIDs)
	if err := s.MustExist(ctx, repo.CollUsers, "owner_id", repo.NonEmpty(o.OwnerID)...); err != nil {
		return nil, err
	}
	o.Meta = repo.Meta{}
	first := stageChange(ctx, o.Stage, o.LostReason, "")
	first.OverrideReason = strings.TrimSpace(override)
	o.StageHistory = []StageChange{first}
	if g, err := opportunityGuards(ctx, s.View(), "(new)", nil, o); err != nil || g != nil {
		if err != nil {
			return nil, err
		}
		return nil, g.ToolError()
	}
	if err := repo.Insert(ctx, s.Store, repo.CollOpportunities, o); err != nil {
		return nil, err
	}
	return o, nil
}

func strp(s string) *string { return &s }

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// checkOpportunity checks the fields that need no lookup.
func checkOpportunity(o *Opportunity) error {
	if strings.TrimSpace(o.Title) == "" {
		return repo.Invalid("title", "must not be empty")
	}
	if err := OneOf("stage", o.Stage, Stages); err != nil {
		return err
	}
	if err := OneOf("priority", o.Priority, Priorities); err != nil {
		return err
	}
	if o.Type != "" {
		if err := OneOf("type", o.Type, OpportunityTypes); err != nil {
			return err
		}
	}
	o.LostReason = strings.TrimSpace(o.LostReason)
	if o.Stage == StageLost && o.LostReason == "" {
		return repo.Invalid("lost_reason", "is required when the stage is lost: say why it was lost")
	}
	if o.Stage != StageLost && o.LostReason != "" {
		return repo.Invalid("lost_reason", "only a lost opportunity has a lost_reason (the stage is %s)", o.Stage)
	}
	return nil
}

// checkLinks checks that every id given in p names an active record.
func (s *Store) checkLinks(ctx context.Context, p OpportunityPatch) error {
	return s.CheckRefs(ctx, []repo.Ref{{Coll: repo.CollCampaigns, Field: "campaign_id", ID: p.CampaignID}, {Coll: repo.CollOutlets, Field: "outlet_id", ID: p.OutletID},
		{Coll: repo.CollChannels, Field: "channel_id", ID: p.ChannelID}}, p.ContactIDs)
}

// Opportunity returns an opportunity.
func (s *Store) Opportunity(ctx context.Context, id string) (*Opportunity, error) {
	return repo.Find[*Opportunity](ctx, s.Store, repo.CollOpportunities, id)
}

func activeOpportunity(o *Opportunity) error {
	if o.Archived() {
		return repo.Errorf(repo.CodeFailedPrecondition, "opportunity %s is archived; restore it before changing it", o.ID)
	}
	return nil
}

// UpdateOpportunity applies p. When the campaign changes, the opportunity's
// coverage follows it in the same write, so coverage.campaign_id stays true.
func (s *Store) UpdateOpportunity(ctx context.Context, id string, p OpportunityPatch) (*Opportunity, error) {
	if p.CampaignID != nil && *p.CampaignID == "" {
		return nil, repo.Invalid("campaign_id", "cannot be cleared; every opportunity is in a campaign (give the General campaign's id to move it there)")
	}
	if p.Title != nil && strings.TrimSpace(*p.Title) == "" {
		return nil, repo.Invalid("title", "must not be empty")
	}
	if err := s.checkLinks(ctx, p); err != nil {
		return nil, err
	}
	if p.OwnerID != nil {
		if err := s.MustExist(ctx, repo.CollUsers, "owner_id", repo.NonEmpty(*p.OwnerID)...); err != nil {
			return nil, err
		}
	}
	var out *Opportunity
	err := s.WriteGroup(ctx, func() ([]repo.Mutation, error) {
		o, m, err := repo.Prepare(ctx, s.Store, repo.CollOpportunities, id, audit.ActionUpdate, func(o *Opportunity) error {
			if err := activeOpportunity(o); err != nil {
				return err
			}
			was := snapshot(o)
			set(&o.OwnerID, p.OwnerID)
			if p.Embargo != nil {
				o.EmbargoUntil, o.EmbargoZone = embargoFields(*p.Embargo)
				g, err := embargoCoverage(ctx, s.View(), "opportunity_id", id, o.EmbargoUntil)
				if err != nil {
					return err
				}
				if g != nil {
					return g.ToolError()
				}
			}
			if p.Title != nil {
				o.Title = strings.TrimSpace(*p.Title)
			}
			set(&o.Description, p.Description)
			set(&o.CampaignID, p.CampaignID)
			set(&o.Priority, p.Priority)
			set(&o.Type, p.Type)
			set(&o.NextAction, p.NextAction)
			set(&o.NextActionOwner, p.NextActionOwner)
			set(&o.TargetDate, p.TargetDate)
			set(&o.NextActionDate, p.NextActionDate)
			if p.LostReason != nil && o.Stage != StageLost {
				return &repo.Error{Code: repo.CodeFailedPrecondition, Field: "lost_reason", Message: fmt.Sprintf("lost_reason: opportunity %s is %s, not lost; move it with update_opportunity_stage (stage lost, lost_reason)", id, o.Stage)}
			}
			set(&o.LostReason, p.LostReason)
			if p.ContactIDs != nil {
				o.ContactIDs = UniqueIDs(*p.ContactIDs)
			}
			if o.ContactIDs == nil {
				o.ContactIDs = []string{}
			}
			var err error
			if o.OutletID, o.ChannelID, err = s.place(ctx, o.OutletID, o.ChannelID, p.OutletID, p.ChannelID); err != nil {
				return err
			}
			if err := checkOpportunity(o); err != nil {
				return err
			}
			return s.guard(ctx, id, was, o)
		})
		if err != nil {
			return nil, err
		}
		out = o
		if m == nil {
			return nil, nil
		}
		muts := []repo.Mutation{*m}
		if m.Before["campaign_id"] != o.CampaignID {
			cm, err := s.coverageFollows(ctx, id, o.CampaignID)
			if err != nil {
				return nil, err
			}
			muts = append(muts, cm...)
		}
		return muts, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// coverageFollows returns the mutations that move the coverage of
// opportunity oppID (archived coverage too) to campaignID.
func (s *Store) coverageFollows(ctx context.Context, oppID, campaignID string) ([]repo.Mutation, error) {
	var ids []struct {
		ID string `bson:"_id"`
	}
	if err := s.FindProjected(ctx, repo.CollCoverage, bson.M{"opportunity_id": oppID}, bson.M{"_id": 1}, &ids); err != nil {
		return nil, err
	}
	var muts []repo.Mutation
	for _, c := range ids {
		_, m, err := repo.Prepare(ctx, s.Store, repo.CollCoverage, c.ID, audit.ActionUpdate, func(c *Coverage) error {
			c.CampaignID = campaignID
			return nil
		})
		if err != nil {
			return nil, err
		}
		if m != nil {
			muts = append(muts, *m)
		}
	}
	return muts, nil
}

// StageMove asks for a stage change.
type StageMove struct {
	Stage      string
	LostReason string
	// Reopen must be true to leave won or lost.
	Reopen bool
	// Note, when not empty, is stored as a note linked to the opportunity.
	Note string
	// OverrideReason lets a move to pitched go ahead past the double-pitch
	// guard; the stage history keeps it.
	OverrideReason string
}

// ChangeStage moves an opportunity to another stage and appends the move to
// its stage history. Moving between open stages is free in either
// direction; lost needs a lost reason; leaving won or lost needs Reopen
// (leaving lost clears lost_reason; the history keeps it). A note is
// written in the same group as the stage change, after it: both land or
// neither does.
func (s *Store) ChangeStage(ctx context.Context, id string, mv StageMove) (*Opportunity, error) {
	if err := OneOf("stage", mv.Stage, Stages); err != nil {
		return nil, err
	}
	mv.LostReason = strings.TrimSpace(mv.LostReason)
	if mv.Stage == StageLost && mv.LostReason == "" {
		return nil, repo.Invalid("lost_reason", "is required to move to lost: say why it was lost")
	}
	if mv.Stage != StageLost && mv.LostReason != "" {
		return nil, repo.Invalid("lost_reason", "is only taken with stage lost (not %s)", mv.Stage)
	}
	mv.OverrideReason = strings.TrimSpace(mv.OverrideReason)
	if mv.OverrideReason != "" && mv.Stage != StagePitched {
		return nil, repo.Invalid("override_reason", "is only taken with stage pitched (not %s): it overrides the double-pitch guard", mv.Stage)
	}
	var out *Opportunity
	err := s.WriteGroup(ctx, func() ([]repo.Mutation, error) {
		noteID := ""
		var note repo.Mutation
		if strings.TrimSpace(mv.Note) != "" {
			var err error
			if note, err = repo.StageNote(id, mv.Stage, mv.Note); err != nil {
				return nil, err
			}
			noteID = note.ID
		}
		from := ""
		o, m, err := repo.Prepare(ctx, s.Store, repo.CollOpportunities, id, audit.ActionUpdate, func(o *Opportunity) error {
			if err := activeOpportunity(o); err != nil {
				return err
			}
			from = o.Stage
			if o.Stage == mv.Stage {
				return &repo.Error{Code: repo.CodeFailedPrecondition, Field: "stage", Message: fmt.Sprintf("stage: opportunity %s is already %s", id, mv.Stage)}
			}
			if Terminal(o.Stage) && !mv.Reopen {
				return &repo.Error{Code: repo.CodeFailedPrecondition, Field: "reopen", Message: fmt.Sprintf("opportunity %s is %s, a final stage; to move it to %s pass reopen: true", id, o.Stage, mv.Stage)}
			}
			was := snapshot(o)
			o.Stage, o.LostReason = mv.Stage, mv.LostReason
			ch := stageChange(ctx, mv.Stage, mv.LostReason, noteID)
			ch.OverrideReason = mv.OverrideReason
			o.StageHistory = append(o.StageHistory, ch)
			return s.guard(ctx, id, was, o)
		})
		if err != nil {
			return nil, err
		}
		out = o
		muts := []repo.Mutation{*m} // never nil: the stage differs
		if noteID != "" {
			muts = append(muts, note)
		}
		ev := outbox.StageEvent(o.ID, o.Title, from, o.Stage)
		if noteID != "" {
			ev.Data["note_id"], ev.Data["note"] = noteID, mv.Note
		}
		notes, err := outbox.Of(s.Store).EventMutations(ctx, ev)
		if err != nil {
			return nil, err
		}
		return append(muts, notes...), nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// LinkContact adds a contact to an opportunity.
func (s *Store) LinkContact(ctx context.Context, oppID, contactID string) (*Opportunity, error) {
	if err := s.MustExist(ctx, repo.CollContacts, "contact_id", contactID); err != nil {
		return nil, err
	}
	return repo.Modify(ctx, s.Store, repo.CollOpportunities, oppID, audit.ActionLink, func(o *Opportunity) error {
		if err := activeOpportunity(o); err != nil {
			return err
		}
		if slices.Contains(o.ContactIDs, contactID) {
			return &repo.Error{Code: repo.CodeFailedPrecondition, Field: "contact_id", Message: fmt.Sprintf("contact_id: contact %s is already linked to opportunity %s", contactID, oppID)}
		}
		was := snapshot(o)
		o.ContactIDs = append(slices.Clone(o.ContactIDs), contactID)
		return s.guard(ctx, oppID, was, o)
	})
}

// UnlinkContact removes a contact from an opportunity.
func (s *Store) UnlinkContact(ctx context.Context, oppID, contactID string) (*Opportunity, error) {
	return repo.Modify(ctx, s.Store, repo.CollOpportunities, oppID, audit.ActionUnlink, func(o *Opportunity) error {
		if err := activeOpportunity(o); err != nil {
			return err
		}
		i := slices.Index(o.ContactIDs, contactID)
		if i < 0 {
			return &repo.Error{Code: repo.CodeFailedPrecondition, Field: "contact_id", Message: fmt.Sprintf("contact_id: contact %s is not linked to opportunity %s", contactID, oppID)}
		}
		o.ContactIDs = slices.Delete(o.ContactIDs, i, i+1)
		return nil
	})
}

// ArchiveOpportunity archives an opportunity.
func (s *Store) ArchiveOpportunity(ctx context.Context, id string) (*Opportunity, error) {
	return repo.Archive[*Opportunity](ctx, s.Store, repo.CollOpportunities, id, nil)
}

// RestoreOpportunity restores an archived opportunity.
func (s *Store) RestoreOpportunity(ctx context.Context, id string) (*Opportunity, error) {
	if o, err := s.Opportunity(ctx, id); err == nil && o.Archived() {
		back := snapshot(o)
		back.ArchivedAt = nil
		if err := s.guard(ctx, id, o, back); err != nil {
			return nil, err
		}
	}
	return repo.Restore[*Opportunity](ctx, s.Store, repo.CollOpportunities, id)
}

// OpportunityFilter selects opportunities; empty fields do not filter.
type OpportunityFilter struct {
	CampaignID, Stage, Priority, OutletID, ContactID, Search string
	// NextActionBefore keeps opportunities whose next action is due before it.
	NextActionBefore *time.Time
	IncludeArchived  bool
}

// ListOpportunities lists opportunities, newest first.
func (s *Store) ListOpportunities(ctx context.Context, f OpportunityFilter, limit, offset int) (repo.Page[Opportunity], error) {
	filter := bson.M{}
	for k, v := range map[string]string{"campaign_id": f.CampaignID, "stage": f.Stage, "priority": f.Priority, "outlet_id": f.OutletID, "contact_ids": f.ContactID} {
		if v != "" {
			filter[k] = v
		}
	}
	if f.NextActionBefore != nil {
		filter["next_action_date"] = bson.M{"$lt": *f.NextActionBefore}
	}
	if f.Search != "" {
		return textlist.Page[Opportunity](ctx, s.Store, textlist.Filter{Coll: repo.CollOpportunities, Text: f.Search}, repo.Active(filter, f.IncludeArchived), repo.NewestFirst, limit, offset)
	}
	return repo.ListPage[Opportunity](ctx, s.Store, repo.CollOpportunities, repo.Active(filter, f.IncludeArchived), repo.NewestFirst, limit, offset)
}

// OpportunityDetail is an opportunity with its related records, trimmed.
type OpportunityDetail struct {
	*Opportunity
	Campaign     map[string]any   `json:"campaign"`
	Outlet       map[string]any   `json:"outlet"`
	Channel      map[string]any   `json:"channel"`
	Contacts     []map[string]any `json:"contacts"`
	Coverage     []map[string]any `json:"coverage"`
	EmailThreads []map[string]any `json:"email_threads"`
}

// Trimmed fields of related records.
var (
	trimCampaign = []string{"name", "status", "archived_at"}
	trimOutlet   = []string{"name", "type", "tier", "website", "archived_at"}
	trimChannel  = []string{"outlet_id", "name", "type", "url", "archived_at"}
	trimThread   = []string{"subject", "last_message_at"}
)

// OpportunityDetail returns an opportunity with its campaign, outlet,
// channel, contacts (linked records as they are, archived ones marked by
// archived_at), and its active coverage and email threads, newest first.
func (s *Store) OpportunityDetail(ctx context.Context, id string) (*OpportunityDetail, error) {
	o, err := s.Opportunity(ctx, id)
	if err != nil {
		return nil, err
	}
	d := &OpportunityDetail{Opportunity: o}
	if d.Campaign, err = s.TrimmedOne(ctx, repo.CollCampaigns, o.CampaignID, trimCampaign); err != nil {
		return nil, err
	}
	if d.Outlet, err = s.TrimmedOne(ctx, repo.CollOutlets, o.OutletID, trimOutlet); err != nil {
		return nil, err
	}
	if d.Channel, err = s.TrimmedOne(ctx, repo.CollChannels, o.ChannelID, trimChannel); err != nil {
		return nil, err
	}
	if d.Contacts, err = s.Trimmed(ctx, repo.CollContacts, ByIDs(o.ContactIDs), nil, repo.TrimContact); err != nil {
		return nil, err
	}
	if d.Coverage, err = s.Trimmed(ctx, repo.CollCoverage, bson.M{"opportunity_id": id, "archived_at": nil},
		bson.D{{Key: "published_at", Value: -1}, {Key: "_id", Value: -1}}, repo.TrimCoverage); err != nil {
		return nil, err
	}
	if d.EmailThreads, err = s.Trimmed(ctx, repo.CollEmails, bson.M{"opportunity_links.opportunity_id": id, "archived_at": nil},
		bson.D{{Key: "last_message_at", Value: -1}, {Key: "_id", Value: -1}}, trimThread); err != nil {
		return nil, err
	}
	return d, nil
}

// ByIDs is the filter of the records with the given ids; never a null $in.
func ByIDs(ids []string) bson.M {
	if ids == nil {
		ids = []string{}
	}
	return bson.M{"_id": bson.M{"$in": ids}}
}

// snapshot copies what the guards compare of o before a change.
func snapshot(o *Opportunity) *Opportunity {
	was := *o
	was.ContactIDs = slices.Clone(o.ContactIDs)
	was.StageHistory = slices.Clone(o.StageHistory)
	return &was
}

// guard runs the pipeline's guards on the change of opportunity id from
// was to o, as a tool's error.
func (s *Store) guard(ctx context.Context, id string, was, o *Opportunity) error {
	g, err := opportunityGuards(ctx, s.View(), id, was, o)
	if err != nil {
		return err
	}
	if g != nil {
		return g.ToolError()
	}
	return nil
}

func opportunityRule(ctx context.Context, v *repo.RuleView, id string, state bson.M) error {
	o, err := repo.DecodeState[Opportunity](id, state)
	if err != nil {
		return err
	}
	if err := checkOpportunity(o); err != nil {
		return repo.FieldViolation("opportunity_fields", err)
	}
	if o.CampaignID == "" {
		return repo.Violated("opportunity_campaign", "opportunity %s would be in no campaign, and every opportunity is in one; leave this change as it is", id)
	}
	for _, l := range []struct{ coll, field, id string }{{repo.CollCampaigns, "campaign_id", o.CampaignID}, {repo.CollOutlets, "outlet_id", o.OutletID}} {
		if err := v.Linked(ctx, l.coll, l.field, l.id); err != nil {
			return err
		}
	}
	for i, c := range o.ContactIDs {
		if err := v.Linked(ctx, repo.CollContacts, fmt.Sprintf("contact_ids[%d]", i), c); err != nil {
			return err
		}
	}
	if err := directory.ChannelOf(ctx, v, "opportunity "+id, o.ChannelID, o.OutletID); err != nil {
		return err
	}
	if err := v.Linked(ctx, repo.CollUsers, "owner_id", o.OwnerID); err != nil {
		return err
	}
	stored, err := v.Stored(ctx, repo.CollOpportunities, id)
	if err != nil {
		return err
	}
	var was *Opportunity
	if stored != nil {
		if was, err = repo.DecodeState[Opportunity](id, stored); err != nil {
			return err
		}
	}
	g, err := opportunityGuards(ctx, v, id, was, o)
	if err == nil && g == nil {
		g, err = embargoCoverage(ctx, v, "opportunity_id", id, o.EmbargoUntil)
	}
	if err != nil {
		return err
	}
	if g != nil {
		return g.AsViolation()
	}
	// Coverage follows its opportunity's campaign.
	off, err := v.Matching(ctx, repo.CollCoverage, bson.M{"opportunity_id": id}, func(st bson.M) bool {
		return repo.Str(st, "opportunity_id") == id && repo.Str(st, "campaign_id") != o.CampaignID
	})
	if err != nil {
		return err
	}
	if len(off) > 0 {
		return coverageCampaign(repo.Str(off[0], "_id"), repo.Str(off[0], "campaign_id"), id, o.CampaignID)
	}
	return nil
}

func init() { repo.RegisterRule(repo.CollOpportunities, opportunityRule) }

// NotifyDueActions creates a next_action_due notification for each
// subscriber of every active opportunity whose next action is due at at.
// It fires once per due date: the notification's id is a function of the
// opportunity, the date and the subscriber, so scanning again (here or on
// another instance) finds it made and writes nothing. It returns how many
// notifications it created.
func (s *Store) NotifyDueActions(ctx context.Context, at time.Time) (int, error) {
	cur, err := s.Find(ctx, repo.CollOpportunities, bson.M{"archived_at": nil, "next_action_date": bson.M{"$lte": at}})
	if err != nil {
		return 0, ledger.DriverErr(err, "opportunity", "due")
	}
	var opps []Opportunity
	if err := cur.All(ctx, &opps); err != nil {
		return 0, ledger.DriverErr(err, "opportunity", "due")
	}
	made := 0
	for i := range opps {
		o := &opps[i]
		if o.NextActionDate == nil || Terminal(o.Stage) {
			continue
		}
		day := o.NextActionDate.UTC().Format(time.RFC3339)
		ev := outbox.OppEvent{Kind: outbox.EventNextActionDue, OppID: o.ID, Title: o.Title, Key: "next_action_due/" + o.ID + "/" + day,
			Text: fmt.Sprintf("next action on %q is due (%s): %s", o.Title, day, o.NextAction),
			Data: map[string]any{"next_action": o.NextAction, "next_action_date": *o.NextActionDate, "next_action_owner": o.NextActionOwner}}
		muts, err := outbox.Of(s.Store).EventMutations(ctx, ev)
		if err != nil {
			return made, err
		}
		fresh := muts[:0]
		for _, m := range muts {
			var meta repo.Meta
			err := s.Collection(repo.CollNotifications).FindOne(ctx, bson.M{"_id": m.ID}).Decode(&meta)
			if errors.Is(err, mongo.ErrNoDocuments) {
				fresh = append(fresh, m)
			} else if err != nil {
				return made, ledger.DriverErr(err, "notification", m.ID)
			}
		}
		if len(fresh) == 0 {
			continue
		}
		if _, err := s.Write(ctx, fresh...); err != nil {
			if ledger.IsConflict(err) {
				continue // another instance made them first
			}
			return made, err
		}
		made += len(fresh)
	}
	return made, nil
}
