package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/notes"
)

type noteLink struct {
	ID            string `json:"id"`
	ContactID     string `json:"contact_id"`
	OutletID      string `json:"outlet_id"`
	OpportunityID string `json:"opportunity_id"`
	ChannelID     string `json:"channel_id"`
	Entity        struct {
		Kind     string `json:"kind"`
		Name     string `json:"name"`
		Archived bool   `json:"archived"`
	} `json:"entity"`
}

type note struct {
	ID         string     `json:"id"`
	Type       string     `json:"type"`
	Title      string     `json:"title"`
	Content    string     `json:"content"`
	OccurredAt time.Time  `json:"occurred_at"`
	ArchivedAt *time.Time `json:"archived_at"`
	CreatedAt  time.Time  `json:"created_at"`
	Links      []noteLink `json:"links"`
	Added      []noteLink `json:"added"`
}

type noteList struct {
	Total   int    `json:"total"`
	Showing int    `json:"showing"`
	Limit   int    `json:"limit"`
	Offset  int    `json:"offset"`
	Notes   []note `json:"notes"`
}

// entities are records of the other groups that notes link to, made
// through their tools.
type entities struct {
	contact, contact2, outlet, opportunity, channel, archivedContact string
}

func fixtures(t *testing.T, env *testenv.Env) entities {
	t.Helper()
	c := env.Admin()
	e := entities{
		outlet: mk(t, c, "create_outlet", M{"name": "The Daily Planet", "tier": 1}),
	}
	e.contact = mk(t, c, "create_contact", M{"first_name": "Lois", "last_name": "Lane", "outlet_ids": []string{e.outlet}})
	e.contact2 = mk(t, c, "create_contact", M{"first_name": "Jimmy", "last_name": "Olsen"})
	e.opportunity = mk(t, c, "create_opportunity", M{"title": "Launch feature", "outlet_id": e.outlet})
	e.channel = mk(t, c, "create_channel", M{"type": "newsletter", "name": "Morning newsletter", "outlet_id": e.outlet})
	e.archivedContact = mkArchived(t, c, "contact", M{"first_name": "Old", "last_name": "Contact"})
	return e
}

func TestCreateNoteDefaultsAndLinks(t *testing.T) {
	env := testenv.New(t)
	e := fixtures(t, env)
	c := env.Admin()
	before := time.Now().UTC().Add(-time.Second)
	var n note
	c.Must("create_note", M{"contact_ids": []string{e.contact}}, &n)
	if n.Type != "general" || n.Title != "" || n.Content != "" || n.ArchivedAt != nil {
		t.Errorf("defaults: %+v", n)
	}
	if n.OccurredAt.Before(before) || n.OccurredAt.After(time.Now().Add(time.Second)) {
		t.Errorf("occurred_at %v is not the time of creation", n.OccurredAt)
	}
	if len(n.Links) != 1 || n.Links[0].ContactID != e.contact || n.Links[0].ID == "" || n.Links[0].ID == n.ID {
		t.Fatalf("links: %+v", n.Links)
	}

	var full note
	c.Must("create_note", M{"type": "meeting", "title": "Lunch", "content": "Talked about the launch.\nShe liked it.",
		"occurred_at": "2026-03-01", "contact_ids": []string{e.contact, e.contact}, "outlet_ids": []string{e.outlet},
		"opportunity_ids": []string{e.opportunity}, "channel_ids": []string{e.channel}}, &full)
	if !full.OccurredAt.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("bare date read as %v, want midnight UTC", full.OccurredAt)
	}
	var got note
	c.Must("get_note", M{"id": full.ID}, &got)
	kinds := map[string]string{}
	for _, l := range got.Links {
		kinds[l.Entity.Kind] = l.Entity.Name
	}
	want := map[string]string{"contact": "Lois Lane", "outlet": "The Daily Planet", "opportunity": "Launch feature", "channel": "Morning newsletter"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("get_note links (-want +got), the duplicate contact linked once:\n%s", diff)
	}
	if got.Type != "meeting" || got.Title != "Lunch" || got.Content != "Talked about the launch.\nShe liked it." {
		t.Errorf("get_note = %+v", got)
	}

	var dt note
	c.Must("create_note", M{"occurred_at": "2026-03-01T14:30:00+02:00", "outlet_ids": []string{e.outlet}}, &dt)
	if !dt.OccurredAt.Equal(time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)) {
		t.Errorf("ISO datetime read as %v", dt.OccurredAt)
	}
}

