package tools

import (
	"context"
	"time"

	"outreach/repo"
	"outreach/repo/pipeline"
)

// Campaigns is the Campaigns group: groupings of opportunities with summary
// metrics computed on every read.
func Campaigns(s *repo.Store) []Tool {
	type createIn struct {
		Name             string `json:"name" jsonschema:"the campaign's name; General is reserved for the default campaign"`
		Description      string `json:"description,omitempty" max:"100000" jsonschema:"what the campaign is about"`
		Status           string `json:"status,omitempty" enum:"planning,active,paused,completed" jsonschema:"the campaign's status; default active"`
		StartsOn         string `json:"starts_on,omitempty" jsonschema:"first day (YYYY-MM-DD or ISO datetime)"`
		EndsOn           string `json:"ends_on,omitempty" jsonschema:"last day (YYYY-MM-DD or ISO datetime); not before starts_on"`
		Goals            string `json:"goals,omitempty" max:"100000" jsonschema:"the campaign's goals, as text"`
		TargetPlacements *int64 `json:"target_placements,omitempty" min:"0" jsonschema:"how many placements the campaign aims for (0 or more)"`
		EmbargoUntil     string `json:"embargo_until,omitempty" jsonschema:"when the material may be published: an RFC 3339 time with its zone offset, e.g. 2026-12-01T09:00:00+01:00 (stored in UTC, the offset kept as embargo_zone for display); coverage cannot be recorded as published before it"`
	}
	type idIn struct {
		ID string `json:"id" jsonschema:"the campaign's id (UUID)"`
	}
	type listIn struct {
		Status          string `json:"status,omitempty" enum:"planning,active,paused,completed" jsonschema:"only campaigns with this status"`
		Search          string `json:"search,omitempty" jsonschema:"literal, case-insensitive text to find in name, description or goals"`
		IncludeArchived bool   `json:"include_archived,omitempty" jsonschema:"include archived campaigns; default false"`
		Limit           *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum campaigns; default 50"`
		Offset          *int   `json:"offset,omitempty" min:"0" jsonschema:"campaigns to skip; default 0"`
	}
	type updateIn struct {
		ID               string  `json:"id" jsonschema:"the campaign's id (UUID)"`
		Name             *string `json:"name,omitempty" jsonschema:"new name (General cannot be renamed, and no other campaign may take that name)"`
		Description      *string `json:"description,omitempty" max:"100000" jsonschema:"new description; empty string clears it"`
		Status           *string `json:"status,omitempty" enum:"planning,active,paused,completed" jsonschema:"new status"`
		StartsOn         *string `json:"starts_on,omitempty" jsonschema:"new first day (YYYY-MM-DD or ISO datetime); empty string clears it"`
		EndsOn           *string `json:"ends_on,omitempty" jsonschema:"new last day (YYYY-MM-DD or ISO datetime); empty string clears it"`
		Goals            *string `json:"goals,omitempty" max:"100000" jsonschema:"new goals; empty string clears them"`
		TargetPlacements *int64  `json:"target_placements,omitempty" min:"0" jsonschema:"new number of placements aimed for (0 or more)"`
		EmbargoUntil     *string `json:"embargo_until,omitempty" jsonschema:"new embargo (RFC 3339 with zone offset); empty string lifts it; refused while active coverage of the campaign was published before it"`
	}
	return []Tool{
		newTool("create_campaign", "Create a campaign: a grouping of related opportunities. Status defaults to active.", create,
			func(ctx context.Context, in *createIn) (any, error) {
				c := &pipeline.Campaign{Name: in.Name, Description: in.Description, Status: in.Status, Goals: in.Goals, TargetPlacements: in.TargetPlacements}
				var err error
				if c.StartsOn, err = optTime("starts_on", in.StartsOn); err != nil {
					return nil, err
				}
				if c.EndsOn, err = optTime("ends_on", in.EndsOn); err != nil {
					return nil, err
				}
				if in.Status != "" {
					if err := checkEnum("status", in.Status, pipeline.CampaignStatuses); err != nil {
						return nil, err
					}
				}
				e, err := pipeline.ParseEmbargo("embargo_until", in.EmbargoUntil)
				if err != nil {
					return nil, err
				}
				if e != nil {
					c.EmbargoUntil, c.EmbargoZone = &e.Until, e.Zone
				}
				return pipeline.Of(s).CreateCampaign(ctx, c)
			}),
		newTool("get_campaign", "One campaign with its summary metrics, computed now from its active opportunities and coverage: opportunities by stage, open/won/lost, win rate (won / (won + lost); null while none is closed), coverage by type and by sentiment, tier-1 coverage, total reach, overdue next actions.", read,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				c, err := pipeline.Of(s).Campaign(ctx, in.ID)
				if err != nil {
					return nil, err
				}
				m, err := pipeline.Of(s).CampaignMetrics(ctx, in.ID)
				if err != nil {
					return nil, err
				}
				return struct {
					*pipeline.Campaign
					Metrics *pipeline.CampaignMetrics `json:"metrics"`
				}{c, m}, nil
			}),
		newTool("list_campaigns", "List campaigns, newest first, each with headline counts of its active opportunities (total, open, won, lost) and coverage.", read,
			func(ctx context.Context, in *listIn) (any, error) {
				limit, offset, err := page(in.Limit, in.Offset, defaultLimit)
				if err != nil {
					return nil, err
				}
				if in.Status != "" {
					if err := checkEnum("status", in.Status, pipeline.CampaignStatuses); err != nil {
						return nil, err
					}
				}
				p, err := pipeline.Of(s).ListCampaigns(ctx, pipeline.CampaignFilter{Status: in.Status, Search: in.Search, IncludeArchived: in.IncludeArchived}, limit, offset)
				if err != nil {
					return nil, err
				}
				ids := make([]string, len(p.Items))
				for i, c := range p.Items {
					ids[i] = c.ID
				}
				heads, err := pipeline.Of(s).CampaignHeadlines(ctx, ids)
				if err != nil {
					return nil, err
				}
				type withHeadline struct {
					pipeline.Campaign
					Headline *pipeline.CampaignHeadline `json:"headline"`
				}
				out := repo.Page[withHeadline]{Total: p.Total, Items: make([]withHeadline, len(p.Items))}
				for i, c := range p.Items {
					out.Items[i] = withHeadline{c, heads[c.ID]}
				}
				return envelope("campaigns", out, limit, offset), nil
			}),
		newTool("update_campaign", "Change a campaign's fields; only the fields given change.", change,
			func(ctx context.Context, in *updateIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				p := pipeline.CampaignPatch{Name: in.Name, Description: in.Description, Status: in.Status, Goals: in.Goals}
				if in.Status != nil {
					if err := checkEnum("status", *in.Status, pipeline.CampaignStatuses); err != nil {
						return nil, err
					}
				}
				if in.TargetPlacements != nil {
					p.TargetPlacements = &in.TargetPlacements
				}
				var err error
				if p.StartsOn, err = patchTime("starts_on", in.StartsOn); err != nil {
					return nil, err
				}
				if p.EndsOn, err = patchTime("ends_on", in.EndsOn); err != nil {
					return nil, err
				}
				if p.Embargo, err = patchEmbargo(in.EmbargoUntil); err != nil {
					return nil, err
				}
				return pipeline.Of(s).UpdateCampaign(ctx, in.ID, p)
			}),
		newTool("archive_campaign", "Archive a campaign (soft delete; restore_campaign undoes it). The General campaign cannot be archived. Its opportunities and coverage stay as they are.", change,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return pipeline.Of(s).ArchiveCampaign(ctx, in.ID)
			}),
		newTool("restore_campaign", "Restore an archived campaign.", change,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return pipeline.Of(s).RestoreCampaign(ctx, in.ID)
			}),
	}
}

