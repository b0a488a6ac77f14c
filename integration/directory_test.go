package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"outreach/integration/testenv"
	"outreach/repo"
)

// Helpers shared by the directory tests (outlets, contacts, channels).

// listed is a list envelope with its records reduced to id and name.
type listed struct {
	Total, Showing, Limit, Offset int
	Items                         []struct{ ID, Name string }
}

func list(t *testing.T, c *testenv.Client, tool, noun string, args M) listed {
	t.Helper()
	var env map[string]json.RawMessage
	c.Must(tool, args, &env)
	var l listed
	for k, v := range map[string]any{"total": &l.Total, "showing": &l.Showing, "limit": &l.Limit, "offset": &l.Offset, noun: &l.Items} {
		if err := json.Unmarshal(env[k], v); err != nil {
			t.Fatalf("%s: envelope field %q: %v in %v", tool, k, err, env)
		}
	}
	return l
}

// names returns the sorted names of a list's records.
func (l listed) names() []string {
	out := []string{}
	for _, it := range l.Items {
		out = append(out, it.Name)
	}
	sort.Strings(out)
	return out
}

func (l listed) ids() []string {
	out := []string{}
	for _, it := range l.Items {
		out = append(out, it.ID)
	}
	return out
}

// change is a change_log entry as the tests read it.
type change struct {
	Action, Collection, Tool, RecordID string
	Before, After                      map[string]any
}

// changesOf returns the change entries of a record, newest first.
func changesOf(t *testing.T, c *testenv.Client, recordID string) []change {
	t.Helper()
	var out struct{ Changes []change }
	c.Must("get_change_log", M{"record_id": recordID}, &out)
	return out.Changes
}

func actions(cs []change) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Collection+"/"+c.Action+"/"+c.Tool)
	}
	return out
}

func changeCount(t *testing.T, c *testenv.Client) int {
	t.Helper()
	var out struct{ Total int }
	c.Must("get_change_log", M{"limit": 1}, &out)
	return out.Total
}

// refusal is a call that must fail with code, naming field, with a message
// containing msg.
type refusal struct {
	name  string
	tool  string
	args  M
	code  string
	field string
	msg   string
}

// refuse runs each refusal and checks that none of them wrote anything.
func refuse(t *testing.T, c *testenv.Client, cases []refusal) {
	t.Helper()
	before := changeCount(t, c)
	for _, tc := range cases {
		raw, e := c.Call(tc.tool, tc.args)
		if e == nil {
			t.Errorf("%s: %s succeeded with %s; want %s", tc.name, tc.tool, raw, tc.code)
			continue
		}
		if e.Code != tc.code {
			t.Errorf("%s: code %s (%s); want %s", tc.name, e.Code, e.Message, tc.code)
		}
		if tc.field != "" && e.Field != tc.field {
			t.Errorf("%s: field %q (%s); want %q", tc.name, e.Field, e.Message, tc.field)
		}
		if !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%s: message %q does not contain %q", tc.name, e.Message, tc.msg)
		}
	}
	if after := changeCount(t, c); after != before {
		t.Errorf("refused calls wrote %d changes", after-before)
	}
}

// pageThrough reads a whole list by pages of size and checks that the
// pages, together, are the full list in the same order, with no record
// skipped or repeated.
func pageThrough(t *testing.T, c *testenv.Client, tool, noun string, args M, size, want int) {
	t.Helper()
	full := M{"limit": 200}
	for k, v := range args {
		full[k] = v
	}
	all := list(t, c, tool, noun, full)
	if all.Total != want || len(all.Items) != want {
		t.Fatalf("%s: total %d, %d items; want %d", tool, all.Total, len(all.Items), want)
	}
	var got []string
	for off := 0; off < want+size; off += size {
		a := M{"limit": size, "offset": off}
		for k, v := range args {
			a[k] = v
		}
		p := list(t, c, tool, noun, a)
		if p.Total != want || p.Limit != size || p.Offset != off || p.Showing != len(p.Items) {
			t.Errorf("%s page at %d: total %d limit %d offset %d showing %d (%d items)", tool, off, p.Total, p.Limit, p.Offset, p.Showing, len(p.Items))
		}
		if wantShowing := min(size, max(0, want-off)); len(p.Items) != wantShowing {
			t.Errorf("%s page at %d: %d items, want %d", tool, off, len(p.Items), wantShowing)
		}
		got = append(got, p.ids()...)
	}
	if diff := cmp.Diff(all.ids(), got); diff != "" {
		t.Errorf("%s: pages differ from the full list (-full +pages):\n%s", tool, diff)
	}
	seen := map[string]bool{}
	for _, id := range got {
		if seen[id] {
			t.Errorf("%s: %s repeated", tool, id)
		}
		seen[id] = true
	}
}