func TestNoteRefusalsWriteNothing(t *testing.T) {
	env := testenv.New(t)
	e := fixtures(t, env)
	c := env.Admin()
	var n note
	c.Must("create_note", M{"contact_ids": []string{e.contact}}, &n)
	missing := "9f1d2c3b-4a5e-4f60-8b7a-1c2d3e4f5a6b"
	cases := []struct {
		tool  string
		args  M
		code  string
		field string
	}{
		{"create_note", M{"title": "no links"}, repo.CodeInvalid, "contact_ids"},
		{"create_note", M{"contact_ids": []string{}, "outlet_ids": []string{}}, repo.CodeInvalid, "contact_ids"},
		{"create_note", M{"type": "lunch", "contact_ids": []string{e.contact}}, repo.CodeInvalid, "type"},
		{"create_note", M{"contact_ids": []string{"not-a-uuid"}}, repo.CodeInvalid, "contact_ids[0]"},
		{"create_note", M{"contact_ids": []string{missing}}, repo.CodeNotFound, "contact_ids"},
		{"create_note", M{"contact_ids": []string{e.archivedContact}}, repo.CodeNotFound, "contact_ids"},
		{"create_note", M{"channel_ids": []string{e.contact}}, repo.CodeNotFound, "channel_ids"},
		{"create_note", M{"contact_ids": e.contact}, repo.CodeInvalid, "contact_ids"},
		{"create_note", M{"title": 5, "contact_ids": []string{e.contact}}, repo.CodeInvalid, "title"},
		{"create_note", M{"occurred_at": "yesterday", "contact_ids": []string{e.contact}}, repo.CodeInvalid, "occurred_at"},
		{"create_note", M{"occurred_at": "2026-02-30", "contact_ids": []string{e.contact}}, repo.CodeInvalid, "occurred_at"},
		{"create_note", M{"contact_id": e.contact}, repo.CodeInvalid, "contact_id"},
		{"get_note", M{"id": missing}, repo.CodeNotFound, ""},
		{"get_note", M{"id": "123"}, repo.CodeInvalid, "id"},
		{"get_note", M{}, repo.CodeInvalid, "id"},
		{"list_notes", M{"limit": 0}, repo.CodeInvalid, "limit"},
		{"list_notes", M{"limit": 201}, repo.CodeInvalid, "limit"},
		{"list_notes", M{"limit": 2.5}, repo.CodeInvalid, "limit"},
		{"list_notes", M{"offset": -1}, repo.CodeInvalid, "offset"},
		{"list_notes", M{"type": "memo"}, repo.CodeInvalid, "type"},
		{"list_notes", M{"channel_id": e.channel}, repo.CodeInvalid, "channel_id"},
		{"list_notes", M{"include_archived": "yes"}, repo.CodeInvalid, "include_archived"},
		{"update_note", M{"id": n.ID}, repo.CodeInvalid, "id"},
		{"update_note", M{"id": n.ID, "type": "memo"}, repo.CodeInvalid, "type"},
		{"update_note", M{"id": missing, "title": "x"}, repo.CodeNotFound, ""},
		{"update_note", M{"id": n.ID, "occurred_at": "2026-13-01"}, repo.CodeInvalid, "occurred_at"},
		{"add_note_link", M{"note_id": n.ID}, repo.CodeInvalid, "contact_id"},
		{"add_note_link", M{"note_id": missing, "outlet_id": e.outlet}, repo.CodeNotFound, ""},
		{"add_note_link", M{"note_id": n.ID, "outlet_id": missing}, repo.CodeNotFound, "outlet_id"},
		{"add_note_link", M{"note_id": n.ID, "outlet_id": "x"}, repo.CodeInvalid, "outlet_id"},
		{"remove_note_link", M{"id": n.ID}, repo.CodeNotFound, ""},
		{"remove_note_link", M{"id": n.Links[0].ID}, repo.CodeFailedPrecondition, "id"},
		{"restore_note", M{"id": n.ID}, repo.CodeFailedPrecondition, ""},
		{"archive_note", M{"id": missing}, repo.CodeNotFound, ""},
		{"get_interaction_log", M{}, repo.CodeInvalid, "contact_id"},
		{"get_interaction_log", M{"since": "2026-01-01"}, repo.CodeInvalid, "contact_id"},
		{"get_interaction_log", M{"contact_id": e.contact, "limit": 500}, repo.CodeInvalid, "limit"},
		{"get_interaction_log", M{"contact_id": e.contact, "until": "soon"}, repo.CodeInvalid, "until"},
		{"get_interaction_log", M{"contact_id": e.contact, "since": "2026-03-02", "until": "2026-03-01"}, repo.CodeInvalid, "until"},
		{"get_interaction_log", M{"channel_id": e.channel}, repo.CodeInvalid, "channel_id"},
	}
	for _, tc := range cases {
		t.Run(tc.tool+"/"+tc.code+"/"+tc.field, func(t *testing.T) {
			err := c.Fail(tc.tool, tc.args, tc.code)
			if err.Field != tc.field {
				t.Errorf("field %q, want %q (%s)", err.Field, tc.field, err.Message)
			}
			if err.Message == "" {
				t.Error("empty message")
			}
		})
	}
	// Nothing was written by any refusal: one note, one change entry for notes.
	var log struct {
		Total int `json:"total"`
	}
	c.Must("get_change_log", M{"collection": "notes"}, &log)
	if log.Total != 1 {
		t.Errorf("notes changes = %d, want 1", log.Total)
	}
	var l noteList
	c.Must("list_notes", M{"include_archived": true}, &l)
	if l.Total != 1 {
		t.Errorf("notes = %d, want 1", l.Total)
	}
}

