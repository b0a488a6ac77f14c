package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"outreach/integration/testenv"
	"outreach/repo"
)

// affiliation is a contact's affiliation as the tests read it.
type affiliation struct {
	ID        string  `json:"id"`
	OutletID  string  `json:"outlet_id"`
	Role      string  `json:"role"`
	IsPrimary bool    `json:"is_primary"`
	StartedOn *string `json:"started_on"`
	EndedOn   *string `json:"ended_on"`
}

// contact is a contact as the tests read it.
type contact struct {
	ID                 string         `json:"id"`
	FirstName          string         `json:"first_name"`
	LastName           string         `json:"last_name"`
	Name               string         `json:"name"`
	Email              string         `json:"email"`
	Phone              string         `json:"phone"`
	Title              string         `json:"title"`
	Bio                string         `json:"bio"`
	IsFreelance        bool           `json:"is_freelance"`
	SocialLinks        map[string]any `json:"social_links"`
	Preferences        map[string]any `json:"preferences"`
	Beats              []string       `json:"beats"`
	Location           string         `json:"location"`
	Timezone           string         `json:"timezone"`
	DoNotContact       bool           `json:"do_not_contact"`
	DoNotContactReason string         `json:"do_not_contact_reason"`
	Affiliations       []affiliation  `json:"affiliations"`
	ArchivedAt         *string        `json:"archived_at"`
}

