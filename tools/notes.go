package tools

import (
	"context"

	"outreach/repo"
	"outreach/repo/dossiers"
	"outreach/repo/notes"
)

// Notes is the Notes group, exactly as the specification names it: notes,
// their links, and the unified interaction log.
func Notes(s *repo.Store) []Tool {
	type createIn struct {
		Type           string   `json:"type,omitempty" enum:"general,meeting,phone_call,event,research,other" jsonschema:"note type; default general"`
		Title          string   `json:"title,omitempty" jsonschema:"short title or subject"`
		Content        string   `json:"content,omitempty" max:"100000" jsonschema:"the note's body; may be empty"`
		OccurredAt     string   `json:"occurred_at,omitempty" jsonschema:"when it happened: ISO datetime or YYYY-MM-DD (midnight UTC); default now"`
		ContactIDs     []string `json:"contact_ids,omitempty" jsonschema:"contacts to link (UUIDs)"`
		OutletIDs      []string `json:"outlet_ids,omitempty" jsonschema:"outlets to link (UUIDs)"`
		OpportunityIDs []string `json:"opportunity_ids,omitempty" jsonschema:"opportunities to link (UUIDs)"`
		ChannelIDs     []string `json:"channel_ids,omitempty" jsonschema:"channels to link (UUIDs)"`
	}
	type idIn struct {
		ID string `json:"id" jsonschema:"the note's id (UUID)"`
	}
	type listIn struct {
		Type            string `json:"type,omitempty" enum:"general,meeting,phone_call,event,research,other" jsonschema:"only notes of this type"`
		ContactID       string `json:"contact_id,omitempty" jsonschema:"only notes linked to this contact (UUID)"`
		OutletID        string `json:"outlet_id,omitempty" jsonschema:"only notes linked to this outlet (UUID)"`
		OpportunityID   string `json:"opportunity_id,omitempty" jsonschema:"only notes linked to this opportunity (UUID)"`
		Search          string `json:"search,omitempty" jsonschema:"full-text search over title and content: case-insensitive, matched literally"`
		IncludeArchived bool   `json:"include_archived,omitempty" jsonschema:"include archived notes; default false"`
		Limit           *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum results; default 50"`
		Offset          *int   `json:"offset,omitempty" min:"0" jsonschema:"results to skip; default 0"`
	}
	type updateIn struct {
		ID         string  `json:"id" jsonschema:"the note's id (UUID)"`
		Type       *string `json:"type,omitempty" enum:"general,meeting,phone_call,event,research,other" jsonschema:"new note type"`
		Title      *string `json:"title,omitempty" jsonschema:"new title"`
		Content    *string `json:"content,omitempty" max:"100000" jsonschema:"new body; may be empty"`
		OccurredAt *string `json:"occurred_at,omitempty" jsonschema:"new time it happened: ISO datetime or YYYY-MM-DD"`
	}
	type addLinkIn struct {
		NoteID        string `json:"note_id" jsonschema:"the note's id (UUID)"`
		ContactID     string `json:"contact_id,omitempty" jsonschema:"a contact to link (UUID)"`
		OutletID      string `json:"outlet_id,omitempty" jsonschema:"an outlet to link (UUID)"`
		OpportunityID string `json:"opportunity_id,omitempty" jsonschema:"an opportunity to link (UUID)"`
		ChannelID     string `json:"channel_id,omitempty" jsonschema:"a channel to link (UUID)"`
	}
	type removeLinkIn struct {
		ID string `json:"id" jsonschema:"the note link's own id (UUID), as get_note shows it; not the note's id"`
	}
	type logIn struct {
		ContactID     string `json:"contact_id,omitempty" jsonschema:"restrict to this contact (UUID)"`
		OutletID      string `json:"outlet_id,omitempty" jsonschema:"restrict to this outlet (UUID)"`
		OpportunityID string `json:"opportunity_id,omitempty" jsonschema:"restrict to this opportunity (UUID)"`
		Since         string `json:"since,omitempty" jsonschema:"only entries on or after this date (YYYY-MM-DD or ISO datetime)"`
		Until         string `json:"until,omitempty" jsonschema:"only entries up to this date; a bare date includes that whole day"`
		Limit         *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum entries; default 50"`
	}
	return []Tool{
		newTool("create_note", "Create a note (meeting recap, call log, research, observation) linked to at least one contact, outlet, opportunity or channel.", create,
			func(ctx context.Context, in *createIn) (any, error) {
				nn := notes.NewNote{Type: in.Type, Title: in.Title, Content: in.Content,
					Links: notes.LinkTargets{ContactIDs: in.ContactIDs, OutletIDs: in.OutletIDs, OpportunityIDs: in.OpportunityIDs, ChannelIDs: in.ChannelIDs}}
				if in.Type != "" {
					if err := checkEnum("type", in.Type, notes.NoteTypes); err != nil {
						return nil, err
					}
				}
				for field, ids := range map[string][]string{"contact_ids": in.ContactIDs, "outlet_ids": in.OutletIDs, "opportunity_ids": in.OpportunityIDs, "channel_ids": in.ChannelIDs} {
					if err := checkUUIDs(field, ids); err != nil {
						return nil, err
					}
				}
				if in.OccurredAt != "" {
					t, err := parseTime("occurred_at", in.OccurredAt, false)
					if err != nil {
						return nil, err
					}
					nn.OccurredAt = &t
				}
				n, err := notes.Of(s).CreateNote(ctx, nn)
				if err != nil {
					return nil, err
				}
				return noteView(ctx, s, n), nil
			}),
		newTool("get_note", "One note with all its links to contacts, outlets, opportunities and channels (each link with its own id and the linked record's name).", read,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				n, err := notes.Of(s).Note(ctx, in.ID)
				if err != nil {
					return nil, err
				}
				return noteView(ctx, s, n), nil
			}),
		newTool("list_notes", "List notes, newest first (by occurred_at). Archived notes are left out unless include_archived is true.", read,
			func(ctx context.Context, in *listIn) (any, error) {
				limit, offset, err := page(in.Limit, in.Offset, defaultLimit)
				if err != nil {
					return nil, err
				}
				if in.Type != "" {
					if err := checkEnum("type", in.Type, notes.NoteTypes); err != nil {
						return nil, err
					}
				}
				if err := checkOptionalUUIDs("contact_id", in.ContactID, "outlet_id", in.OutletID, "opportunity_id", in.OpportunityID); err != nil {
					return nil, err
				}
				p, err := notes.Of(s).ListNotes(ctx, notes.NoteFilter{Type: in.Type, ContactID: in.ContactID, OutletID: in.OutletID,
					OpportunityID: in.OpportunityID, Search: in.Search, IncludeArchived: in.IncludeArchived}, limit, offset)
				if err != nil {
					return nil, err
				}
				return envelope("notes", p, limit, offset), nil
			}),
		newTool("update_note", "Change a note's type, title, content or occurred_at. Fields not given stay as they are. An archived note must be restored first.", change,
			func(ctx context.Context, in *updateIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				if in.Type == nil && in.Title == nil && in.Content == nil && in.OccurredAt == nil {
					return nil, repo.Invalid("id", "nothing to update: give at least one of type, title, content, occurred_at")
				}
				c := notes.NoteChanges{Type: in.Type, Title: in.Title, Content: in.Content}
				if in.Type != nil {
					if err := checkEnum("type", *in.Type, notes.NoteTypes); err != nil {
						return nil, err
					}
				}
				if in.OccurredAt != nil {
					t, err := parseTime("occurred_at", *in.OccurredAt, false)
					if err != nil {
						return nil, err
					}
					c.OccurredAt = &t
				}
				n, err := notes.Of(s).UpdateNote(ctx, in.ID, c)
				if err != nil {
					return nil, err
				}
				return noteView(ctx, s, n), nil
			}),
		newTool("add_note_link", "Link an existing note to more entities: each of contact_id, outlet_id, opportunity_id, channel_id given becomes one link. An entity already linked is not linked twice.", change,
			func(ctx context.Context, in *addLinkIn) (any, error) {
				if err := checkUUID("note_id", in.NoteID); err != nil {
					return nil, err
				}
				var t notes.LinkTargets
				for _, x := range []struct {
					field, id string
					into      *[]string
				}{{"contact_id", in.ContactID, &t.ContactIDs}, {"outlet_id", in.OutletID, &t.OutletIDs}, {"opportunity_id", in.OpportunityID, &t.OpportunityIDs}, {"channel_id", in.ChannelID, &t.ChannelIDs}} {
					if x.id == "" {
						continue
					}
					if err := checkUUID(x.field, x.id); err != nil {
						return nil, err
					}
					*x.into = []string{x.id}
				}
				n, added, err := notes.Of(s).AddNoteLinks(ctx, in.NoteID, t)
				if err != nil {
					return nil, err
				}
				v := noteView(ctx, s, n)
				v.Added = added
				return v, nil
			}),
		newTool("remove_note_link", "Remove one link from a note, by the link's own id. A note keeps at least one link: removing its last link is refused.", change,
			func(ctx context.Context, in *removeLinkIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				n, err := notes.Of(s).RemoveNoteLink(ctx, in.ID)
				if err != nil {
					return nil, err
				}
				return noteView(ctx, s, n), nil
			}),
		newTool("archive_note", "Archive (soft-delete) a note. It can be restored at any time with restore_note.", change,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				n, err := notes.Of(s).ArchiveNote(ctx, in.ID)
				if err != nil {
					return nil, err
				}
				return noteView(ctx, s, n), nil
			}),
		newTool("restore_note", "Restore an archived note.", change,
			func(ctx context.Context, in *idIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				n, err := notes.Of(s).RestoreNote(ctx, in.ID)
				if err != nil {
					return nil, err
				}
				return noteView(ctx, s, n), nil
			}),
		newTool("get_interaction_log", "A merged timeline of notes, emails, coverage and sent pitches (one entry per recipient, id <pitch id>:<contact id>) for a contact, an outlet or an opportunity, newest first. When several ids are given, entries must match all of them.", read,
			func(ctx context.Context, in *logIn) (any, error) {
				limit, _, err := page(in.Limit, nil, defaultLimit)
				if err != nil {
					return nil, err
				}
				if in.ContactID == "" && in.OutletID == "" && in.OpportunityID == "" {
					return nil, repo.Invalid("contact_id", "give at least one of contact_id, outlet_id, opportunity_id")
				}
				q := dossiers.InteractionQuery{ContactID: in.ContactID, OutletID: in.OutletID, OpportunityID: in.OpportunityID, Limit: limit}
				if err := checkOptionalUUIDs("contact_id", in.ContactID, "outlet_id", in.OutletID, "opportunity_id", in.OpportunityID); err != nil {
					return nil, err
				}
				if q.Since, err = optionalTime("since", in.Since, false); err != nil {
					return nil, err
				}
				if q.Until, err = optionalTime("until", in.Until, true); err != nil {
					return nil, err
				}
				if q.Since != nil && q.Until != nil && q.Until.Before(*q.Since) {
					return nil, repo.Invalid("until", "is before since")
				}
				return dossiers.Of(s).InteractionLog(ctx, q)
			}),
	}
}

// noteResult is a note as the tools show it: its links carry the linked
// record's kind and name.
type noteResult struct {
	*notes.Note
	Links []linkResult     `json:"links"`
	Added []notes.NoteLink `json:"added,omitempty"`
}

type linkResult struct {
	notes.NoteLink
	Entity notes.LinkedEntity `json:"entity"`
}

func noteView(ctx context.Context, s *repo.Store, n *notes.Note) noteResult {
	v := noteResult{Note: n, Links: make([]linkResult, 0, len(n.Links))}
	for _, l := range n.Links {
		coll, id := notes.LinkEntity(l)
		v.Links = append(v.Links, linkResult{NoteLink: l, Entity: notes.Of(s).Entity(ctx, coll, id)})
	}
	return v
}
