package tools

import (
	"context"
	"encoding/json"

	"outreach/repo"
	"outreach/repo/directory"
)

// Channels is the Channels group: the channels of an outlet (website,
// newsletter, podcast and similar).
func Channels(s *repo.Store) []Tool {
	type createIn struct {
		OutletID    string         `json:"outlet_id" jsonschema:"the outlet the channel belongs to (UUID of an active outlet); it cannot change later"`
		Type        string         `json:"type" enum:"website,newsletter,podcast,tv_broadcast,print,event,award" jsonschema:"kind of channel"`
		Name        *string        `json:"name,omitempty" jsonschema:"the channel's name, e.g. Morning Briefing"`
		Description *string        `json:"description,omitempty" max:"100000" jsonschema:"what the channel is"`
		URL         *string        `json:"url,omitempty" max:"2048" jsonschema:"its address, a full http or https URL"`
		Frequency   *string        `json:"frequency,omitempty" enum:"daily,weekly,monthly,quarterly,annual" jsonschema:"how often it publishes"`
		Attributes  map[string]any `json:"attributes,omitempty" jsonschema:"other facts as an object, e.g. {\"subscriber_count\": 500000}; keys may not be empty, start with $ or contain a dot"`
	}
	type updateIn struct {
		ID          string         `json:"id" jsonschema:"the channel's id (UUID)"`
		Type        *string        `json:"type,omitempty" enum:"website,newsletter,podcast,tv_broadcast,print,event,award" jsonschema:"new kind of channel"`
		Name        *string        `json:"name,omitempty" jsonschema:"new name; empty string clears it"`
		Description *string        `json:"description,omitempty" max:"100000" jsonschema:"new description; empty string clears it"`
		URL         *string        `json:"url,omitempty" max:"2048" jsonschema:"new address (full http or https URL); empty string clears it"`
		Frequency   *string        `json:"frequency,omitempty" enum:"daily,weekly,monthly,quarterly,annual," jsonschema:"new frequency; empty string clears it"`
		Attributes  map[string]any `json:"attributes,omitempty" jsonschema:"replaces the whole attributes object; {} clears it"`
	}
	type listIn struct {
		OutletID        string `json:"outlet_id,omitempty" jsonschema:"only channels of this outlet (UUID)"`
		Type            string `json:"type,omitempty" enum:"website,newsletter,podcast,tv_broadcast,print,event,award" jsonschema:"only channels of this type"`
		IncludeArchived bool   `json:"include_archived,omitempty" jsonschema:"include archived channels; default false"`
		Limit           *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum results; default 50"`
		Offset          *int   `json:"offset,omitempty" min:"0" jsonschema:"results to skip; default 0"`
	}
	type idIn struct {
		ID string `json:"id" jsonschema:"the channel's id (UUID)"`
	}
	byID := func(fn func(context.Context, string) (any, error)) func(context.Context, *idIn) (any, error) {
		return func(ctx context.Context, in *idIn) (any, error) {
			if err := checkUUID("id", in.ID); err != nil {
				return nil, err
			}
			return fn(ctx, in.ID)
		}
	}
	update := newTool("update_channel", "Change fields of an active channel; fields not given are left as they are. attributes is replaced whole. A channel's outlet_id cannot change: create a new channel on the other outlet and archive this one.", change,
		func(ctx context.Context, in *updateIn) (any, error) {
			if err := checkUUID("id", in.ID); err != nil {
				return nil, err
			}
			return directory.Of(s).UpdateChannel(ctx, in.ID, directory.ChannelFields{Type: in.Type, Name: in.Name, Description: in.Description,
				URL: in.URL, Frequency: in.Frequency, Attributes: in.Attributes})
		})
	update.Handle = refuseOutletID(update.Handle)
	return []Tool{
		newTool("create_channel", "Add a channel (website, newsletter, podcast, TV broadcast, print edition, event, award) to an active outlet.", create,
			func(ctx context.Context, in *createIn) (any, error) {
				if err := checkUUID("outlet_id", in.OutletID); err != nil {
					return nil, err
				}
				return directory.Of(s).CreateChannel(ctx, in.OutletID, directory.ChannelFields{Type: &in.Type, Name: in.Name, Description: in.Description,
					URL: in.URL, Frequency: in.Frequency, Attributes: in.Attributes})
			}),
		newTool("get_channel", "One channel with its parent outlet (trimmed; an archived outlet is shown with archived: true).", read,
			byID(func(ctx context.Context, id string) (any, error) { return directory.Of(s).ChannelDetail(ctx, id) })),
		newTool("list_channels", "List channels, newest first, filtered by outlet and type. Archived channels only with include_archived.", read,
			func(ctx context.Context, in *listIn) (any, error) {
				limit, offset, err := page(in.Limit, in.Offset, defaultLimit)
				if err != nil {
					return nil, err
				}
				if in.OutletID != "" {
					if err := checkUUID("outlet_id", in.OutletID); err != nil {
						return nil, err
					}
				}
				p, err := directory.Of(s).ListChannels(ctx, directory.ChannelFilter{OutletID: in.OutletID, Type: in.Type, IncludeArchived: in.IncludeArchived}, limit, offset)
				if err != nil {
					return nil, err
				}
				return envelope("channels", p, limit, offset), nil
			}),
		update,
		newTool("archive_channel", "Archive a channel (soft delete; restore_channel undoes it).", change,
			byID(func(ctx context.Context, id string) (any, error) { return directory.Of(s).ArchiveChannel(ctx, id) })),
		newTool("restore_channel", "Restore an archived channel, even when its outlet is archived.", change,
			byID(func(ctx context.Context, id string) (any, error) { return directory.Of(s).RestoreChannel(ctx, id) })),
	}
}

// refuseOutletID answers an update_channel that tries to move the channel
// with a message saying why, rather than the generic unknown-argument one.
func refuseOutletID(h func(context.Context, json.RawMessage) (any, error)) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var fields map[string]json.RawMessage
		if json.Unmarshal(raw, &fields) == nil {
			if _, ok := fields["outlet_id"]; ok {
				return nil, repo.Invalid("outlet_id", "a channel belongs to one outlet for good and cannot be moved; create a channel on the other outlet and archive this one")
			}
		}
		return h(ctx, raw)
	}
}