func TestErrorMessagesNameAllowedValues(t *testing.T) {
	env := testenv.New(t)
	e := fixtures(t, env)
	c := env.Admin()
	err := c.Fail("create_note", M{"type": "lunch", "contact_ids": []string{e.contact}}, repo.CodeInvalid)
	for _, v := range notes.NoteTypes {
		if !strings.Contains(err.Message, v) {
			t.Errorf("message %q does not list %s", err.Message, v)
		}
	}
	err = c.Fail("list_notes", M{"limit": 1000}, repo.CodeInvalid)
	if !strings.Contains(err.Message, "200") {
		t.Errorf("message %q does not name the maximum", err.Message)
	}
	err = c.Fail("list_notes", M{"channel_id": e.channel}, repo.CodeInvalid)
	if !strings.Contains(err.Message, "contact_id") {
		t.Errorf("message %q does not list the arguments", err.Message)
	}
}

func TestArchiveAndRestoreNote(t *testing.T) {
	env := testenv.New(t)
	e := fixtures(t, env)
	c := env.Client(env.AdminKey, "archiver")
	var n note
	c.Must("create_note", M{"title": "to archive", "outlet_ids": []string{e.outlet}}, &n)
	var a note
	c.Must("archive_note", M{"id": n.ID}, &a)
	if a.ArchivedAt == nil {
		t.Fatal("archived_at not set")
	}
	c.Fail("archive_note", M{"id": n.ID}, repo.CodeFailedPrecondition)
	c.Fail("update_note", M{"id": n.ID, "title": "x"}, repo.CodeFailedPrecondition)
	c.Fail("add_note_link", M{"note_id": n.ID, "contact_id": e.contact}, repo.CodeFailedPrecondition)

	var l noteList
	c.Must("list_notes", nil, &l)
	if l.Total != 0 {
		t.Errorf("archived note listed: %+v", l)
	}
	c.Must("list_notes", M{"include_archived": true}, &l)
	if l.Total != 1 || l.Notes[0].ArchivedAt == nil {
		t.Errorf("include_archived: %+v", l)
	}
	var got note
	c.Must("get_note", M{"id": n.ID}, &got)
	if got.ArchivedAt == nil {
		t.Error("get_note of an archived note does not show archived_at")
	}

	var r note
	c.Must("restore_note", M{"id": n.ID}, &r)
	if r.ArchivedAt != nil {
		t.Fatal("archived_at not cleared")
	}
	c.Fail("restore_note", M{"id": n.ID}, repo.CodeFailedPrecondition)
	c.Must("list_notes", nil, &l)
	if l.Total != 1 {
		t.Errorf("restored note not listed")
	}

	var log struct {
		Changes []struct {
			Action    string         `json:"action"`
			SessionID string         `json:"session_id"`
			UserID    string         `json:"user_id"`
			AgentID   string         `json:"agent_id"`
			Before    map[string]any `json:"before"`
			After     map[string]any `json:"after"`
		} `json:"changes"`
	}
	c.Must("get_change_log", M{"record_id": n.ID}, &log)
	var actions []string
	for _, ch := range log.Changes {
		actions = append(actions, ch.Action)
		if ch.SessionID != "archiver" || ch.UserID != env.AdminUserID || ch.AgentID == "" {
			t.Errorf("attribution of %s: %+v", ch.Action, ch)
		}
	}
	if diff := cmp.Diff([]string{"restore", "archive", "create"}, actions); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if log.Changes[1].Before["archived_at"] != nil || log.Changes[1].After["archived_at"] == nil ||
		log.Changes[0].Before["archived_at"] == nil || log.Changes[0].After["archived_at"] != nil {
		t.Errorf("archive/restore before/after: %+v", log.Changes[:2])
	}
}