// outlet is an outlet as the tests read it (get_outlet adds channels and contacts).
type outlet struct {
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	Type         string         `json:"type"`
	Tier         *int           `json:"tier"`
	Website      string         `json:"website"`
	Description  string         `json:"description"`
	Country      string         `json:"country"`
	Language     string         `json:"language"`
	Topics       []string       `json:"topics"`
	AudienceSize *int64         `json:"audience_size"`
	SocialLinks  map[string]any `json:"social_links"`
	ArchivedAt   *string        `json:"archived_at"`
	Channels     []struct {
		ID, Name, Type string
		Archived       bool
	} `json:"channels"`
	Contacts []struct {
		ID            string `json:"id"`
		Name          string `json:"name"`
		Title         string `json:"title"`
		Email         string `json:"email"`
		Role          string `json:"role"`
		IsPrimary     bool   `json:"is_primary"`
		AffiliationID string `json:"affiliation_id"`
		Archived      bool   `json:"archived"`
	} `json:"contacts"`
}

func ptr[T any](v T) *T { return &v }

func TestCreateGetUpdateOutlet(t *testing.T) {
	env := testenv.New(t)
	c := env.Client(env.AdminKey, "outlet-session")

	var minimal outlet
	c.Must("create_outlet", M{"name": "  Tech Weekly  "}, &minimal)
	want := outlet{ID: minimal.ID, Name: "Tech Weekly", Type: "publication", Topics: []string{}}
	if diff := cmp.Diff(want, minimal); diff != "" {
		t.Errorf("minimal outlet (-want +got):\n%s", diff)
	}

	var full outlet
	c.Must("create_outlet", M{"name": "The Daily Ledger", "type": "newspaper", "tier": 1, "website": "https://ledger.example/",
		"description": "Business daily", "country": "US", "language": "en", "topics": []string{"Finance", " AI ", "ai"},
		"audience_size": 2500000, "social_links": M{"x": "https://x.com/ledger", "profiles": []any{M{"site": "bsky"}}}}, &full)
	want = outlet{ID: full.ID, Name: "The Daily Ledger", Type: "newspaper", Tier: ptr(1), Website: "https://ledger.example/",
		Description: "Business daily", Country: "US", Language: "en", Topics: []string{"Finance", "AI"},
		AudienceSize: ptr[int64](2500000), SocialLinks: map[string]any{"x": "https://x.com/ledger", "profiles": []any{map[string]any{"site": "bsky"}}}}
	if diff := cmp.Diff(want, full); diff != "" {
		t.Errorf("full outlet (-want +got):\n%s", diff)
	}

	var got outlet
	c.Must("get_outlet", M{"id": full.ID}, &got)
	want.Channels, want.Contacts = got.Channels, got.Contacts
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("get_outlet (-want +got):\n%s", diff)
	}
	if got.Channels == nil || got.Contacts == nil || len(got.Channels)+len(got.Contacts) != 0 {
		t.Errorf("get_outlet of a new outlet: channels %v contacts %v; want two empty lists", got.Channels, got.Contacts)
	}

	var upd outlet
	c.Must("update_outlet", M{"id": full.ID, "tier": 2, "topics": []string{"Markets"}, "website": "", "social_links": M{}, "audience_size": 0}, &upd)
	want = outlet{ID: full.ID, Name: "The Daily Ledger", Type: "newspaper", Tier: ptr(2), Description: "Business daily",
		Country: "US", Language: "en", Topics: []string{"Markets"}, AudienceSize: ptr[int64](0)}
	if diff := cmp.Diff(want, upd); diff != "" {
		t.Errorf("updated outlet (-want +got):\n%s", diff)
	}
	upd = outlet{} // an unset field is absent from the result: decode into a fresh value
	c.Must("update_outlet", M{"id": full.ID, "tier": 0}, &upd)
	if upd.Tier != nil {
		t.Errorf("tier 0 left tier %v; want it removed", *upd.Tier)
	}

	// An update that changes nothing writes nothing.
	n := len(changesOf(t, c, full.ID))
	c.Must("update_outlet", M{"id": full.ID, "name": "The Daily Ledger"}, nil)
	if m := len(changesOf(t, c, full.ID)); m != n {
		t.Errorf("a no-op update wrote %d changes", m-n)
	}

	// The change log holds each change with its before and after.
	cs := changesOf(t, c, full.ID)
	if diff := cmp.Diff([]string{"outlets/update/update_outlet", "outlets/update/update_outlet", "outlets/create/create_outlet"}, actions(cs)); diff != "" {
		t.Fatalf("changes (-want +got):\n%s", diff)
	}
	if cs[2].Before != nil || cs[2].After["name"] != "The Daily Ledger" || cs[2].After["website"] != "https://ledger.example/" {
		t.Errorf("create entry: before %v after %v", cs[2].Before, cs[2].After)
	}
	if cs[1].Before["website"] != "https://ledger.example/" || cs[1].After["website"] != nil || cs[1].Before["tier"] != 1.0 || cs[1].After["tier"] != 2.0 {
		t.Errorf("update entry: before %v after %v", cs[1].Before, cs[1].After)
	}
	if _, ok := cs[0].After["tier"]; ok || cs[0].Before["tier"] != 2.0 {
		t.Errorf("tier removal entry: before %v after %v", cs[0].Before, cs[0].After)
	}
}