func TestCreateGetUpdateContact(t *testing.T) {
	env := testenv.New(t)
	c := env.Client(env.AdminKey, "contact-session")
	o1 := testenv.ID(t, c.Must("create_outlet", M{"name": "Ledger", "tier": 1, "type": "newspaper"}, nil))
	o2 := testenv.ID(t, c.Must("create_outlet", M{"name": "Cast", "tier": 2, "type": "podcast_network"}, nil))

	var min contact
	raw := c.Must("create_contact", M{"first_name": " Ann ", "last_name": "Lee"}, &min)
	want := contact{ID: min.ID, FirstName: "Ann", LastName: "Lee", Name: "Ann Lee", Beats: []string{}, Affiliations: []affiliation{}}
	if diff := cmp.Diff(want, min); diff != "" {
		t.Errorf("minimal contact (-want +got):\n%s", diff)
	}
	if strings.Contains(string(raw), "email_lower") {
		t.Errorf("the internal email_lower field is shown: %s", raw)
	}

	var full contact
	c.Must("create_contact", M{"first_name": "Jane", "last_name": "Doe", "email": "Jane.Doe@Example.com", "phone": "+1 555 0100",
		"title": "Tech Reporter", "bio": "Covers AI", "is_freelance": true, "social_links": M{"x": "@jane"},
		"preferences": M{"channel": "email", "embargoes": true}, "beats": []string{"AI", "Privacy"}, "location": "London",
		"timezone": "Europe/London", "outlet_ids": []string{o1, o2}}, &full)
	if len(full.Affiliations) != 2 {
		t.Fatalf("affiliations %+v; want 2", full.Affiliations)
	}
	want = contact{ID: full.ID, FirstName: "Jane", LastName: "Doe", Name: "Jane Doe", Email: "Jane.Doe@Example.com", Phone: "+1 555 0100",
		Title: "Tech Reporter", Bio: "Covers AI", IsFreelance: true, SocialLinks: map[string]any{"x": "@jane"},
		Preferences: map[string]any{"channel": "email", "embargoes": true}, Beats: []string{"AI", "Privacy"}, Location: "London",
		Timezone: "Europe/London", Affiliations: []affiliation{
			{ID: full.Affiliations[0].ID, OutletID: o1, IsPrimary: true},
			{ID: full.Affiliations[1].ID, OutletID: o2},
		}}
	if diff := cmp.Diff(want, full); diff != "" {
		t.Errorf("full contact (-want +got):\n%s", diff)
	}

	var got struct {
		contact
		Outlets []struct {
			AffiliationID  string `json:"affiliation_id"`
			OutletID       string `json:"outlet_id"`
			Name           string `json:"name"`
			Type           string `json:"type"`
			Tier           int    `json:"tier"`
			OutletArchived bool   `json:"outlet_archived"`
			Role           string `json:"role"`
			IsPrimary      bool   `json:"is_primary"`
		} `json:"outlets"`
		Opportunities []any `json:"opportunities"`
	}
	raw = c.Must("get_contact", M{"id": full.ID}, &got)
	if got.Affiliations != nil {
		t.Errorf("get_contact repeats the raw affiliations: %s", raw)
	}
	got.Affiliations = want.Affiliations
	if diff := cmp.Diff(want, got.contact); diff != "" {
		t.Errorf("get_contact (-want +got):\n%s", diff)
	}
	type co = struct {
		AffiliationID  string `json:"affiliation_id"`
		OutletID       string `json:"outlet_id"`
		Name           string `json:"name"`
		Type           string `json:"type"`
		Tier           int    `json:"tier"`
		OutletArchived bool   `json:"outlet_archived"`
		Role           string `json:"role"`
		IsPrimary      bool   `json:"is_primary"`
	}
	wantOutlets := []co{
		{AffiliationID: full.Affiliations[0].ID, OutletID: o1, Name: "Ledger", Type: "newspaper", Tier: 1, IsPrimary: true},
		{AffiliationID: full.Affiliations[1].ID, OutletID: o2, Name: "Cast", Type: "podcast_network", Tier: 2},
	}
	gotOutlets := []co{}
	for _, o := range got.Outlets {
		gotOutlets = append(gotOutlets, co(o))
	}
	if diff := cmp.Diff(wantOutlets, gotOutlets); diff != "" {
		t.Errorf("get_contact outlets (-want +got):\n%s", diff)
	}
	if got.Opportunities == nil || len(got.Opportunities) != 0 {
		t.Errorf("opportunities %v; want an empty list", got.Opportunities)
	}

	// Updates: fields set, cleared, name kept in step.
	var upd contact
	c.Must("update_contact", M{"id": full.ID, "last_name": "Smith", "email": "jane@smith.example", "phone": "", "beats": []string{},
		"preferences": M{}, "is_freelance": false, "timezone": ""}, &upd)
	want.LastName, want.Name, want.Email, want.Phone, want.Beats, want.Preferences, want.IsFreelance, want.Timezone =
		"Smith", "Jane Smith", "jane@smith.example", "", []string{}, nil, false, ""
	if diff := cmp.Diff(want, upd); diff != "" {
		t.Errorf("updated contact (-want +got):\n%s", diff)
	}
	// The same address in another case is the contact's own: no conflict.
	c.Must("update_contact", M{"id": full.ID, "email": "JANE@smith.example"}, &upd)

	cs := changesOf(t, c, full.ID)
	if diff := cmp.Diff([]string{"contacts/update/update_contact", "contacts/update/update_contact", "contacts/create/create_contact"}, actions(cs)); diff != "" {
		t.Fatalf("changes (-want +got):\n%s", diff)
	}
	if cs[1].Before["last_name"] != "Doe" || cs[1].After["last_name"] != "Smith" || cs[1].Before["name"] != "Jane Doe" ||
		cs[1].After["name"] != "Jane Smith" || cs[1].After["email_lower"] != "jane@smith.example" || cs[1].After["phone"] != nil {
		t.Errorf("update entry: before %v after %v", cs[1].Before, cs[1].After)
	}
	if cs[0].Before["email"] != "jane@smith.example" || cs[0].After["email"] != "JANE@smith.example" {
		t.Errorf("email case entry: before %v after %v", cs[0].Before["email"], cs[0].After["email"])
	}
}