func TestNoteLinks(t *testing.T) {
	env := testenv.New(t)
	e := fixtures(t, env)
	c := env.Admin()
	var n note
	c.Must("create_note", M{"contact_ids": []string{e.contact}}, &n)

	var added note
	c.Must("add_note_link", M{"note_id": n.ID, "outlet_id": e.outlet, "channel_id": e.channel, "contact_id": e.contact}, &added)
	if len(added.Links) != 3 || len(added.Added) != 2 {
		t.Fatalf("after add: %d links, %d added; want 3 and 2 (the contact was linked already)", len(added.Links), len(added.Added))
	}
	var again note
	c.Must("add_note_link", M{"note_id": n.ID, "outlet_id": e.outlet}, &again)
	if len(again.Links) != 3 || len(again.Added) != 0 {
		t.Errorf("a second link to the same outlet was made: %+v", again.Links)
	}

	var outletLink string
	for _, l := range added.Links {
		if l.OutletID == e.outlet {
			outletLink = l.ID
		}
	}
	var removed note
	c.Must("remove_note_link", M{"id": outletLink}, &removed)
	if len(removed.Links) != 2 {
		t.Fatalf("after remove: %+v", removed.Links)
	}
	c.Fail("remove_note_link", M{"id": outletLink}, repo.CodeNotFound)

	var l noteList
	c.Must("list_notes", M{"outlet_id": e.outlet}, &l)
	if l.Total != 0 {
		t.Errorf("note still listed under the unlinked outlet")
	}
	// Down to one link: it cannot go.
	for _, l := range removed.Links[1:] {
		c.Must("remove_note_link", M{"id": l.ID}, nil)
	}
	err := c.Fail("remove_note_link", M{"id": removed.Links[0].ID}, repo.CodeFailedPrecondition)
	if !strings.Contains(err.Message, "at least one") {
		t.Errorf("message: %s", err.Message)
	}
	var got note
	c.Must("get_note", M{"id": n.ID}, &got)
	if len(got.Links) != 1 {
		t.Errorf("links = %d, want 1", len(got.Links))
	}

	var log struct {
		Changes []struct {
			Action string `json:"action"`
		} `json:"changes"`
	}
	c.Must("get_change_log", M{"record_id": n.ID}, &log)
	var actions []string
	for _, ch := range log.Changes {
		actions = append(actions, ch.Action)
	}
	if diff := cmp.Diff([]string{"unlink", "unlink", "link", "create"}, actions); diff != "" {
		t.Errorf("actions (-want +got) (the no-op link writes nothing):\n%s", diff)
	}
}

