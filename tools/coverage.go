package tools

import (
	"context"

	"outreach/repo"
	"outreach/repo/pipeline"
)

// Coverage is the Coverage group: published results (articles, interviews,
// segments, award wins).
func Coverage(s *repo.Store) []Tool {
	type createIn struct {
		Title              string   `json:"title" jsonschema:"headline or title of the piece"`
		URL                string   `json:"url,omitempty" max:"2048" jsonschema:"where it is published (absolute http or https URL)"`
		PublishedAt        string   `json:"published_at" jsonschema:"when it was published (YYYY-MM-DD or ISO datetime)"`
		OutletID           string   `json:"outlet_id,omitempty" jsonschema:"outlet (UUID); default the channel's outlet, else the opportunity's"`
		ChannelID          string   `json:"channel_id,omitempty" jsonschema:"channel (UUID); it must belong to the outlet"`
		OpportunityID      string   `json:"opportunity_id,omitempty" jsonschema:"the opportunity it came from (UUID); the coverage's campaign is the opportunity's"`
		ContactIDs         []string `json:"contact_ids,omitempty" jsonschema:"authors, hosts (contact UUIDs)"`
		Type               string   `json:"type,omitempty" enum:"article,interview,review,opinion,listicle,roundup,segment,appearance,award_win,other" jsonschema:"kind of coverage; default article"`
		Sentiment          string   `json:"sentiment,omitempty" enum:"positive,neutral,negative,mixed" jsonschema:"tone towards us"`
		Depth              string   `json:"depth,omitempty" enum:"mention,quote,feature,dedicated,cover_story" jsonschema:"how much of the piece is about us"`
		ShareOfVoice       string   `json:"share_of_voice,omitempty" enum:"sole_focus,shared,competitor_included" jsonschema:"whether others share the piece"`
		SpokespersonQuoted *bool    `json:"spokesperson_quoted,omitempty" jsonschema:"whether our spokesperson is quoted"`
		InitiatedBy        string   `json:"initiated_by,omitempty" enum:"pitched,organic" jsonschema:"whether it came from our pitch or unprompted"`
		Reach              *int64   `json:"reach,omitempty" min:"0" max:"figure" jsonschema:"estimated audience of the piece (0 or more)"`
		Summary            string   `json:"summary,omitempty" max:"100000" jsonschema:"short summary"`
		FullText           string   `json:"full_text,omitempty" max:"100000" jsonschema:"the full text, for search and quoting"`
	}
	type idIn struct {
		ID string `json:"id" jsonschema:"the coverage's id (UUID)"`
	}
	type listIn struct {
		CampaignID      string `json:"campaign_id,omitempty" jsonschema:"only coverage of this campaign (UUID)"`
		OpportunityID   string `json:"opportunity_id,omitempty" jsonschema:"only coverage of this opportunity (UUID)"`
		OutletID        string `json:"outlet_id,omitempty" jsonschema:"only coverage in this outlet (UUID)"`
		ContactID       string `json:"contact_id,omitempty" jsonschema:"only coverage by or with this contact (UUID)"`
		Type            string `json:"type,omitempty" enum:"article,interview,review,opinion,listicle,roundup,segment,appearance,award_win,other" jsonschema:"only coverage of this kind"`
		Sentiment       string `json:"sentiment,omitempty" enum:"positive,neutral,negative,mixed" jsonschema:"only coverage with this sentiment"`
		Since           string `json:"since,omitempty" jsonschema:"only coverage published at or after this time (YYYY-MM-DD or ISO datetime)"`
		Until           string `json:"until,omitempty" jsonschema:"only coverage published at or before this time; a bare date includes that whole day"`
		Search          string `json:"search,omitempty" jsonschema:"literal, case-insensitive text to find in title, summary or url"`
		IncludeArchived bool   `json:"include_archived,omitempty" jsonschema:"include archived coverage; default false"`
		Limit           *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum records; default 50"`
		Offset          *int   `json:"offset,omitempty" min:"0" jsonschema:"records to skip; default 0"`
	}
	type updateIn struct {
		ID                 string    `json:"id" jsonschema:"the coverage's id (UUID)"`
		Title              *string   `json:"title,omitempty" jsonschema:"new title"`
		URL                *string   `json:"url,omitempty" max:"2048" jsonschema:"new URL (absolute http or https); empty string clears it"`
		PublishedAt        *string   `json:"published_at,omitempty" jsonschema:"new publication time (YYYY-MM-DD or ISO datetime)"`
		OutletID           *string   `json:"outlet_id,omitempty" jsonschema:"new outlet (UUID); empty string clears it (and needs channel_id cleared too)"`
		ChannelID          *string   `json:"channel_id,omitempty" jsonschema:"new channel (UUID), which must belong to the outlet; given without outlet_id, the outlet becomes the channel's; empty string clears it"`
		OpportunityID      *string   `json:"opportunity_id,omitempty" jsonschema:"new opportunity (UUID); the campaign follows it; empty string clears it (and the campaign)"`
		ContactIDs         *[]string `json:"contact_ids,omitempty" jsonschema:"the complete new list of contacts (UUIDs); [] removes all"`
		Type               *string   `json:"type,omitempty" enum:"article,interview,review,opinion,listicle,roundup,segment,appearance,award_win,other" jsonschema:"new kind"`
		Sentiment          *string   `json:"sentiment,omitempty" enum:"positive,neutral,negative,mixed" jsonschema:"new sentiment; empty string clears it"`
		Depth              *string   `json:"depth,omitempty" enum:"mention,quote,feature,dedicated,cover_story" jsonschema:"new depth; empty string clears it"`
		ShareOfVoice       *string   `json:"share_of_voice,omitempty" enum:"sole_focus,shared,competitor_included" jsonschema:"new share of voice; empty string clears it"`
		SpokespersonQuoted *bool     `json:"spokesperson_quoted,omitempty" jsonschema:"whether our spokesperson is quoted"`
		InitiatedBy        *string   `json:"initiated_by,omitempty" enum:"pitched,organic" jsonschema:"new initiator; empty string clears it"`
		Reach              *int64    `json:"reach,omitempty" min:"0" max:"figure" jsonschema:"new estimated audience (0 or more)"`
		Summary            *string   `json:"summary,omitempty" max:"100000" jsonschema:"new summary; empty string clears it"`
		FullText           *string   `json:"full_text,omitempty" max:"100000" jsonschema:"new full text; empty string clears it"`
	}
	return []Tool{
		newTool("create_coverage", "Record published coverage. Type defaults to article. The campaign follows from opportunity_id; without outlet_id the outlet is the channel's, else the opportunity's. Linked records must exist and be active.", create,
			func(ctx context.Context, in *createIn) (any, error) {
				for _, f := range []struct{ name, v string }{{"outlet_id", in.OutletID}, {"channel_id", in.ChannelID}, {"opportunity_id", in.OpportunityID}} {
					if err := optUUID(f.name, f.v); err != nil {
						return nil, err
					}
				}
				if err := checkUUIDs("contact_ids", in.ContactIDs); err != nil {
					return nil, err
				}
				if err := checkOptEnums(optEnum{"type", in.Type, pipeline.CoverageTypes}, optEnum{"sentiment", in.Sentiment, pipeline.Sentiments},
					optEnum{"depth", in.Depth, pipeline.Depths}, optEnum{"share_of_voice", in.ShareOfVoice, pipeline.SharesOfVoice},
					optEnum{"initiated_by", in.InitiatedBy, pipeline.Initiators}); err != nil {
					return nil, err
				}
				published, err := parseTime("published_at", in.PublishedAt, false)
				if err != nil {
					return nil, err
				}
				c := &pipeline.Coverage{Title: in.Title, URL: in.URL, PublishedAt: published, ContactIDs: in.ContactIDs, Type: in.Type,
					Sentiment: in.Sentiment, Depth: in.Depth, ShareOfVoice: in.ShareOfVoice, SpokespersonQuoted: in.SpokespersonQuoted,
					InitiatedBy: in.InitiatedBy, Reach: in.Reach, Summary: in.Summary, FullText: in.FullText}
				return pipeline.Of(s).CreateCoverage(ctx, c, nilIfEmpty(in.OutletID), nilIfEmpty(in.ChannelID), nilIfEmpty(in.OpportunityID))
			}),
		newTool("get_coverage", "One coverage record with its outlet, channel, opportunity, campaign, contacts and media, trimmed.", read,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return pipeline.Of(s).CoverageDetail(ctx, in.ID)
			}),
		newTool("list_coverage", "List coverage, most recently published first, filtered by campaign, opportunity, outlet, contact, type, sentiment, publication time and text.", read,
			func(ctx context.Context, in *listIn) (any, error) {
				limit, offset, err := page(in.Limit, in.Offset, defaultLimit)
				if err != nil {
					return nil, err
				}
				for _, f := range []struct{ name, v string }{{"campaign_id", in.CampaignID}, {"opportunity_id", in.OpportunityID}, {"outlet_id", in.OutletID}, {"contact_id", in.ContactID}} {
					if err := optUUID(f.name, f.v); err != nil {
						return nil, err
					}
				}
				if err := checkOptEnums(optEnum{"type", in.Type, pipeline.CoverageTypes}, optEnum{"sentiment", in.Sentiment, pipeline.Sentiments}); err != nil {
					return nil, err
				}
				f := pipeline.CoverageFilter{CampaignID: in.CampaignID, OpportunityID: in.OpportunityID, OutletID: in.OutletID, ContactID: in.ContactID,
					Type: in.Type, Sentiment: in.Sentiment, Search: in.Search, IncludeArchived: in.IncludeArchived}
				if f.Since, err = optTime("since", in.Since); err != nil {
					return nil, err
				}
				if in.Until != "" {
					t, err := parseTime("until", in.Until, true)
					if err != nil {
						return nil, err
					}
					f.Until = &t
				}
				p, err := pipeline.Of(s).ListCoverage(ctx, f, limit, offset)
				if err != nil {
					return nil, err
				}
				return envelope("coverage", p, limit, offset), nil
			}),
		newTool("update_coverage", "Change coverage fields; only the fields given change. Changing opportunity_id moves the coverage to that opportunity's campaign.", change,
			func(ctx context.Context, in *updateIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				if err := checkPatchIDs([]idArg{{"outlet_id", in.OutletID}, {"channel_id", in.ChannelID},
					{"opportunity_id", in.OpportunityID}}, in.ContactIDs); err != nil {
					return nil, err
				}
				if in.Type != nil {
					if err := checkEnum("type", *in.Type, pipeline.CoverageTypes); err != nil {
						return nil, err
					}
				}
				if err := checkOptEnums(optEnum{"sentiment", deref(in.Sentiment), pipeline.Sentiments}, optEnum{"depth", deref(in.Depth), pipeline.Depths},
					optEnum{"share_of_voice", deref(in.ShareOfVoice), pipeline.SharesOfVoice}, optEnum{"initiated_by", deref(in.InitiatedBy), pipeline.Initiators}); err != nil {
					return nil, err
				}
				p := pipeline.CoveragePatch{Title: in.Title, URL: in.URL, OutletID: in.OutletID, ChannelID: in.ChannelID, OpportunityID: in.OpportunityID,
					Type: in.Type, Sentiment: in.Sentiment, Depth: in.Depth, ShareOfVoice: in.ShareOfVoice, InitiatedBy: in.InitiatedBy,
					Summary: in.Summary, FullText: in.FullText, ContactIDs: in.ContactIDs}
				if in.PublishedAt != nil {
					t, err := parseTime("published_at", *in.PublishedAt, false)
					if err != nil {
						return nil, err
					}
					p.PublishedAt = &t
				}
				if in.SpokespersonQuoted != nil {
					p.SpokespersonQuoted = &in.SpokespersonQuoted
				}
				if in.Reach != nil {
					p.Reach = &in.Reach
				}
				return pipeline.Of(s).UpdateCoverage(ctx, in.ID, p)
			}),
		newTool("archive_coverage", "Archive coverage (soft delete; restore_coverage undoes it). It no longer counts in its campaign's metrics.", change,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return pipeline.Of(s).ArchiveCoverage(ctx, in.ID)
			}),
		newTool("restore_coverage", "Restore archived coverage.", change,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return pipeline.Of(s).RestoreCoverage(ctx, in.ID)
			}),
	}
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// optEnum is an optional enum argument: empty is absent.
type optEnum struct {
	field, value string
	allowed      []string
}

// checkOptEnums checks each given enum argument.
func checkOptEnums(args ...optEnum) error {
	for _, a := range args {
		if a.value == "" {
			continue
		}
		if err := checkEnum(a.field, a.value, a.allowed); err != nil {
			return err
		}
	}
	return nil
}