func TestContactEmailIsUniqueAmongActiveContacts(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	first := testenv.ID(t, c.Must("create_contact", M{"first_name": "A", "last_name": "One", "email": "press@ledger.example"}, nil))
	other := testenv.ID(t, c.Must("create_contact", M{"first_name": "B", "last_name": "Two", "email": "b@ledger.example"}, nil))
	refuse(t, c, []refusal{
		{"same address other case", "create_contact", M{"first_name": "C", "last_name": "Three", "email": "Press@Ledger.EXAMPLE"}, repo.CodeConflict, "email", first},
		{"update to a taken address", "update_contact", M{"id": other, "email": "PRESS@ledger.example"}, repo.CodeConflict, "email", first},
	})
	// Archiving frees the address; restoring while it is taken is a conflict.
	c.Must("archive_contact", M{"id": first}, nil)
	second := testenv.ID(t, c.Must("create_contact", M{"first_name": "C", "last_name": "Three", "email": "press@LEDGER.example"}, nil))
	e := c.Fail("restore_contact", M{"id": first}, repo.CodeConflict)
	if !strings.Contains(e.Message, second) {
		t.Errorf("restore conflict %q does not name %s", e.Message, second)
	}
	// Once the address is free again, the restore goes through.
	c.Must("update_contact", M{"id": second, "email": ""}, nil)
	var r contact
	c.Must("restore_contact", M{"id": first}, &r)
	if r.ArchivedAt != nil || r.Email != "press@ledger.example" {
		t.Errorf("restored contact %+v", r)
	}
	// Contacts without an address never conflict.
	c.Must("create_contact", M{"first_name": "D", "last_name": "Four"}, nil)
	c.Must("create_contact", M{"first_name": "E", "last_name": "Five", "email": ""}, nil)
}