// optTime parses an optional date argument; empty means absent.
func optTime(field, v string) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	t, err := parseTime(field, v, false)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// patchTime parses an optional date of an update: nil leaves the field as
// it is, an empty string clears it.
func patchTime(field string, v *string) (**time.Time, error) {
	if v == nil {
		return nil, nil
	}
	t, err := optTime(field, *v)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// patchUUID checks an optional id of an update: nil leaves the link as it
// is, an empty string clears it.
func patchUUID(field string, v *string) error {
	if v == nil || *v == "" {
		return nil
	}
	return checkUUID(field, *v)
}

// idArg is an id argument of an update: nil leaves it, "" clears it.
type idArg struct {
	field string
	v     *string
}

// checkPatchIDs checks the id arguments of an update: each id given, and
// every element of contactIDs when given, must be a UUID.
func checkPatchIDs(ids []idArg, contactIDs *[]string) error {
	for _, a := range ids {
		if err := patchUUID(a.field, a.v); err != nil {
			return err
		}
	}
	if contactIDs != nil {
		return checkUUIDs("contact_ids", *contactIDs)
	}
	return nil
}

// optUUID checks an optional id; empty means absent.
func optUUID(field, v string) error {
	if v == "" {
		return nil
	}
	return checkUUID(field, v)
}