func TestUpdateNote(t *testing.T) {
	env := testenv.New(t)
	e := fixtures(t, env)
	c := env.Admin()
	var n note
	c.Must("create_note", M{"title": "Call", "content": "body", "type": "phone_call", "contact_ids": []string{e.contact}}, &n)
	var u note
	c.Must("update_note", M{"id": n.ID, "title": "", "occurred_at": "2026-05-05"}, &u)
	if u.Title != "" || u.Content != "body" || u.Type != "phone_call" || !u.OccurredAt.Equal(time.Date(2026, 5, 5, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("update: %+v", u)
	}
	var log struct {
		Changes []struct {
			Before map[string]any `json:"before"`
			After  map[string]any `json:"after"`
		} `json:"changes"`
	}
	c.Must("get_change_log", M{"record_id": n.ID, "action": "update"}, &log)
	if len(log.Changes) != 1 || log.Changes[0].Before["title"] != "Call" || log.Changes[0].After["title"] != "" {
		t.Errorf("update entry: %+v", log.Changes)
	}
}

func TestListNotesFiltersAndPaging(t *testing.T) {
	env := testenv.New(t)
	e := fixtures(t, env)
	c := env.Admin()
	mk := func(args M) string {
		var n note
		c.Must("create_note", args, &n)
		return n.ID
	}
	a := mk(M{"type": "meeting", "title": "Q3 plan (draft)", "content": "budget", "occurred_at": "2026-01-03", "contact_ids": []string{e.contact}})
	b := mk(M{"type": "research", "title": "Beat notes", "content": "Covers AI.Chips and cloud", "occurred_at": "2026-01-02", "outlet_ids": []string{e.outlet}})
	cc := mk(M{"type": "meeting", "title": "Pitch", "content": "q3 PLAN (DRAFT) agreed", "occurred_at": "2026-01-01", "contact_ids": []string{e.contact}, "opportunity_ids": []string{e.opportunity}})
	d := mk(M{"title": "ignored", "content": "aixchips", "occurred_at": "2026-01-04", "channel_ids": []string{e.channel}})
	c.Must("archive_note", M{"id": d}, nil)

	ids := func(args M) []string {
		var l noteList
		c.Must("list_notes", args, &l)
		out := []string{}
		for _, n := range l.Notes {
			out = append(out, n.ID)
		}
		if l.Total < len(out) || l.Showing != len(out) {
			t.Errorf("envelope %+v", l)
		}
		return out
	}
	cases := []struct {
		name string
		args M
		want []string
	}{
		{"all newest first", M{}, []string{a, b, cc}},
		{"include archived", M{"include_archived": true}, []string{d, a, b, cc}},
		{"type", M{"type": "meeting"}, []string{a, cc}},
		{"contact", M{"contact_id": e.contact}, []string{a, cc}},
		{"outlet", M{"outlet_id": e.outlet}, []string{b}},
		{"opportunity", M{"opportunity_id": e.opportunity}, []string{cc}},
		{"contact and type", M{"contact_id": e.contact, "type": "research"}, []string{}},
		{"search is literal and case-insensitive", M{"search": "q3 plan (draft)"}, []string{a, cc}},
		{"search dot is a character", M{"search": "ai.chips"}, []string{b}},
		{"search content", M{"search": "BUDGET"}, []string{a}},
		{"search with other filters", M{"search": "plan", "opportunity_id": e.opportunity}, []string{cc}},
		{"search regex characters", M{"search": ".*"}, []string{}},
		{"search archived", M{"search": "aixchips", "include_archived": true}, []string{d}},
		{"limit", M{"limit": 2}, []string{a, b}},
		{"offset", M{"limit": 2, "offset": 2}, []string{cc}},
		{"offset past the end", M{"offset": 10}, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ids(tc.args)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	var l noteList
	c.Must("list_notes", M{}, &l)
	if l.Limit != 50 || l.Offset != 0 || l.Total != 3 {
		t.Errorf("defaults: limit %d offset %d total %d", l.Limit, l.Offset, l.Total)
	}
}

func TestListNotesPagingNeverSkipsOrRepeats(t *testing.T) {
	env := testenv.New(t)
	e := fixtures(t, env)
	c := env.Admin()
	want := map[string]bool{}
	for i := 0; i < 7; i++ {
		var n note
		c.Must("create_note", M{"title": fmt.Sprint(i), "occurred_at": "2026-02-02", "contact_ids": []string{e.contact}}, &n)
		want[n.ID] = true
	}
	seen := map[string]bool{}
	for off := 0; off < 9; off += 3 {
		var l noteList
		c.Must("list_notes", M{"limit": 3, "offset": off}, &l)
		for _, n := range l.Notes {
			if seen[n.ID] {
				t.Errorf("note %s repeated at offset %d", n.ID, off)
			}
			seen[n.ID] = true
		}
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
}

func TestNoteToolsNeedAKey(t *testing.T) {
	env := testenv.New(t)
	if got := post(t, env.URL, "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_notes","arguments":{}}}`); got != 401 {
		t.Errorf("tools/call without a key: %d, want 401", got)
	}
	if got := post(t, env.URL, "outreach_"+strings.Repeat("x", 40), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_notes","arguments":{}}}`); got != 401 {
		t.Errorf("tools/call with an invalid key: %d, want 401", got)
	}
	ro := env.Client(env.Key("read"), "")
	e := fixtures(t, env)
	ro.Fail("create_note", M{"contact_ids": []string{e.contact}}, repo.CodePermissionDenied)
	ro.Must("list_notes", nil, nil)
}

func TestToolResultIsOneJSONTextItem(t *testing.T) {
	env := testenv.New(t)
	e := fixtures(t, env)
	raw := env.Admin().Must("create_note", M{"contact_ids": []string{e.contact}}, nil)
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil || v["id"] == nil {
		t.Errorf("text is not the JSON-encoded note: %s", raw)
	}
}