func TestContactRefusals(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	o := testenv.ID(t, c.Must("create_outlet", M{"name": "Ledger"}, nil))
	id := testenv.ID(t, c.Must("create_contact", M{"first_name": "Ann", "last_name": "Lee"}, nil))
	archived := testenv.ID(t, c.Must("create_contact", M{"first_name": "Old", "last_name": "Timer"}, nil))
	c.Must("archive_contact", M{"id": archived}, nil)
	unknown := "0b6c8a8e-2f43-4d8e-a1b2-3c4d5e6f7a8b"
	refuse(t, c, []refusal{
		{"no first name", "create_contact", M{"last_name": "Lee"}, repo.CodeInvalid, "first_name", "required"},
		{"no last name", "create_contact", M{"first_name": "Ann"}, repo.CodeInvalid, "last_name", "required"},
		{"blank last name", "create_contact", M{"first_name": "Ann", "last_name": " "}, repo.CodeInvalid, "last_name", "empty"},
		{"bad email", "create_contact", M{"first_name": "A", "last_name": "B", "email": "not-an-address"}, repo.CodeInvalid, "email", "jane@example.com"},
		{"email with a name", "create_contact", M{"first_name": "A", "last_name": "B", "email": "Ann <ann@x.example>"}, repo.CodeInvalid, "email", "bare address"},
		{"bad timezone", "create_contact", M{"first_name": "A", "last_name": "B", "timezone": "Mars/Olympus"}, repo.CodeInvalid, "timezone", "Europe/London"},
		{"local timezone", "create_contact", M{"first_name": "A", "last_name": "B", "timezone": "Local"}, repo.CodeInvalid, "timezone", "IANA"},
		{"dnc without reason", "create_contact", M{"first_name": "A", "last_name": "B", "do_not_contact": true}, repo.CodeInvalid, "do_not_contact_reason", "required"},
		{"dnc blank reason", "create_contact", M{"first_name": "A", "last_name": "B", "do_not_contact": true, "do_not_contact_reason": " "}, repo.CodeInvalid, "do_not_contact_reason", "required"},
		{"reason without dnc", "create_contact", M{"first_name": "A", "last_name": "B", "do_not_contact_reason": "x"}, repo.CodeInvalid, "do_not_contact_reason", "do_not_contact: true"},
		{"bad preferences key", "create_contact", M{"first_name": "A", "last_name": "B", "preferences": M{"a": M{"$set": 1}}}, repo.CodeInvalid, "preferences.a", "$set"},
		{"bad social key", "create_contact", M{"first_name": "A", "last_name": "B", "social_links": M{"linkedin.com": "x"}}, repo.CodeInvalid, "social_links", "linkedin.com"},
		{"empty beat", "create_contact", M{"first_name": "A", "last_name": "B", "beats": []string{""}}, repo.CodeInvalid, "beats", "empty"},
		{"outlet id not uuid", "create_contact", M{"first_name": "A", "last_name": "B", "outlet_ids": []string{"x"}}, repo.CodeInvalid, "outlet_ids[0]", "UUID"},
		{"unknown outlet", "create_contact", M{"first_name": "A", "last_name": "B", "outlet_ids": []string{unknown}}, repo.CodeNotFound, "outlet_ids", unknown},
		{"outlet twice", "create_contact", M{"first_name": "A", "last_name": "B", "outlet_ids": []string{o, o}}, repo.CodeInvalid, "outlet_ids", "twice"},
		{"freelance not bool", "create_contact", M{"first_name": "A", "last_name": "B", "is_freelance": "yes"}, repo.CodeInvalid, "is_freelance", "boolean"},
		{"unknown argument", "create_contact", M{"first_name": "A", "last_name": "B", "outlet_id": o}, repo.CodeInvalid, "outlet_id", "unknown argument"},
		{"get unknown", "get_contact", M{"id": unknown}, repo.CodeNotFound, "", "contact " + unknown},
		{"get bad id", "get_contact", M{"id": "1"}, repo.CodeInvalid, "id", "UUID"},
		{"update unknown", "update_contact", M{"id": unknown, "title": "x"}, repo.CodeNotFound, "", "contact " + unknown},
		{"update nothing", "update_contact", M{"id": id}, repo.CodeInvalid, "", "nothing to change"},
		{"update archived", "update_contact", M{"id": archived, "title": "x"}, repo.CodeFailedPrecondition, "", "restore it"},
		{"update blank first name", "update_contact", M{"id": id, "first_name": ""}, repo.CodeInvalid, "first_name", "empty"},
		{"update dnc without reason", "update_contact", M{"id": id, "do_not_contact": true}, repo.CodeInvalid, "do_not_contact_reason", "required"},
		{"update reason alone", "update_contact", M{"id": id, "do_not_contact_reason": "x"}, repo.CodeInvalid, "do_not_contact_reason", "do_not_contact: true"},
		{"update affiliations directly", "update_contact", M{"id": id, "affiliations": []any{}}, repo.CodeInvalid, "affiliations", "unknown argument"},
		{"archive archived", "archive_contact", M{"id": archived}, repo.CodeFailedPrecondition, "", "already archived"},
		{"restore active", "restore_contact", M{"id": id}, repo.CodeFailedPrecondition, "", "not archived"},
		{"restore unknown", "restore_contact", M{"id": unknown}, repo.CodeNotFound, "", "does not exist"},
		{"list outlet unknown", "list_contacts", M{"outlet_id": unknown}, repo.CodeNotFound, "outlet_id", unknown},
		{"list outlet not uuid", "list_contacts", M{"outlet_id": "ledger"}, repo.CodeInvalid, "outlet_id", "UUID"},
		{"list freelance not bool", "list_contacts", M{"is_freelance": "true"}, repo.CodeInvalid, "is_freelance", "boolean"},
		{"list limit 500", "list_contacts", M{"limit": 500}, repo.CodeInvalid, "limit", "200"},
		{"list misspelt filter", "list_contacts", M{"beats": "AI"}, repo.CodeInvalid, "beats", "unknown argument"},
	})
}

