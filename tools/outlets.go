package tools

import (
	"context"

	"outreach/repo"
	"outreach/repo/directory"
)

// Outlets is the Outlets group: media companies, publications, podcast
// networks, conference organizers.
func Outlets(s *repo.Store) []Tool {
	type createIn struct {
		Name         string         `json:"name" jsonschema:"the outlet's name, e.g. The Daily Ledger"`
		Type         *string        `json:"type,omitempty" enum:"publication,newspaper,magazine,online,broadcaster,podcast_network,newsletter,blog,wire_service,conference_organizer,award_body,other" jsonschema:"kind of outlet; default publication"`
		Tier         *int           `json:"tier,omitempty" min:"1" max:"3" jsonschema:"importance, 1 (top tier) to 3"`
		Website      *string        `json:"website,omitempty" max:"2048" jsonschema:"home page, a full http or https URL"`
		Description  *string        `json:"description,omitempty" max:"100000" jsonschema:"what the outlet covers and for whom"`
		Country      *string        `json:"country,omitempty" jsonschema:"country of the outlet, free text, e.g. US or Germany"`
		Language     *string        `json:"language,omitempty" jsonschema:"main language, free text, e.g. en or German"`
		Topics       []string       `json:"topics,omitempty" jsonschema:"topics the outlet covers, e.g. [\"AI\", \"climate\"]"`
		AudienceSize *int64         `json:"audience_size,omitempty" min:"0" max:"figure" jsonschema:"monthly reach, a whole number of 0 or more"`
		SocialLinks  map[string]any `json:"social_links,omitempty" jsonschema:"social profiles as an object, e.g. {\"x\": \"https://x.com/ledger\"}; keys may not be empty, start with $ or contain a dot"`
	}
	type updateIn struct {
		ID           string         `json:"id" jsonschema:"the outlet's id (UUID)"`
		Name         *string        `json:"name,omitempty" jsonschema:"new name"`
		Type         *string        `json:"type,omitempty" enum:"publication,newspaper,magazine,online,broadcaster,podcast_network,newsletter,blog,wire_service,conference_organizer,award_body,other" jsonschema:"new kind of outlet"`
		Tier         *int           `json:"tier,omitempty" min:"0" max:"3" jsonschema:"new tier, 1 (top) to 3; 0 removes the tier"`
		Website      *string        `json:"website,omitempty" max:"2048" jsonschema:"new home page (full http or https URL); empty string clears it"`
		Description  *string        `json:"description,omitempty" max:"100000" jsonschema:"new description; empty string clears it"`
		Country      *string        `json:"country,omitempty" jsonschema:"new country; empty string clears it"`
		Language     *string        `json:"language,omitempty" jsonschema:"new language; empty string clears it"`
		Topics       []string       `json:"topics,omitempty" jsonschema:"replaces the whole topic list; [] clears it"`
		AudienceSize *int64         `json:"audience_size,omitempty" min:"0" max:"figure" jsonschema:"new monthly reach, 0 or more"`
		SocialLinks  map[string]any `json:"social_links,omitempty" jsonschema:"replaces the whole social_links object; {} clears it"`
	}
	type listIn struct {
		Tier            *int   `json:"tier,omitempty" min:"1" max:"3" jsonschema:"only outlets of this tier"`
		Type            string `json:"type,omitempty" enum:"publication,newspaper,magazine,online,broadcaster,podcast_network,newsletter,blog,wire_service,conference_organizer,award_body,other" jsonschema:"only outlets of this type"`
		Topic           string `json:"topic,omitempty" jsonschema:"only outlets with this topic (whole topic, any case)"`
		Search          string `json:"search,omitempty" jsonschema:"text found in the name or website (literal, any case)"`
		IncludeArchived bool   `json:"include_archived,omitempty" jsonschema:"include archived outlets; default false"`
		Limit           *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum results; default 50"`
		Offset          *int   `json:"offset,omitempty" min:"0" jsonschema:"results to skip; default 0"`
	}
	type idIn struct {
		ID string `json:"id" jsonschema:"the outlet's id (UUID)"`
	}
	type archiveIn struct {
		ID      string `json:"id" jsonschema:"the outlet's id (UUID)"`
		Confirm bool   `json:"confirm,omitempty" jsonschema:"true when the user already agreed to this step: no confirmation is asked"`
	}
	byID := func(fn func(context.Context, string) (any, error)) func(context.Context, *idIn) (any, error) {
		return func(ctx context.Context, in *idIn) (any, error) {
			if err := checkUUID("id", in.ID); err != nil {
				return nil, err
			}
			return fn(ctx, in.ID)
		}
	}
	return []Tool{
		newTool("create_outlet", "Add an outlet (publication, newspaper, podcast network, conference organizer…) to the media directory. Only name is required; type defaults to publication.", create,
			func(ctx context.Context, in *createIn) (any, error) {
				return directory.Of(s).CreateOutlet(ctx, directory.OutletFields{Name: &in.Name, Type: in.Type, Tier: in.Tier, Website: in.Website,
					Description: in.Description, Country: in.Country, Language: in.Language, Topics: in.Topics,
					AudienceSize: in.AudienceSize, SocialLinks: in.SocialLinks})
			}),
		newTool("get_outlet", "One outlet with its channels and its affiliated contacts (trimmed). Archived channels and contacts are included, marked archived: true, after the active ones.", read,
			byID(func(ctx context.Context, id string) (any, error) { return directory.Of(s).OutletDetail(ctx, id) })),
		newTool("list_outlets", "List outlets, newest first, filtered by tier, type, topic or a search of name and website. Archived outlets only with include_archived.", read,
			func(ctx context.Context, in *listIn) (any, error) {
				limit, offset, err := page(in.Limit, in.Offset, defaultLimit)
				if err != nil {
					return nil, err
				}
				p, err := directory.Of(s).ListOutlets(ctx, directory.OutletFilter{Tier: in.Tier, Type: in.Type, Topic: in.Topic, Search: in.Search, IncludeArchived: in.IncludeArchived}, limit, offset)
				if err != nil {
					return nil, err
				}
				return envelope("outlets", p, limit, offset), nil
			}),
		newTool("update_outlet", "Change fields of an active outlet; fields not given are left as they are. Lists and objects (topics, social_links) are replaced whole.", change,
			func(ctx context.Context, in *updateIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return directory.Of(s).UpdateOutlet(ctx, in.ID, directory.OutletFields{Name: in.Name, Type: in.Type, Tier: in.Tier, Website: in.Website,
					Description: in.Description, Country: in.Country, Language: in.Language, Topics: in.Topics,
					AudienceSize: in.AudienceSize, SocialLinks: in.SocialLinks})
			}),
		newTool("archive_outlet", "Archive an outlet (soft delete; restore_outlet undoes it). Its channels, contacts and notes are left as they are and show the outlet as archived.", change,
			func(ctx context.Context, in *archiveIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return directory.Of(s).ArchiveOutlet(ctx, in.ID)
			}),
		newTool("restore_outlet", "Restore an archived outlet.", change,
			byID(func(ctx context.Context, id string) (any, error) { return directory.Of(s).RestoreOutlet(ctx, id) })),
	}
}