func TestOutletRefusals(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	id := testenv.ID(t, c.Must("create_outlet", M{"name": "Base"}, nil))
	archived := testenv.ID(t, c.Must("create_outlet", M{"name": "Gone"}, nil))
	c.Must("archive_outlet", M{"id": archived}, nil)
	unknown := "7d9f2c1e-4b4a-4c56-9a43-1f1f2d3e4a5b"
	refuse(t, c, []refusal{
		{"no name", "create_outlet", M{"tier": 1}, repo.CodeInvalid, "name", "required"},
		{"blank name", "create_outlet", M{"name": "  "}, repo.CodeInvalid, "name", "empty"},
		{"bad type", "create_outlet", M{"name": "x", "type": "tabloid"}, repo.CodeInvalid, "type", "podcast_network"},
		{"tier 0 on create", "create_outlet", M{"name": "x", "tier": 0}, repo.CodeInvalid, "tier", "use 1 to 3"},
		{"tier 4", "create_outlet", M{"name": "x", "tier": 4}, repo.CodeInvalid, "tier", "out of range"},
		{"tier not integer", "create_outlet", M{"name": "x", "tier": 1.5}, repo.CodeInvalid, "tier", "whole number"},
		{"tier as string", "create_outlet", M{"name": "x", "tier": "1"}, repo.CodeInvalid, "tier", "whole number"},
		{"negative audience", "create_outlet", M{"name": "x", "audience_size": -1}, repo.CodeInvalid, "audience_size", "negative"},
		{"fractional audience", "create_outlet", M{"name": "x", "audience_size": 10.5}, repo.CodeInvalid, "audience_size", "whole number"},
		{"website without scheme", "create_outlet", M{"name": "x", "website": "ledger.example"}, repo.CodeInvalid, "website", "https://"},
		{"website ftp", "create_outlet", M{"name": "x", "website": "ftp://ledger.example"}, repo.CodeInvalid, "website", "http or https"},
		{"empty topic", "create_outlet", M{"name": "x", "topics": []string{"AI", " "}}, repo.CodeInvalid, "topics", "empty"},
		{"dollar key", "create_outlet", M{"name": "x", "social_links": M{"$where": "1"}}, repo.CodeInvalid, "social_links", "$where"},
		{"dotted key", "create_outlet", M{"name": "x", "social_links": M{"x.com": "a"}}, repo.CodeInvalid, "social_links", "x.com"},
		{"empty key", "create_outlet", M{"name": "x", "social_links": M{"": "a"}}, repo.CodeInvalid, "social_links", "empty"},
		{"nested dollar key", "create_outlet", M{"name": "x", "social_links": M{"a": M{"b": M{"$gt": 1}}}}, repo.CodeInvalid, "social_links.a.b", "$gt"},
		{"key in array", "create_outlet", M{"name": "x", "social_links": M{"a": []any{M{"b": []any{M{"c.d": 1}}}}}}, repo.CodeInvalid, "social_links.a.b", "c.d"},
		{"social links not object", "create_outlet", M{"name": "x", "social_links": "x"}, repo.CodeInvalid, "social_links", "object"},
		{"unknown argument", "create_outlet", M{"name": "x", "teir": 1}, repo.CodeInvalid, "teir", "unknown argument"},
		{"get bad id", "get_outlet", M{"id": "nope"}, repo.CodeInvalid, "id", "not a UUID"},
		{"get unknown", "get_outlet", M{"id": unknown}, repo.CodeNotFound, "", "outlet " + unknown},
		{"update unknown", "update_outlet", M{"id": unknown, "name": "x"}, repo.CodeNotFound, "", "outlet " + unknown},
		{"update nothing", "update_outlet", M{"id": id}, repo.CodeInvalid, "", "nothing to change"},
		{"update blank name", "update_outlet", M{"id": id, "name": ""}, repo.CodeInvalid, "name", "empty"},
		{"update bad type", "update_outlet", M{"id": id, "type": "x"}, repo.CodeInvalid, "type", "newspaper"},
		{"update tier -1", "update_outlet", M{"id": id, "tier": -1}, repo.CodeInvalid, "tier", "out of range"},
		{"update bad key", "update_outlet", M{"id": id, "social_links": M{"$x": 1}}, repo.CodeInvalid, "social_links", "$x"},
		{"update archived", "update_outlet", M{"id": archived, "name": "x"}, repo.CodeFailedPrecondition, "", "restore it"},
		{"archive archived", "archive_outlet", M{"id": archived}, repo.CodeFailedPrecondition, "", "already archived"},
		{"archive unknown", "archive_outlet", M{"id": unknown}, repo.CodeNotFound, "", "does not exist"},
		{"restore active", "restore_outlet", M{"id": id}, repo.CodeFailedPrecondition, "", "not archived"},
		{"list tier 4", "list_outlets", M{"tier": 4}, repo.CodeInvalid, "tier", "out of range"},
		{"list bad type", "list_outlets", M{"type": "tv"}, repo.CodeInvalid, "type", "publication"},
		{"list limit 201", "list_outlets", M{"limit": 201}, repo.CodeInvalid, "limit", "200"},
		{"list limit 0", "list_outlets", M{"limit": 0}, repo.CodeInvalid, "limit", "1 to 200"},
		{"list negative offset", "list_outlets", M{"offset": -1}, repo.CodeInvalid, "offset", "negative"},
		{"list misspelt filter", "list_outlets", M{"topics": "AI"}, repo.CodeInvalid, "topics", "unknown argument"},
	})
}