func TestDoNotContact(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	var ct contact
	c.Must("create_contact", M{"first_name": "Sam", "last_name": "Reed", "do_not_contact": true, "do_not_contact_reason": "asked not to be pitched"}, &ct)
	if !ct.DoNotContact || ct.DoNotContactReason != "asked not to be pitched" {
		t.Fatalf("created %+v", ct)
	}
	c.Must("update_contact", M{"id": ct.ID, "do_not_contact_reason": "asked twice"}, &ct)
	if ct.DoNotContactReason != "asked twice" {
		t.Errorf("reason %q", ct.DoNotContactReason)
	}
	c.Must("update_contact", M{"id": ct.ID, "title": "Editor"}, &ct)
	if !ct.DoNotContact || ct.DoNotContactReason != "asked twice" {
		t.Errorf("unrelated update changed do_not_contact: %+v", ct)
	}
	// Turning it off clears the reason (absent from the result); the change log keeps it.
	id := ct.ID
	ct = contact{}
	c.Must("update_contact", M{"id": id, "do_not_contact": false}, &ct)
	if ct.DoNotContact || ct.DoNotContactReason != "" {
		t.Errorf("after turning off: %+v", ct)
	}
	cs := changesOf(t, c, ct.ID)
	if cs[0].Before["do_not_contact_reason"] != "asked twice" || cs[0].After["do_not_contact_reason"] != nil || cs[0].After["do_not_contact"] != false {
		t.Errorf("entry: before %v after %v", cs[0].Before, cs[0].After)
	}
	c.Must("update_contact", M{"id": ct.ID, "do_not_contact": true, "do_not_contact_reason": "legal"}, &ct)
	if !ct.DoNotContact || ct.DoNotContactReason != "legal" {
		t.Errorf("turned on again: %+v", ct)
	}
}

