package tools

import (
	"context"
	"encoding/json"

	"outreach/repo"
	"outreach/repo/pipeline"
)

// Opportunities is the Opportunities group: pitches and placements through
// the stage model (researching → … → won, and lost).
func Opportunities(s *repo.Store) []Tool {
	type createIn struct {
		Title           string   `json:"title" jsonschema:"short title of the opportunity"`
		Description     string   `json:"description,omitempty" max:"100000" jsonschema:"what the opportunity is"`
		CampaignID      string   `json:"campaign_id,omitempty" jsonschema:"campaign (UUID); default the General campaign"`
		OutletID        string   `json:"outlet_id,omitempty" jsonschema:"outlet (UUID); default the channel's outlet when channel_id is given"`
		ChannelID       string   `json:"channel_id,omitempty" jsonschema:"channel (UUID); it must belong to outlet_id"`
		Stage           string   `json:"stage,omitempty" enum:"researching,drafting,pitched,responded,in_progress,placed,published,won,lost" jsonschema:"starting stage; default researching"`
		Priority        string   `json:"priority,omitempty" enum:"high,medium,low" jsonschema:"priority; default medium"`
		Type            string   `json:"type,omitempty" enum:"pitch,interview,podcast_guest,speaking,contributed_article,award_entry,event,other" jsonschema:"kind of opportunity"`
		TargetDate      string   `json:"target_date,omitempty" jsonschema:"when it should land (YYYY-MM-DD or ISO datetime)"`
		NextAction      string   `json:"next_action,omitempty" max:"100000" jsonschema:"the next thing to do"`
		NextActionDate  string   `json:"next_action_date,omitempty" jsonschema:"when the next action is due (YYYY-MM-DD or ISO datetime)"`
		NextActionOwner string   `json:"next_action_owner,omitempty" jsonschema:"who does the next action (a name or a user id, free text)"`
		ContactIDs      []string `json:"contact_ids,omitempty" jsonschema:"contacts involved (UUIDs)"`
		LostReason      string   `json:"lost_reason,omitempty" jsonschema:"why it was lost; required when stage is lost, refused otherwise"`
		OwnerID         string   `json:"owner_id,omitempty" jsonschema:"the team member who owns the opportunity (a user id, see list_users)"`
		EmbargoUntil    string   `json:"embargo_until,omitempty" jsonschema:"when the material may be published: an RFC 3339 time with its zone offset, e.g. 2026-12-01T09:00:00+01:00 (stored in UTC, the offset kept as embargo_zone for display); coverage cannot be recorded as published before it"`
		OverrideReason  string   `json:"override_reason,omitempty" jsonschema:"when created at stage pitched: why to pitch a contact the team pitched within the double-pitch window; kept in the stage history"`
	}
	type idIn struct {
		ID string `json:"id" jsonschema:"the opportunity's id (UUID)"`
	}
	type listIn struct {
		CampaignID       string `json:"campaign_id,omitempty" jsonschema:"only opportunities of this campaign (UUID)"`
		Stage            string `json:"stage,omitempty" enum:"researching,drafting,pitched,responded,in_progress,placed,published,won,lost" jsonschema:"only opportunities at this stage"`
		Priority         string `json:"priority,omitempty" enum:"high,medium,low" jsonschema:"only opportunities with this priority"`
		OutletID         string `json:"outlet_id,omitempty" jsonschema:"only opportunities with this outlet (UUID)"`
		ContactID        string `json:"contact_id,omitempty" jsonschema:"only opportunities linked to this contact (UUID)"`
		NextActionBefore string `json:"next_action_before,omitempty" jsonschema:"only opportunities whose next action is due strictly before this time (YYYY-MM-DD means midnight UTC at the start of that day)"`
		Search           string `json:"search,omitempty" jsonschema:"literal, case-insensitive text to find in title, description or next_action"`
		IncludeArchived  bool   `json:"include_archived,omitempty" jsonschema:"include archived opportunities; default false"`
		Limit            *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum opportunities; default 50"`
		Offset           *int   `json:"offset,omitempty" min:"0" jsonschema:"opportunities to skip; default 0"`
	}
	type updateIn struct {
		ID              string    `json:"id" jsonschema:"the opportunity's id (UUID)"`
		Title           *string   `json:"title,omitempty" jsonschema:"new title"`
		Description     *string   `json:"description,omitempty" max:"100000" jsonschema:"new description; empty string clears it"`
		CampaignID      *string   `json:"campaign_id,omitempty" jsonschema:"move to this campaign (UUID); its coverage moves with it"`
		OutletID        *string   `json:"outlet_id,omitempty" jsonschema:"new outlet (UUID); empty string clears it (and needs channel_id cleared too)"`
		ChannelID       *string   `json:"channel_id,omitempty" jsonschema:"new channel (UUID), which must belong to the outlet; given without outlet_id, the outlet becomes the channel's; empty string clears it"`
		Priority        *string   `json:"priority,omitempty" enum:"high,medium,low" jsonschema:"new priority"`
		Type            *string   `json:"type,omitempty" enum:"pitch,interview,podcast_guest,speaking,contributed_article,award_entry,event,other" jsonschema:"new kind; empty string clears it"`
		TargetDate      *string   `json:"target_date,omitempty" jsonschema:"new target date (YYYY-MM-DD or ISO datetime); empty string clears it"`
		NextAction      *string   `json:"next_action,omitempty" max:"100000" jsonschema:"new next action; empty string clears it"`
		NextActionDate  *string   `json:"next_action_date,omitempty" jsonschema:"new due date of the next action; empty string clears it"`
		NextActionOwner *string   `json:"next_action_owner,omitempty" jsonschema:"new owner of the next action; empty string clears it"`
		ContactIDs      *[]string `json:"contact_ids,omitempty" jsonschema:"the complete new list of contacts (UUIDs); [] removes all"`
		LostReason      *string   `json:"lost_reason,omitempty" jsonschema:"corrected reason of a lost opportunity (only while it is lost)"`
		OwnerID         *string   `json:"owner_id,omitempty" jsonschema:"new owner (a user id); empty string clears it"`
		EmbargoUntil    *string   `json:"embargo_until,omitempty" jsonschema:"new embargo (RFC 3339 with zone offset); empty string lifts it; refused while active coverage of the opportunity was published before it"`
	}
	type stageIn struct {
		ID             string `json:"id" jsonschema:"the opportunity's id (UUID)"`
		Stage          string `json:"stage" enum:"researching,drafting,pitched,responded,in_progress,placed,published,won,lost" jsonschema:"the stage to move to"`
		LostReason     string `json:"lost_reason,omitempty" jsonschema:"why it was lost; required with stage lost, refused with any other stage"`
		Reopen         bool   `json:"reopen,omitempty" jsonschema:"must be true to move an opportunity out of won or lost"`
		Note           string `json:"note,omitempty" max:"100000" jsonschema:"optional text stored as a note linked to the opportunity, titled 'Stage changed to <stage>'"`
		OverrideReason string `json:"override_reason,omitempty" max:"2000" jsonschema:"only with stage pitched: why to pitch although a contact was pitched by the team within the double-pitch window; kept in the stage history and the change log"`
	}
	type contactIn struct {
		OpportunityID string `json:"opportunity_id" jsonschema:"the opportunity's id (UUID)"`
		ContactID     string `json:"contact_id" jsonschema:"the contact's id (UUID)"`
	}
	update := newTool("update_opportunity", "Change an opportunity's fields; only the fields given change. The stage is not changed here: use update_opportunity_stage.", change,
		func(ctx context.Context, in *updateIn) (any, error) {
			if err := checkUUID("id", in.ID); err != nil {
				return nil, err
			}
			if err := checkPatchIDs([]idArg{{"campaign_id", in.CampaignID}, {"outlet_id", in.OutletID},
				{"channel_id", in.ChannelID}}, in.ContactIDs); err != nil {
				return nil, err
			}
			if in.Priority != nil {
				if err := checkEnum("priority", *in.Priority, pipeline.Priorities); err != nil {
					return nil, err
				}
			}
			if err := checkOptEnums(optEnum{"type", deref(in.Type), pipeline.OpportunityTypes}); err != nil {
				return nil, err
			}
			p := pipeline.OpportunityPatch{Title: in.Title, Description: in.Description, CampaignID: in.CampaignID, OutletID: in.OutletID,
				ChannelID: in.ChannelID, Priority: in.Priority, Type: in.Type, NextAction: in.NextAction, NextActionOwner: in.NextActionOwner,
				LostReason: in.LostReason, ContactIDs: in.ContactIDs, OwnerID: in.OwnerID}
			if in.OwnerID != nil && *in.OwnerID != "" {
				if err := checkUUID("owner_id", *in.OwnerID); err != nil {
					return nil, err
				}
			}
			var err error
			if p.Embargo, err = patchEmbargo(in.EmbargoUntil); err != nil {
				return nil, err
			}
			if p.TargetDate, err = patchTime("target_date", in.TargetDate); err != nil {
				return nil, err
			}
			if p.NextActionDate, err = patchTime("next_action_date", in.NextActionDate); err != nil {
				return nil, err
			}
			return pipeline.Of(s).UpdateOpportunity(ctx, in.ID, p)
		})
	update.Handle = refuseStage(update.Handle)
	return []Tool{
		newTool("create_opportunity", "Create an opportunity (a pitch, interview, placement…). Without campaign_id it joins the General campaign; stage defaults to researching, priority to medium. Linked campaign, outlet, channel and contacts must exist and be active; the channel must belong to the outlet.", create,
			func(ctx context.Context, in *createIn) (any, error) {
				for _, f := range []struct{ name, v string }{{"campaign_id", in.CampaignID}, {"outlet_id", in.OutletID}, {"channel_id", in.ChannelID}} {
					if err := optUUID(f.name, f.v); err != nil {
						return nil, err
					}
				}
				if err := checkUUIDs("contact_ids", in.ContactIDs); err != nil {
					return nil, err
				}
				if err := checkOptEnums(optEnum{"stage", in.Stage, pipeline.Stages}, optEnum{"priority", in.Priority, pipeline.Priorities},
					optEnum{"type", in.Type, pipeline.OpportunityTypes}); err != nil {
					return nil, err
				}
				o := &pipeline.Opportunity{Title: in.Title, Description: in.Description, CampaignID: in.CampaignID, OutletID: in.OutletID,
					ChannelID: in.ChannelID, Stage: in.Stage, Priority: in.Priority, Type: in.Type, NextAction: in.NextAction,
					NextActionOwner: in.NextActionOwner, ContactIDs: in.ContactIDs, LostReason: in.LostReason, OwnerID: in.OwnerID}
				if err := optUUID("owner_id", in.OwnerID); err != nil {
					return nil, err
				}
				e, err := pipeline.ParseEmbargo("embargo_until", in.EmbargoUntil)
				if err != nil {
					return nil, err
				}
				if e != nil {
					o.EmbargoUntil, o.EmbargoZone = &e.Until, e.Zone
				}
				if o.TargetDate, err = optTime("target_date", in.TargetDate); err != nil {
					return nil, err
				}
				if o.NextActionDate, err = optTime("next_action_date", in.NextActionDate); err != nil {
					return nil, err
				}
				return pipeline.Of(s).CreatePitchedOpportunity(ctx, o, in.OverrideReason)
			}),
		newTool("get_opportunity", "One opportunity with its stage history and related records, trimmed: campaign, outlet, channel, contacts, coverage (newest first) and email threads.", read,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return pipeline.Of(s).OpportunityDetail(ctx, in.ID)
			}),
		newTool("list_opportunities", "List opportunities, newest first, filtered by campaign, stage, priority, outlet, contact, next-action due date and text.", read,
			func(ctx context.Context, in *listIn) (any, error) {
				limit, offset, err := page(in.Limit, in.Offset, defaultLimit)
				if err != nil {
					return nil, err
				}
				for _, f := range []struct{ name, v string }{{"campaign_id", in.CampaignID}, {"outlet_id", in.OutletID}, {"contact_id", in.ContactID}} {
					if err := optUUID(f.name, f.v); err != nil {
						return nil, err
					}
				}
				if err := checkOptEnums(optEnum{"stage", in.Stage, pipeline.Stages}, optEnum{"priority", in.Priority, pipeline.Priorities}); err != nil {
					return nil, err
				}
				f := pipeline.OpportunityFilter{CampaignID: in.CampaignID, Stage: in.Stage, Priority: in.Priority, OutletID: in.OutletID,
					ContactID: in.ContactID, Search: in.Search, IncludeArchived: in.IncludeArchived}
				if f.NextActionBefore, err = optTime("next_action_before", in.NextActionBefore); err != nil {
					return nil, err
				}
				p, err := pipeline.Of(s).ListOpportunities(ctx, f, limit, offset)
				if err != nil {
					return nil, err
				}
				return envelope("opportunities", p, limit, offset), nil
			}),
		update,
		newTool("update_opportunity_stage", "Move an opportunity to another stage; the move is appended to its stage history with who and when. Open stages move freely either way; lost needs lost_reason; leaving won or lost needs reopen: true (leaving lost clears lost_reason, the history keeps it). An optional note is stored as a note linked to the opportunity, written together with the move. Guards: a move to pitched or later is refused while a contact of the opportunity is marked do-not-contact; a move to pitched is refused when a contact was pitched by the team within the double-pitch window (the error names the earlier opportunity, its owner and date) unless override_reason is given.", change,
			func(ctx context.Context, in *stageIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				if err := checkEnum("stage", in.Stage, pipeline.Stages); err != nil {
					return nil, err
				}
				return pipeline.Of(s).ChangeStage(ctx, in.ID, pipeline.StageMove{Stage: in.Stage, LostReason: in.LostReason, Reopen: in.Reopen, Note: in.Note, OverrideReason: in.OverrideReason})
			}),
		newTool("add_opportunity_contact", "Link a contact to an opportunity. A contact marked do-not-contact cannot be added to an opportunity at pitched or later.", change,
			func(ctx context.Context, in *contactIn) (any, error) {
				if err := checkUUID("opportunity_id", in.OpportunityID); err != nil {
					return nil, err
				}
				if err := checkUUID("contact_id", in.ContactID); err != nil {
					return nil, err
				}
				return pipeline.Of(s).LinkContact(ctx, in.OpportunityID, in.ContactID)
			}),
		newTool("remove_opportunity_contact", "Unlink a contact from an opportunity (the contact itself is not changed).", change,
			func(ctx context.Context, in *contactIn) (any, error) {
				if err := checkUUID("opportunity_id", in.OpportunityID); err != nil {
					return nil, err
				}
				if err := checkUUID("contact_id", in.ContactID); err != nil {
					return nil, err
				}
				return pipeline.Of(s).UnlinkContact(ctx, in.OpportunityID, in.ContactID)
			}),
		newTool("archive_opportunity", "Archive an opportunity (soft delete; restore_opportunity undoes it). It no longer counts in its campaign's metrics.", change,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return pipeline.Of(s).ArchiveOpportunity(ctx, in.ID)
			}),
		newTool("restore_opportunity", "Restore an archived opportunity.", change,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return pipeline.Of(s).RestoreOpportunity(ctx, in.ID)
			}),
	}
}

// refuseStage makes update_opportunity answer a stage argument with where
// stages are changed, instead of the generic unknown-argument error.
func refuseStage(h func(context.Context, json.RawMessage) (any, error)) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var fields map[string]json.RawMessage
		if json.Unmarshal(raw, &fields) == nil {
			if _, ok := fields["stage"]; ok {
				return nil, repo.Invalid("stage", "update_opportunity does not change the stage; use update_opportunity_stage (id, stage, lost_reason, reopen, note), which records the move in the stage history")
			}
			if _, ok := fields["stage_history"]; ok {
				return nil, repo.Invalid("stage_history", "is written by update_opportunity_stage and cannot be set")
			}
		}
		return h(ctx, raw)
	}
}