func TestListOutletsFilters(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	for _, o := range []M{
		{"name": "Ledger Daily", "type": "newspaper", "tier": 1, "website": "https://ledger.example", "topics": []string{"Finance", "AI"}},
		{"name": "AI Insider", "type": "online", "tier": 2, "website": "https://insider.example", "topics": []string{"AI policy"}},
		{"name": "Climate Cast", "type": "podcast_network", "tier": 1, "topics": []string{"climate", "ai"}},
		{"name": "Weekend (Magazine)", "type": "magazine", "tier": 3, "website": "https://mag.example/ledger", "topics": []string{"Culture"}},
		{"name": "No Tier Blog", "type": "blog"},
	} {
		c.Must("create_outlet", o, nil)
	}
	gone := testenv.ID(t, c.Must("create_outlet", M{"name": "Old Ledger", "type": "newspaper", "tier": 1, "topics": []string{"AI"}}, nil))
	c.Must("archive_outlet", M{"id": gone}, nil)

	cases := []struct {
		name string
		args M
		want []string
	}{
		{"all active", M{}, []string{"AI Insider", "Climate Cast", "Ledger Daily", "No Tier Blog", "Weekend (Magazine)"}},
		{"tier 1", M{"tier": 1}, []string{"Climate Cast", "Ledger Daily"}},
		{"tier 3", M{"tier": 3}, []string{"Weekend (Magazine)"}},
		{"type", M{"type": "newspaper"}, []string{"Ledger Daily"}},
		{"type nothing", M{"type": "wire_service"}, []string{}},
		{"topic is a whole element, any case", M{"topic": "ai"}, []string{"Climate Cast", "Ledger Daily"}},
		{"topic with spaces", M{"topic": "AI POLICY"}, []string{"AI Insider"}},
		{"topic part matches nothing", M{"topic": "polic"}, []string{}},
		{"topic regex is literal", M{"topic": "A."}, []string{}},
		{"search name any case", M{"search": "ledger"}, []string{"Ledger Daily", "Weekend (Magazine)"}},
		{"search website", M{"search": "insider.example"}, []string{"AI Insider"}},
		{"search is literal", M{"search": "(magazine)"}, []string{"Weekend (Magazine)"}},
		{"search pattern matches nothing", M{"search": ".*"}, []string{}},
		{"search operator text", M{"search": "$ne"}, []string{}},
		{"include archived", M{"tier": 1, "include_archived": true}, []string{"Climate Cast", "Ledger Daily", "Old Ledger"}},
		{"tier and type", M{"tier": 1, "type": "podcast_network"}, []string{"Climate Cast"}},
		{"tier and topic", M{"tier": 1, "topic": "finance"}, []string{"Ledger Daily"}},
		{"topic and search", M{"topic": "ai", "search": "cast"}, []string{"Climate Cast"}},
		{"all filters", M{"tier": 1, "type": "newspaper", "topic": "AI", "search": "ledger", "include_archived": true}, []string{"Ledger Daily", "Old Ledger"}},
		{"all filters, no match", M{"tier": 2, "type": "newspaper", "topic": "AI", "search": "ledger"}, []string{}},
	}
	for _, tc := range cases {
		l := list(t, c, "list_outlets", "outlets", tc.args)
		if diff := cmp.Diff(tc.want, l.names()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
		if l.Total != len(tc.want) || l.Showing != len(tc.want) || l.Limit != 50 || l.Offset != 0 {
			t.Errorf("%s: envelope total %d showing %d limit %d offset %d", tc.name, l.Total, l.Showing, l.Limit, l.Offset)
		}
	}
}

func TestListsPageWithoutSkipsOrRepeats(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	o := testenv.ID(t, c.Must("create_outlet", M{"name": "Anchor", "tier": 2}, nil))
	for i := range 7 {
		c.Must("create_outlet", M{"name": fmt.Sprintf("Outlet %d", i), "tier": 1, "topics": []string{"AI"}}, nil)
		c.Must("create_contact", M{"first_name": "Reporter", "last_name": fmt.Sprint(i), "beats": []string{"AI"}, "outlet_ids": []string{o}}, nil)
		c.Must("create_channel", M{"outlet_id": o, "type": "newsletter", "name": fmt.Sprintf("Letter %d", i)}, nil)
	}
	pageThrough(t, c, "list_outlets", "outlets", M{"tier": 1, "topic": "ai"}, 3, 7)
	pageThrough(t, c, "list_outlets", "outlets", M{}, 3, 8)
	pageThrough(t, c, "list_contacts", "contacts", M{"outlet_id": o, "beat": "AI"}, 3, 7)
	pageThrough(t, c, "list_channels", "channels", M{"outlet_id": o, "type": "newsletter"}, 3, 7)
	// Newest first.
	l := list(t, c, "list_outlets", "outlets", M{"limit": 2})
	if diff := cmp.Diff([]string{"Outlet 5", "Outlet 6"}, l.names()); diff != "" || l.Items[0].Name != "Outlet 6" {
		t.Errorf("first page %v; want Outlet 6 then Outlet 5", l.Items)
	}
}

func TestArchiveOutletDoesNotCascade(t *testing.T) {
	env := testenv.New(t)
	c := env.Client(env.AdminKey, "archive-session")
	o := testenv.ID(t, c.Must("create_outlet", M{"name": "Ledger", "tier": 1}, nil))
	ch := testenv.ID(t, c.Must("create_channel", M{"outlet_id": o, "type": "website", "name": "Site"}, nil))
	ct := testenv.ID(t, c.Must("create_contact", M{"first_name": "Ann", "last_name": "Lee", "outlet_ids": []string{o}}, nil))
	note := testenv.ID(t, c.Must("create_note", M{"title": "Met the editor", "outlet_ids": []string{o}}, nil))

	var arch outlet
	c.Must("archive_outlet", M{"id": o}, &arch)
	if arch.ArchivedAt == nil {
		t.Fatal("archive_outlet returned no archived_at")
	}
	if l := list(t, c, "list_outlets", "outlets", M{}); l.Total != 0 {
		t.Errorf("archived outlet listed: %v", l.Items)
	}
	if l := list(t, c, "list_outlets", "outlets", M{"include_archived": true}); l.Total != 1 {
		t.Errorf("include_archived: %v", l.Items)
	}
	// Channel and contact are untouched and still listed under the outlet.
	if l := list(t, c, "list_channels", "channels", M{"outlet_id": o}); diff(l.ids(), []string{ch}) != "" {
		t.Errorf("channels of the archived outlet: %v", l.Items)
	}
	if l := list(t, c, "list_contacts", "contacts", M{"outlet_id": o}); diff(l.ids(), []string{ct}) != "" {
		t.Errorf("contacts of the archived outlet: %v", l.Items)
	}
	for _, id := range []string{ch, ct, note} {
		if cs := changesOf(t, c, id); len(cs) != 1 {
			t.Errorf("record %s changed by the archive: %v", id, actions(cs))
		}
	}
	var chd struct {
		ArchivedAt *string `json:"archived_at"`
		Outlet     struct {
			ID       string
			Name     string
			Archived bool
		}
	}
	c.Must("get_channel", M{"id": ch}, &chd)
	if chd.ArchivedAt != nil || chd.Outlet.ID != o || chd.Outlet.Name != "Ledger" || !chd.Outlet.Archived {
		t.Errorf("get_channel after the outlet's archive: %+v", chd)
	}
	var ctd struct {
		Outlets []struct {
			OutletID       string `json:"outlet_id"`
			Name           string
			OutletArchived bool `json:"outlet_archived"`
		}
	}
	c.Must("get_contact", M{"id": ct}, &ctd)
	if len(ctd.Outlets) != 1 || ctd.Outlets[0].OutletID != o || ctd.Outlets[0].Name != "Ledger" || !ctd.Outlets[0].OutletArchived {
		t.Errorf("get_contact after the outlet's archive: %+v", ctd)
	}
	var nd struct {
		ArchivedAt *string `json:"archived_at"`
		Links      []struct {
			OutletID string `json:"outlet_id"`
			Entity   struct {
				Archived bool `json:"archived"`
			} `json:"entity"`
		}
	}
	c.Must("get_note", M{"id": note}, &nd)
	if nd.ArchivedAt != nil || len(nd.Links) != 1 || nd.Links[0].OutletID != o || !nd.Links[0].Entity.Archived {
		t.Errorf("get_note after the outlet's archive: %+v", nd)
	}
	var od outlet
	c.Must("get_outlet", M{"id": o}, &od)
	if od.ArchivedAt == nil || len(od.Channels) != 1 || len(od.Contacts) != 1 {
		t.Errorf("get_outlet of an archived outlet: %+v", od)
	}

	// An archived outlet cannot be linked to.
	refuse(t, c, []refusal{
		{"channel on archived outlet", "create_channel", M{"outlet_id": o, "type": "print"}, repo.CodeNotFound, "outlet_id", "archived"},
		{"contact with archived outlet", "create_contact", M{"first_name": "B", "last_name": "C", "outlet_ids": []string{o}}, repo.CodeNotFound, "outlet_ids", "archived"},
		{"affiliate archived outlet", "add_contact_outlet", M{"contact_id": ct, "outlet_id": o}, repo.CodeNotFound, "outlet_id", "archived"},
	})

	var rest outlet
	c.Must("restore_outlet", M{"id": o}, &rest)
	if rest.ArchivedAt != nil {
		t.Errorf("restore left archived_at %v", *rest.ArchivedAt)
	}
	cs := changesOf(t, c, o)
	if diff := cmp.Diff([]string{"outlets/restore/restore_outlet", "outlets/archive/archive_outlet", "outlets/create/create_outlet"}, actions(cs)); diff != "" {
		t.Fatalf("outlet changes (-want +got):\n%s", diff)
	}
	if cs[1].Before["archived_at"] != nil || cs[1].After["archived_at"] == nil || cs[0].Before["archived_at"] == nil || cs[0].After["archived_at"] != nil {
		t.Errorf("archive/restore entries: %v -> %v; %v -> %v", cs[1].Before["archived_at"], cs[1].After["archived_at"], cs[0].Before["archived_at"], cs[0].After["archived_at"])
	}
}

func diff(got, want []string) string { return cmp.Diff(want, got) }

// TestToolsListDescribesDirectoryTools checks that every directory tool is
// listed with annotations and a description on the tool and on every
// parameter, and that enums list their values.
func TestToolsListDescribesDirectoryTools(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	res, err := c.Session.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // tool: read, create or change
		"create_outlet": "create", "get_outlet": "read", "list_outlets": "read", "update_outlet": "change", "archive_outlet": "change", "restore_outlet": "change",
		"create_contact": "create", "get_contact": "read", "list_contacts": "read", "update_contact": "change", "add_contact_outlet": "change",
		"remove_contact_outlet": "change", "archive_contact": "change", "restore_contact": "change",
		"create_channel": "create", "get_channel": "read", "list_channels": "read", "update_channel": "change", "archive_channel": "change", "restore_channel": "change",
	}
	seen := map[string]bool{}
	for _, tool := range res.Tools {
		k, ok := want[tool.Name]
		if !ok {
			continue
		}
		seen[tool.Name] = true
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
		a := tool.Annotations
		switch {
		case a == nil:
			t.Errorf("%s has no annotations", tool.Name)
			continue
		case k == "read" && !a.ReadOnlyHint:
			t.Errorf("%s: readOnlyHint false", tool.Name)
		case k == "create" && (a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint):
			t.Errorf("%s: a create must be destructiveHint false", tool.Name)
		case k == "change" && (a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint):
			t.Errorf("%s: a change must be destructiveHint true", tool.Name)
		}
		if a.OpenWorldHint == nil || *a.OpenWorldHint {
			t.Errorf("%s: openWorldHint must be false", tool.Name)
		}
		raw, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Properties map[string]struct {
				Description string
				Enum        []any
				Items       *struct{ Enum []any }
			}
		}
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatal(err)
		}
		for name, p := range schema.Properties {
			if p.Description == "" {
				t.Errorf("%s.%s has no description", tool.Name, name)
			}
			if name == "type" && len(p.Enum) == 0 {
				t.Errorf("%s.type lists no allowed values", tool.Name)
			}
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("tools/list lacks %s", name)
		}
	}
	// PRT tools keep their parameters.
	params := func(name string) []string {
		for _, tool := range res.Tools {
			if tool.Name == name {
				raw, _ := json.Marshal(tool.InputSchema)
				var s struct{ Properties map[string]any }
				json.Unmarshal(raw, &s)
				var out []string
				for k := range s.Properties {
					out = append(out, k)
				}
				slices.Sort(out)
				return out
			}
		}
		return nil
	}
	for name, want := range map[string][]string{
		"list_outlets":   {"include_archived", "limit", "offset", "search", "tier", "topic", "type"},
		"list_contacts":  {"beat", "include_archived", "is_freelance", "limit", "offset", "outlet_id", "search"},
		"list_channels":  {"include_archived", "limit", "offset", "outlet_id", "type"},
		"get_contact":    {"id"},
		"get_channel":    {"id"},
		"create_channel": {"attributes", "description", "frequency", "name", "outlet_id", "type", "url"},
	} {
		if d := cmp.Diff(want, params(name)); d != "" {
			t.Errorf("%s parameters (-want +got):\n%s", name, d)
		}
	}
}