func TestContactAffiliations(t *testing.T) {
	env := testenv.New(t)
	c := env.Client(env.AdminKey, "affiliation-session")
	o1 := testenv.ID(t, c.Must("create_outlet", M{"name": "Ledger"}, nil))
	o2 := testenv.ID(t, c.Must("create_outlet", M{"name": "Cast"}, nil))
	o3 := testenv.ID(t, c.Must("create_outlet", M{"name": "Wire"}, nil))
	ct := testenv.ID(t, c.Must("create_contact", M{"first_name": "Ann", "last_name": "Lee"}, nil))

	type added struct {
		Affiliation affiliation
		Contact     contact
	}
	var a1 added
	c.Must("add_contact_outlet", M{"contact_id": ct, "outlet_id": o1, "role": "staff writer", "is_primary": true, "started_on": "2021-03-01"}, &a1)
	if a1.Affiliation.OutletID != o1 || a1.Affiliation.Role != "staff writer" || !a1.Affiliation.IsPrimary ||
		a1.Affiliation.StartedOn == nil || *a1.Affiliation.StartedOn != "2021-03-01T00:00:00Z" || a1.Affiliation.EndedOn != nil {
		t.Errorf("first affiliation %+v", a1.Affiliation)
	}
	if diff := cmp.Diff([]affiliation{a1.Affiliation}, a1.Contact.Affiliations); diff != "" {
		t.Errorf("contact's affiliations (-want +got):\n%s", diff)
	}
	var a2 added
	c.Must("add_contact_outlet", M{"contact_id": ct, "outlet_id": o2, "role": "host"}, &a2)
	if a2.Contact.Affiliations[0].IsPrimary != true || a2.Affiliation.IsPrimary {
		t.Errorf("a non-primary affiliation changed the primary: %+v", a2.Contact.Affiliations)
	}
	// A new primary clears the others.
	var a3 added
	c.Must("add_contact_outlet", M{"contact_id": ct, "outlet_id": o3, "is_primary": true, "started_on": "2019-01-01", "ended_on": "2020-06-30T12:00:00Z"}, &a3)
	var primaries []string
	for _, a := range a3.Contact.Affiliations {
		if a.IsPrimary {
			primaries = append(primaries, a.OutletID)
		}
	}
	if diff := cmp.Diff([]string{o3}, primaries); diff != "" || len(a3.Contact.Affiliations) != 3 {
		t.Errorf("primaries after a new primary (-want +got):\n%s", diff)
	}
	if a3.Affiliation.EndedOn == nil || *a3.Affiliation.EndedOn != "2020-06-30T12:00:00Z" {
		t.Errorf("ended_on %v", a3.Affiliation.EndedOn)
	}

	// get_outlet shows the contact with the role of its affiliation.
	var od outlet
	c.Must("get_outlet", M{"id": o1}, &od)
	if len(od.Contacts) != 1 || od.Contacts[0].ID != ct || od.Contacts[0].Name != "Ann Lee" || od.Contacts[0].Role != "staff writer" ||
		od.Contacts[0].IsPrimary || od.Contacts[0].AffiliationID != a1.Affiliation.ID || od.Contacts[0].Archived {
		t.Errorf("get_outlet contacts %+v", od.Contacts)
	}

	archivedContact := testenv.ID(t, c.Must("create_contact", M{"first_name": "Old", "last_name": "Timer", "outlet_ids": []string{o1}}, nil))
	raw := c.Must("archive_contact", M{"id": archivedContact}, nil)
	unknown := "5a0e3e7c-9a53-4d0f-8b1d-2a6b7c8d9e0f"
	refuse(t, c, []refusal{
		{"same outlet twice", "add_contact_outlet", M{"contact_id": ct, "outlet_id": o1, "role": "editor"}, repo.CodeConflict, "outlet_id", a1.Affiliation.ID},
		{"unknown contact", "add_contact_outlet", M{"contact_id": unknown, "outlet_id": o1}, repo.CodeNotFound, "", "contact " + unknown},
		{"unknown outlet", "add_contact_outlet", M{"contact_id": ct, "outlet_id": unknown}, repo.CodeNotFound, "outlet_id", unknown},
		{"contact id not uuid", "add_contact_outlet", M{"contact_id": "ann", "outlet_id": o1}, repo.CodeInvalid, "contact_id", "UUID"},
		{"no outlet", "add_contact_outlet", M{"contact_id": ct}, repo.CodeInvalid, "outlet_id", "required"},
		{"archived contact", "add_contact_outlet", M{"contact_id": archivedContact, "outlet_id": o2}, repo.CodeFailedPrecondition, "", "restore it"},
		{"bad date", "add_contact_outlet", M{"contact_id": ct, "outlet_id": o2, "started_on": "March 2021"}, repo.CodeInvalid, "started_on", "YYYY-MM-DD"},
		{"ended before started", "add_contact_outlet", M{"contact_id": ct, "outlet_id": o2, "started_on": "2022-01-01", "ended_on": "2021-01-01"}, repo.CodeInvalid, "ended_on", "before started_on"},
		{"remove unknown", "remove_contact_outlet", M{"id": unknown}, repo.CodeNotFound, "", "affiliation " + unknown},
		{"remove not uuid", "remove_contact_outlet", M{"id": "x"}, repo.CodeInvalid, "id", "UUID"},
		{"remove by contact id", "remove_contact_outlet", M{"contact_id": ct, "outlet_id": o1}, repo.CodeInvalid, "contact_id", "unknown argument"},
		{"remove from archived contact", "remove_contact_outlet", M{"id": oldAffID(t, raw)}, repo.CodeFailedPrecondition, "", "restore it"},
	})

	// Remove takes the element out; the change log keeps it.
	var rem struct {
		Removed affiliation
		Contact contact
	}
	c.Must("remove_contact_outlet", M{"id": a2.Affiliation.ID}, &rem)
	if rem.Removed.ID != a2.Affiliation.ID || rem.Removed.OutletID != o2 || rem.Removed.Role != "host" {
		t.Errorf("removed %+v", rem.Removed)
	}
	var left []string
	for _, a := range rem.Contact.Affiliations {
		left = append(left, a.OutletID)
	}
	if diff := cmp.Diff([]string{o1, o3}, left); diff != "" {
		t.Errorf("affiliations left (-want +got):\n%s", diff)
	}
	c.Fail("remove_contact_outlet", M{"id": a2.Affiliation.ID}, repo.CodeNotFound)
	if l := list(t, c, "list_contacts", "contacts", M{"outlet_id": o2}); l.Total != 0 {
		t.Errorf("contact still listed under the outlet it left: %v", l.Items)
	}
	// Re-adding the outlet after the removal is allowed.
	c.Must("add_contact_outlet", M{"contact_id": ct, "outlet_id": o2, "role": "guest host"}, nil)

	cs := changesOf(t, c, ct)
	if diff := cmp.Diff([]string{"contacts/link/add_contact_outlet", "contacts/unlink/remove_contact_outlet",
		"contacts/link/add_contact_outlet", "contacts/link/add_contact_outlet", "contacts/link/add_contact_outlet",
		"contacts/create/create_contact"}, actions(cs)); diff != "" {
		t.Fatalf("changes (-want +got):\n%s", diff)
	}
	affIDs := func(m map[string]any) []string {
		out := []string{}
		list, _ := m["affiliations"].([]any)
		for _, a := range list {
			out = append(out, a.(map[string]any)["id"].(string))
		}
		return out
	}
	unlink := cs[1]
	if diff := cmp.Diff([]string{a1.Affiliation.ID, a2.Affiliation.ID, a3.Affiliation.ID}, affIDs(unlink.Before)); diff != "" {
		t.Errorf("unlink before (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{a1.Affiliation.ID, a3.Affiliation.ID}, affIDs(unlink.After)); diff != "" {
		t.Errorf("unlink after (-want +got):\n%s", diff)
	}
	link := cs[2] // the new primary
	if diff := cmp.Diff([]string{a1.Affiliation.ID, a2.Affiliation.ID}, affIDs(link.Before)); diff != "" {
		t.Errorf("link before (-want +got):\n%s", diff)
	}
	if b := link.Before["affiliations"].([]any)[0].(map[string]any)["is_primary"]; b != true {
		t.Errorf("link before: first affiliation primary %v, want true", b)
	}
	if a := link.After["affiliations"].([]any)[0].(map[string]any)["is_primary"]; a != false {
		t.Errorf("link after: first affiliation primary %v, want false", a)
	}
}

// oldAffID returns the id of the first affiliation of a contact result.
func oldAffID(t *testing.T, raw []byte) string {
	t.Helper()
	var c contact
	if err := json.Unmarshal(raw, &c); err != nil || len(c.Affiliations) == 0 {
		t.Fatalf("no affiliation in %s", raw)
	}
	return c.Affiliations[0].ID
}

func TestListContactsFilters(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	ledger := testenv.ID(t, c.Must("create_outlet", M{"name": "Ledger"}, nil))
	cast := testenv.ID(t, c.Must("create_outlet", M{"name": "Cast"}, nil))
	for _, ct := range []M{
		{"first_name": "Jane", "last_name": "Doe", "email": "jane@ledger.example", "beats": []string{"AI", "Privacy"}, "outlet_ids": []string{ledger}},
		{"first_name": "John", "last_name": "Doe", "email": "jd@cast.example", "beats": []string{"Climate"}, "is_freelance": true, "outlet_ids": []string{cast, ledger}},
		{"first_name": "Mary", "last_name": "O'Brien (Jr.)", "email": "mary+news@freelance.example", "beats": []string{"ai policy"}, "is_freelance": true},
		{"first_name": "Li", "last_name": "Wei", "beats": []string{"ai"}, "outlet_ids": []string{cast}},
	} {
		c.Must("create_contact", ct, nil)
	}
	gone := testenv.ID(t, c.Must("create_contact", M{"first_name": "Old", "last_name": "Doe", "beats": []string{"AI"}, "outlet_ids": []string{ledger}}, nil))
	c.Must("archive_contact", M{"id": gone}, nil)

	cases := []struct {
		name string
		args M
		want []string
	}{
		{"all active", M{}, []string{"Jane Doe", "John Doe", "Li Wei", "Mary O'Brien (Jr.)"}},
		{"search last name", M{"search": "doe"}, []string{"Jane Doe", "John Doe"}},
		{"search full name", M{"search": "JANE DOE"}, []string{"Jane Doe"}},
		{"search email", M{"search": "@cast.EXAMPLE"}, []string{"John Doe"}},
		{"search literal plus", M{"search": "mary+news"}, []string{"Mary O'Brien (Jr.)"}},
		{"search literal parens", M{"search": "(jr.)"}, []string{"Mary O'Brien (Jr.)"}},
		{"search pattern matches nothing", M{"search": "j.*e"}, []string{}},
		{"outlet", M{"outlet_id": ledger}, []string{"Jane Doe", "John Doe"}},
		{"other outlet", M{"outlet_id": cast}, []string{"John Doe", "Li Wei"}},
		{"beat whole element any case", M{"beat": "ai"}, []string{"Jane Doe", "Li Wei"}},
		{"beat with space", M{"beat": "AI Policy"}, []string{"Mary O'Brien (Jr.)"}},
		{"beat part matches nothing", M{"beat": "priv"}, []string{}},
		{"freelance", M{"is_freelance": true}, []string{"John Doe", "Mary O'Brien (Jr.)"}},
		{"staff", M{"is_freelance": false}, []string{"Jane Doe", "Li Wei"}},
		{"include archived", M{"search": "doe", "include_archived": true}, []string{"Jane Doe", "John Doe", "Old Doe"}},
		{"outlet and beat", M{"outlet_id": ledger, "beat": "AI"}, []string{"Jane Doe"}},
		{"outlet and freelance", M{"outlet_id": ledger, "is_freelance": true}, []string{"John Doe"}},
		{"search and beat", M{"search": "doe", "beat": "climate"}, []string{"John Doe"}},
		{"all filters", M{"search": "doe", "outlet_id": ledger, "beat": "ai", "is_freelance": false, "include_archived": true}, []string{"Jane Doe", "Old Doe"}},
		{"all filters, no match", M{"search": "doe", "outlet_id": cast, "beat": "ai", "is_freelance": false}, []string{}},
	}
	for _, tc := range cases {
		l := list(t, c, "list_contacts", "contacts", tc.args)
		if diff := cmp.Diff(tc.want, l.names()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
		if l.Total != len(tc.want) || l.Showing != len(tc.want) {
			t.Errorf("%s: total %d showing %d", tc.name, l.Total, l.Showing)
		}
	}
	// An archived outlet still filters: its contacts are where they were.
	c.Must("archive_outlet", M{"id": cast}, nil)
	if l := list(t, c, "list_contacts", "contacts", M{"outlet_id": cast}); diff(l.names(), []string{"John Doe", "Li Wei"}) != "" {
		t.Errorf("contacts of an archived outlet: %v", l.names())
	}
}

// TestGetContactShowsOpportunities reads the opportunities that name a
// contact, archived ones marked.
func TestGetContactShowsOpportunities(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	ann := testenv.ID(t, c.Must("create_contact", M{"first_name": "Ann", "last_name": "Lee"}, nil))
	bo := testenv.ID(t, c.Must("create_contact", M{"first_name": "Bo", "last_name": "Ng"}, nil))
	opp := func(args M) string {
		id := mk(t, c, "create_opportunity", args)
		time.Sleep(2 * time.Millisecond) // distinct created_at: the order below is the creation order
		return id
	}
	o1 := opp(M{"title": "Launch exclusive", "stage": "pitched", "contact_ids": []string{ann, bo}, "priority": "high"})
	opp(M{"title": "Bo only", "stage": "researching", "contact_ids": []string{bo}})
	o3 := opp(M{"title": "Old idea", "stage": "lost", "lost_reason": "no reply", "contact_ids": []string{ann}})
	c.Must("archive_opportunity", M{"id": o3}, nil)

	var got struct {
		Opportunities []map[string]any `json:"opportunities"`
	}
	c.Must("get_contact", M{"id": ann}, &got)
	want := []map[string]any{
		{"id": o3, "title": "Old idea", "stage": "lost", "archived": true},
		{"id": o1, "title": "Launch exclusive", "stage": "pitched", "archived": false},
	}
	if diff := cmp.Diff(want, got.Opportunities); diff != "" {
		t.Errorf("opportunities (-want +got):\n%s", diff)
	}
}
