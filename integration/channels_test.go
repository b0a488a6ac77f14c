package integration

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"outreach/integration/testenv"
	"outreach/repo"
)

// channel is a channel as the tests read it.
type channel struct {
	ID          string         `json:"id"`
	OutletID    string         `json:"outlet_id"`
	Type        string         `json:"type"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	URL         string         `json:"url"`
	Frequency   string         `json:"frequency"`
	Attributes  map[string]any `json:"attributes"`
	ArchivedAt  *string        `json:"archived_at"`
}

func TestCreateGetUpdateChannel(t *testing.T) {
	env := testenv.New(t)
	c := env.Client(env.AdminKey, "channel-session")
	o := testenv.ID(t, c.Must("create_outlet", M{"name": "Ledger", "tier": 1, "website": "https://ledger.example"}, nil))

	var ch channel
	c.Must("create_channel", M{"outlet_id": o, "type": "newsletter", "name": "Morning Briefing", "description": "Daily digest",
		"url": "https://ledger.example/briefing", "frequency": "daily", "attributes": M{"subscriber_count": 500000, "paywall": false}}, &ch)
	want := channel{ID: ch.ID, OutletID: o, Type: "newsletter", Name: "Morning Briefing", Description: "Daily digest",
		URL: "https://ledger.example/briefing", Frequency: "daily", Attributes: map[string]any{"subscriber_count": 500000.0, "paywall": false}}
	if diff := cmp.Diff(want, ch); diff != "" {
		t.Errorf("created channel (-want +got):\n%s", diff)
	}
	var min channel
	c.Must("create_channel", M{"outlet_id": o, "type": "podcast"}, &min)
	if diff := cmp.Diff(channel{ID: min.ID, OutletID: o, Type: "podcast"}, min); diff != "" {
		t.Errorf("minimal channel (-want +got):\n%s", diff)
	}

	var got struct {
		channel
		Outlet struct {
			ID, Name, Type, Website string
			Tier                    int
			Archived                bool
		}
	}
	c.Must("get_channel", M{"id": ch.ID}, &got)
	if diff := cmp.Diff(want, got.channel); diff != "" {
		t.Errorf("get_channel (-want +got):\n%s", diff)
	}
	if got.Outlet.ID != o || got.Outlet.Name != "Ledger" || got.Outlet.Type != "publication" || got.Outlet.Tier != 1 ||
		got.Outlet.Website != "https://ledger.example" || got.Outlet.Archived {
		t.Errorf("parent outlet %+v", got.Outlet)
	}

	var od outlet
	c.Must("get_outlet", M{"id": o}, &od)
	if len(od.Channels) != 2 {
		t.Fatalf("get_outlet channels %+v", od.Channels)
	}

	var upd channel
	c.Must("update_channel", M{"id": ch.ID, "type": "website", "frequency": "", "url": "", "attributes": M{"paywall": true}, "name": "Briefing"}, &upd)
	want.Type, want.Frequency, want.URL, want.Attributes, want.Name = "website", "", "", map[string]any{"paywall": true}, "Briefing"
	if diff := cmp.Diff(want, upd); diff != "" {
		t.Errorf("updated channel (-want +got):\n%s", diff)
	}

	c.Must("archive_channel", M{"id": ch.ID}, &upd)
	if upd.ArchivedAt == nil {
		t.Error("archive_channel set no archived_at")
	}
	c.Must("get_outlet", M{"id": o}, &od)
	if len(od.Channels) != 2 || od.Channels[0].ID != min.ID || od.Channels[1].ID != ch.ID || !od.Channels[1].Archived || od.Channels[0].Archived {
		t.Errorf("get_outlet channels after an archive (active first): %+v", od.Channels)
	}
	// A channel may be restored while its outlet is archived.
	c.Must("archive_outlet", M{"id": o}, nil)
	c.Must("restore_channel", M{"id": ch.ID}, &upd)
	if upd.ArchivedAt != nil {
		t.Error("restore_channel left archived_at")
	}

	cs := changesOf(t, c, ch.ID)
	if diff := cmp.Diff([]string{"channels/restore/restore_channel", "channels/archive/archive_channel",
		"channels/update/update_channel", "channels/create/create_channel"}, actions(cs)); diff != "" {
		t.Fatalf("changes (-want +got):\n%s", diff)
	}
	u := cs[2]
	if u.Before["type"] != "newsletter" || u.After["type"] != "website" || u.Before["frequency"] != "daily" || u.After["frequency"] != nil ||
		u.After["outlet_id"] != o || u.Before["attributes"].(map[string]any)["subscriber_count"] != 500000.0 {
		t.Errorf("update entry: before %v after %v", u.Before, u.After)
	}
	if cs[3].Before != nil || cs[3].After["outlet_id"] != o || cs[3].After["name"] != "Morning Briefing" {
		t.Errorf("create entry: before %v after %v", cs[3].Before, cs[3].After)
	}
}

func TestChannelRefusals(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	o := testenv.ID(t, c.Must("create_outlet", M{"name": "Ledger"}, nil))
	other := testenv.ID(t, c.Must("create_outlet", M{"name": "Cast"}, nil))
	ch := testenv.ID(t, c.Must("create_channel", M{"outlet_id": o, "type": "website"}, nil))
	archived := testenv.ID(t, c.Must("create_channel", M{"outlet_id": o, "type": "print"}, nil))
	c.Must("archive_channel", M{"id": archived}, nil)
	unknown := "3e2d1c0b-9a8f-4e7d-8c6b-5a4f3e2d1c0b"
	refuse(t, c, []refusal{
		{"no outlet", "create_channel", M{"type": "website"}, repo.CodeInvalid, "outlet_id", "required"},
		{"no type", "create_channel", M{"outlet_id": o}, repo.CodeInvalid, "type", "required"},
		{"bad type", "create_channel", M{"outlet_id": o, "type": "radio"}, repo.CodeInvalid, "type", "tv_broadcast"},
		{"bad frequency", "create_channel", M{"outlet_id": o, "type": "website", "frequency": "hourly"}, repo.CodeInvalid, "frequency", "quarterly"},
		{"bad url", "create_channel", M{"outlet_id": o, "type": "website", "url": "javascript:alert(1)"}, repo.CodeInvalid, "url", "http or https"},
		{"bad attribute key", "create_channel", M{"outlet_id": o, "type": "website", "attributes": M{"$inc": 1}}, repo.CodeInvalid, "attributes", "$inc"},
		{"dotted attribute key", "create_channel", M{"outlet_id": o, "type": "website", "attributes": M{"a": M{"b.c": 1}}}, repo.CodeInvalid, "attributes.a", "b.c"},
		{"outlet not uuid", "create_channel", M{"outlet_id": "ledger", "type": "website"}, repo.CodeInvalid, "outlet_id", "UUID"},
		{"unknown outlet", "create_channel", M{"outlet_id": unknown, "type": "website"}, repo.CodeNotFound, "outlet_id", unknown},
		{"get unknown", "get_channel", M{"id": unknown}, repo.CodeNotFound, "", "channel " + unknown},
		{"move to another outlet", "update_channel", M{"id": ch, "outlet_id": other}, repo.CodeInvalid, "outlet_id", "cannot be moved"},
		{"update unknown", "update_channel", M{"id": unknown, "name": "x"}, repo.CodeNotFound, "", "channel " + unknown},
		{"update nothing", "update_channel", M{"id": ch}, repo.CodeInvalid, "", "nothing to change"},
		{"update bad type", "update_channel", M{"id": ch, "type": ""}, repo.CodeInvalid, "type", "newsletter"},
		{"update bad frequency", "update_channel", M{"id": ch, "frequency": "Daily"}, repo.CodeInvalid, "frequency", "daily"},
		{"update archived", "update_channel", M{"id": archived, "name": "x"}, repo.CodeFailedPrecondition, "", "restore it"},
		{"archive archived", "archive_channel", M{"id": archived}, repo.CodeFailedPrecondition, "", "already archived"},
		{"restore active", "restore_channel", M{"id": ch}, repo.CodeFailedPrecondition, "", "not archived"},
		{"list bad type", "list_channels", M{"type": "blog"}, repo.CodeInvalid, "type", "podcast"},
		{"list unknown outlet", "list_channels", M{"outlet_id": unknown}, repo.CodeNotFound, "outlet_id", unknown},
		{"list outlet not uuid", "list_channels", M{"outlet_id": "x"}, repo.CodeInvalid, "outlet_id", "UUID"},
		{"list limit 201", "list_channels", M{"limit": 201}, repo.CodeInvalid, "limit", "200"},
		{"list misspelt filter", "list_channels", M{"outlet": o}, repo.CodeInvalid, "outlet", "unknown argument"},
	})
}

func TestListChannelsFilters(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	ledger := testenv.ID(t, c.Must("create_outlet", M{"name": "Ledger"}, nil))
	cast := testenv.ID(t, c.Must("create_outlet", M{"name": "Cast"}, nil))
	for _, ch := range []M{
		{"outlet_id": ledger, "type": "website", "name": "Ledger site"},
		{"outlet_id": ledger, "type": "newsletter", "name": "Ledger letter"},
		{"outlet_id": cast, "type": "podcast", "name": "Cast show"},
		{"outlet_id": cast, "type": "newsletter", "name": "Cast letter"},
	} {
		c.Must("create_channel", ch, nil)
	}
	gone := testenv.ID(t, c.Must("create_channel", M{"outlet_id": ledger, "type": "newsletter", "name": "Old letter"}, nil))
	c.Must("archive_channel", M{"id": gone}, nil)
	cases := []struct {
		name string
		args M
		want []string
	}{
		{"all active", M{}, []string{"Cast letter", "Cast show", "Ledger letter", "Ledger site"}},
		{"outlet", M{"outlet_id": ledger}, []string{"Ledger letter", "Ledger site"}},
		{"type", M{"type": "newsletter"}, []string{"Cast letter", "Ledger letter"}},
		{"type nothing", M{"type": "award"}, []string{}},
		{"outlet and type", M{"outlet_id": cast, "type": "newsletter"}, []string{"Cast letter"}},
		{"include archived", M{"type": "newsletter", "include_archived": true}, []string{"Cast letter", "Ledger letter", "Old letter"}},
		{"all filters", M{"outlet_id": ledger, "type": "newsletter", "include_archived": true}, []string{"Ledger letter", "Old letter"}},
	}
	for _, tc := range cases {
		l := list(t, c, "list_channels", "channels", tc.args)
		if diff := cmp.Diff(tc.want, l.names()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
		if l.Total != len(tc.want) || l.Showing != len(tc.want) {
			t.Errorf("%s: total %d showing %d", tc.name, l.Total, l.Showing)
		}
	}
}

// TestBuildAMediaListAndFindItAgain is what a PR person does on day one:
// outlets with tiers, their channels, journalists with beats and
// affiliations; then find each piece again by every filter.
func TestBuildAMediaListAndFindItAgain(t *testing.T) {
	env := testenv.New(t)
	agent := env.Client(env.Key("read", "write"), "media-list")

	newOutlet := func(args M) string { return testenv.ID(t, agent.Must("create_outlet", args, nil)) }
	techDaily := newOutlet(M{"name": "Tech Daily", "type": "online", "tier": 1, "website": "https://techdaily.example", "topics": []string{"AI", "Startups"}, "audience_size": 4000000})
	bizWeekly := newOutlet(M{"name": "Business Weekly", "type": "magazine", "tier": 2, "website": "https://bizweekly.example", "topics": []string{"Finance", "AI"}})
	futurePod := newOutlet(M{"name": "Future Pod Network", "type": "podcast_network", "tier": 1, "topics": []string{"Technology"}})
	localNews := newOutlet(M{"name": "Local Gazette", "type": "newspaper", "tier": 3, "topics": []string{"Community"}})

	newChannel := func(args M) string { return testenv.ID(t, agent.Must("create_channel", args, nil)) }
	newChannel(M{"outlet_id": techDaily, "type": "website", "url": "https://techdaily.example"})
	aiLetter := newChannel(M{"outlet_id": techDaily, "type": "newsletter", "name": "AI This Week", "frequency": "weekly", "attributes": M{"subscriber_count": 120000}})
	newChannel(M{"outlet_id": futurePod, "type": "podcast", "name": "Next Up", "frequency": "weekly"})
	newChannel(M{"outlet_id": bizWeekly, "type": "print", "frequency": "weekly"})

	newContact := func(args M) string { return testenv.ID(t, agent.Must("create_contact", args, nil)) }
	priya := newContact(M{"first_name": "Priya", "last_name": "Shah", "email": "priya@techdaily.example", "title": "AI Editor", "beats": []string{"AI", "Policy"}, "outlet_ids": []string{techDaily}})
	marco := newContact(M{"first_name": "Marco", "last_name": "Rossi", "email": "marco@freelance.example", "is_freelance": true, "beats": []string{"AI", "Finance"}})
	agent.Must("add_contact_outlet", M{"contact_id": marco, "outlet_id": bizWeekly, "role": "contributor", "is_primary": true}, nil)
	agent.Must("add_contact_outlet", M{"contact_id": marco, "outlet_id": futurePod, "role": "guest host"}, nil)
	dana := newContact(M{"first_name": "Dana", "last_name": "Kim", "email": "dana@futurepod.example", "title": "Producer", "beats": []string{"Technology"}, "outlet_ids": []string{futurePod}})
	newContact(M{"first_name": "Sam", "last_name": "Lowe", "beats": []string{"Community"}, "outlet_ids": []string{localNews},
		"do_not_contact": true, "do_not_contact_reason": "asked us to stop"})

	// Find it again, by every filter.
	for _, tc := range []struct {
		tool, noun string
		args       M
		want       []string
	}{
		{"list_outlets", "outlets", M{"tier": 1}, []string{"Future Pod Network", "Tech Daily"}},
		{"list_outlets", "outlets", M{"topic": "ai"}, []string{"Business Weekly", "Tech Daily"}},
		{"list_outlets", "outlets", M{"type": "podcast_network"}, []string{"Future Pod Network"}},
		{"list_outlets", "outlets", M{"search": "WEEKLY"}, []string{"Business Weekly"}},
		{"list_outlets", "outlets", M{"tier": 1, "topic": "AI"}, []string{"Tech Daily"}},
		{"list_contacts", "contacts", M{"beat": "ai"}, []string{"Marco Rossi", "Priya Shah"}},
		{"list_contacts", "contacts", M{"outlet_id": futurePod}, []string{"Dana Kim", "Marco Rossi"}},
		{"list_contacts", "contacts", M{"is_freelance": true}, []string{"Marco Rossi"}},
		{"list_contacts", "contacts", M{"search": "techdaily"}, []string{"Priya Shah"}},
		{"list_contacts", "contacts", M{"beat": "AI", "outlet_id": bizWeekly}, []string{"Marco Rossi"}},
		{"list_channels", "channels", M{"outlet_id": techDaily, "type": "newsletter"}, []string{"AI This Week"}},
		{"list_channels", "channels", M{"type": "podcast"}, []string{"Next Up"}},
	} {
		if l := list(t, agent, tc.tool, tc.noun, tc.args); diff(l.names(), tc.want) != "" {
			t.Errorf("%s %v = %v; want %v", tc.tool, tc.args, l.names(), tc.want)
		}
	}

	var od outlet
	agent.Must("get_outlet", M{"id": futurePod}, &od)
	var roles []string
	for _, ct := range od.Contacts {
		roles = append(roles, ct.Name+"/"+ct.Role)
	}
	if diff := cmp.Diff([]string{"Dana Kim/", "Marco Rossi/guest host"}, roles); diff != "" || len(od.Channels) != 1 || od.Channels[0].Name != "Next Up" {
		t.Errorf("Future Pod Network: contacts (-want +got):\n%s\nchannels %+v", diff, od.Channels)
	}
	var marcoD struct {
		Outlets []struct {
			Name, Role string
			IsPrimary  bool `json:"is_primary"`
		}
	}
	agent.Must("get_contact", M{"id": marco}, &marcoD)
	if len(marcoD.Outlets) != 2 || marcoD.Outlets[0].Name != "Business Weekly" || !marcoD.Outlets[0].IsPrimary || marcoD.Outlets[1].Role != "guest host" {
		t.Errorf("Marco's outlets %+v", marcoD.Outlets)
	}
	var letter struct{ Outlet struct{ Name string } }
	agent.Must("get_channel", M{"id": aiLetter}, &letter)
	if letter.Outlet.Name != "Tech Daily" {
		t.Errorf("AI This Week's outlet %q", letter.Outlet.Name)
	}
	// Everything the agent did is in its session's change log.
	var log struct{ Total int }
	agent.Must("get_change_log", M{"session_id": "media-list"}, &log)
	if log.Total != 4+4+4+2 {
		t.Errorf("session changes %d; want 14", log.Total)
	}
	_, _ = priya, dana
}
