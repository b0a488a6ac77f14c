package tools

import (
	"context"
	"time"

	"outreach/repo"
	"outreach/repo/directory"
)

// Contacts is the Contacts group: journalists, editors, producers and their
// outlet affiliations.
func Contacts(s *repo.Store) []Tool {
	type createIn struct {
		FirstName          string         `json:"first_name" jsonschema:"the contact's first name"`
		LastName           string         `json:"last_name" jsonschema:"the contact's last name"`
		Email              *string        `json:"email,omitempty" jsonschema:"email address; unique among active contacts, whatever its case"`
		Phone              *string        `json:"phone,omitempty" jsonschema:"phone number, free text"`
		Title              *string        `json:"title,omitempty" jsonschema:"job title, e.g. Senior Technology Reporter"`
		Bio                *string        `json:"bio,omitempty" max:"100000" jsonschema:"short biography"`
		IsFreelance        *bool          `json:"is_freelance,omitempty" jsonschema:"true for a freelancer; default false"`
		SocialLinks        map[string]any `json:"social_links,omitempty" jsonschema:"social profiles as an object, e.g. {\"linkedin\": \"https://…\"}; keys may not be empty, start with $ or contain a dot"`
		Preferences        map[string]any `json:"preferences,omitempty" jsonschema:"how they like to be pitched, as an object, e.g. {\"channel\": \"email\", \"embargoes\": true}; same key rules as social_links"`
		Beats              []string       `json:"beats,omitempty" jsonschema:"subjects they cover, e.g. [\"AI\", \"privacy\"]"`
		Location           *string        `json:"location,omitempty" jsonschema:"where they are based, free text"`
		Timezone           *string        `json:"timezone,omitempty" jsonschema:"IANA time zone, e.g. Europe/London"`
		DoNotContact       *bool          `json:"do_not_contact,omitempty" jsonschema:"true if they must not be contacted; then do_not_contact_reason is required"`
		DoNotContactReason *string        `json:"do_not_contact_reason,omitempty" jsonschema:"why they must not be contacted; only with do_not_contact true"`
		OwnerID            *string        `json:"owner_id,omitempty" jsonschema:"the team member who owns the relationship with this contact (a user id, see list_users)"`
		OutletIDs          []string       `json:"outlet_ids,omitempty" jsonschema:"outlets to affiliate the contact with at once (UUIDs of active outlets); the first becomes the primary affiliation"`
	}
	type updateIn struct {
		ID                 string         `json:"id" jsonschema:"the contact's id (UUID)"`
		FirstName          *string        `json:"first_name,omitempty" jsonschema:"new first name"`
		LastName           *string        `json:"last_name,omitempty" jsonschema:"new last name"`
		Email              *string        `json:"email,omitempty" jsonschema:"new email address (unique among active contacts); empty string clears it"`
		Phone              *string        `json:"phone,omitempty" jsonschema:"new phone number; empty string clears it"`
		Title              *string        `json:"title,omitempty" jsonschema:"new job title; empty string clears it"`
		Bio                *string        `json:"bio,omitempty" max:"100000" jsonschema:"new biography; empty string clears it"`
		IsFreelance        *bool          `json:"is_freelance,omitempty" jsonschema:"whether they are freelance"`
		SocialLinks        map[string]any `json:"social_links,omitempty" jsonschema:"replaces the whole social_links object; {} clears it"`
		Preferences        map[string]any `json:"preferences,omitempty" jsonschema:"replaces the whole preferences object; {} clears it"`
		Beats              []string       `json:"beats,omitempty" jsonschema:"replaces the whole beat list; [] clears it"`
		Location           *string        `json:"location,omitempty" jsonschema:"new location; empty string clears it"`
		Timezone           *string        `json:"timezone,omitempty" jsonschema:"new IANA time zone; empty string clears it"`
		DoNotContact       *bool          `json:"do_not_contact,omitempty" jsonschema:"true needs a do_not_contact_reason (given now or already stored); false clears the reason"`
		DoNotContactReason *string        `json:"do_not_contact_reason,omitempty" jsonschema:"why they must not be contacted; only while do_not_contact is true"`
		OwnerID            *string        `json:"owner_id,omitempty" jsonschema:"the team member who owns the relationship (a user id); empty string clears it"`
	}
	type listIn struct {
		Search          string `json:"search,omitempty" jsonschema:"text found in the full name or email (literal, any case)"`
		OutletID        string `json:"outlet_id,omitempty" jsonschema:"only contacts affiliated with this outlet (UUID)"`
		Beat            string `json:"beat,omitempty" jsonschema:"only contacts with this beat (whole beat, any case)"`
		IsFreelance     *bool  `json:"is_freelance,omitempty" jsonschema:"only freelancers (true) or only staff (false)"`
		IncludeArchived bool   `json:"include_archived,omitempty" jsonschema:"include archived contacts; default false"`
		Limit           *int   `json:"limit,omitempty" min:"1" max:"page" jsonschema:"maximum results; default 50"`
		Offset          *int   `json:"offset,omitempty" min:"0" jsonschema:"results to skip; default 0"`
	}
	type addIn struct {
		ContactID string `json:"contact_id" jsonschema:"the contact's id (UUID)"`
		OutletID  string `json:"outlet_id" jsonschema:"the outlet's id (UUID of an active outlet)"`
		Role      string `json:"role,omitempty" jsonschema:"their role at the outlet, e.g. staff writer, contributor, host"`
		IsPrimary bool   `json:"is_primary,omitempty" jsonschema:"make this the contact's primary affiliation (the others stop being primary); default false"`
		StartedOn string `json:"started_on,omitempty" jsonschema:"when the affiliation began (YYYY-MM-DD or ISO datetime)"`
		EndedOn   string `json:"ended_on,omitempty" jsonschema:"when it ended, for a past affiliation (YYYY-MM-DD or ISO datetime)"`
	}
	type removeIn struct {
		ID string `json:"id" jsonschema:"the affiliation's id (UUID), as get_contact shows it in outlets[].affiliation_id"`
	}
	type idIn struct {
		ID string `json:"id" jsonschema:"the contact's id (UUID)"`
	}
	type archiveIn struct {
		ID      string `json:"id" jsonschema:"the contact's id (UUID)"`
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
		newTool("create_contact", "Add a contact (journalist, editor, producer). first_name and last_name are required; the email address must not belong to another active contact. outlet_ids affiliates them at once.", create,
			func(ctx context.Context, in *createIn) (any, error) {
				if err := checkUUIDs("outlet_ids", in.OutletIDs); err != nil {
					return nil, err
				}
				return directory.Of(s).CreateContact(ctx, directory.ContactFields{FirstName: &in.FirstName, LastName: &in.LastName, Email: in.Email,
					Phone: in.Phone, Title: in.Title, Bio: in.Bio, IsFreelance: in.IsFreelance, SocialLinks: in.SocialLinks,
					Preferences: in.Preferences, Beats: in.Beats, Location: in.Location, Timezone: in.Timezone,
					DoNotContact: in.DoNotContact, DoNotContactReason: in.DoNotContactReason, OwnerID: in.OwnerID}, in.OutletIDs)
			}),
		newTool("get_contact", "One contact with their outlets (each affiliation joined with the outlet's name, type and tier; archived outlets marked outlet_archived: true) and the opportunities that name them.", read,
			byID(func(ctx context.Context, id string) (any, error) { return directory.Of(s).ContactDetail(ctx, id) })),
		newTool("list_contacts", "List contacts, newest first, filtered by a search of full name and email, an outlet they are affiliated with, a beat, or freelance status. Archived contacts only with include_archived.", read,
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
				p, err := directory.Of(s).ListContacts(ctx, directory.ContactFilter{Search: in.Search, OutletID: in.OutletID, Beat: in.Beat,
					IsFreelance: in.IsFreelance, IncludeArchived: in.IncludeArchived}, limit, offset)
				if err != nil {
					return nil, err
				}
				return envelope("contacts", p, limit, offset), nil
			}),
		newTool("update_contact", "Change fields of an active contact; fields not given are left as they are. Clearing do_not_contact needs a key with the admin scope. Lists and objects (beats, social_links, preferences) are replaced whole. Affiliations change through add_contact_outlet and remove_contact_outlet.", change,
			func(ctx context.Context, in *updateIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return directory.Of(s).UpdateContact(ctx, in.ID, directory.ContactFields{FirstName: in.FirstName, LastName: in.LastName, Email: in.Email,
					Phone: in.Phone, Title: in.Title, Bio: in.Bio, IsFreelance: in.IsFreelance, SocialLinks: in.SocialLinks,
					Preferences: in.Preferences, Beats: in.Beats, Location: in.Location, Timezone: in.Timezone,
					DoNotContact: in.DoNotContact, DoNotContactReason: in.DoNotContactReason, OwnerID: in.OwnerID})
			}),
		newTool("add_contact_outlet", "Affiliate a contact with an outlet, with a role. is_primary makes it the primary affiliation. The same outlet twice is a conflict naming the existing affiliation. Returns the new affiliation and the contact.", change,
			func(ctx context.Context, in *addIn) (any, error) {
				if err := checkUUID("contact_id", in.ContactID); err != nil {
					return nil, err
				}
				if err := checkUUID("outlet_id", in.OutletID); err != nil {
					return nil, err
				}
				a := directory.AffiliationInput{ContactID: in.ContactID, OutletID: in.OutletID, Role: in.Role, IsPrimary: in.IsPrimary}
				for _, d := range []struct {
					field, v string
					dst      **time.Time
				}{{"started_on", in.StartedOn, &a.StartedOn}, {"ended_on", in.EndedOn, &a.EndedOn}} {
					if d.v == "" {
						continue
					}
					t, err := parseTime(d.field, d.v, false)
					if err != nil {
						return nil, err
					}
					*d.dst = &t
				}
				c, aff, err := directory.Of(s).AddContactOutlet(ctx, a)
				if err != nil {
					return nil, err
				}
				return map[string]any{"affiliation": aff, "contact": c}, nil
			}),
		newTool("remove_contact_outlet", "Remove one affiliation (by its id) from its contact. The change log keeps it, so rollback_change brings it back; to record a past affiliation instead, add it with ended_on. Returns the removed affiliation and the contact.", change,
			func(ctx context.Context, in *removeIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				c, aff, err := directory.Of(s).RemoveContactOutlet(ctx, in.ID)
				if err != nil {
					return nil, err
				}
				return map[string]any{"removed": aff, "contact": c}, nil
			}),
		newTool("archive_contact", "Archive a contact (soft delete; restore_contact undoes it). Their email address becomes free for another active contact.", change,
			func(ctx context.Context, in *archiveIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				return directory.Of(s).ArchiveContact(ctx, in.ID)
			}),
		newTool("restore_contact", "Restore an archived contact; a conflict if an active contact has taken their email address meanwhile.", change,
			byID(func(ctx context.Context, id string) (any, error) { return directory.Of(s).RestoreContact(ctx, id) })),
	}
}
