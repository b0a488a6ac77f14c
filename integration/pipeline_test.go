package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/pipeline"
)

// smallDirectory is a small set of outlets, channels and contacts.
type smallDirectory struct {
	outletA, outletB, channelA, channelB, contact1, contact2 string
}

// newDirectory makes the directory through the directory tools.
func newDirectory(t *testing.T, env *testenv.Env) smallDirectory {
	t.Helper()
	c := env.Admin()
	var d smallDirectory
	d.outletA = mk(t, c, "create_outlet", M{"name": "Daily Planet", "type": "newspaper", "tier": 1})
	d.outletB = mk(t, c, "create_outlet", M{"name": "Smallville Ledger", "type": "newspaper", "tier": 2})
	d.channelA = mk(t, c, "create_channel", M{"outlet_id": d.outletA, "type": "website", "name": "dailyplanet.com"})
	d.channelB = mk(t, c, "create_channel", M{"outlet_id": d.outletB, "type": "podcast", "name": "Ledger Talk"})
	d.contact1 = mk(t, c, "create_contact", M{"first_name": "Lois", "last_name": "Lane", "email": "lois@planet.example"})
	d.contact2 = mk(t, c, "create_contact", M{"first_name": "Jimmy", "last_name": "Olsen"})
	return d
}

type opportunity struct {
	ID           string   `json:"id"`
	Title        string   `json:"title"`
	CampaignID   string   `json:"campaign_id"`
	OutletID     string   `json:"outlet_id"`
	ChannelID    string   `json:"channel_id"`
	Stage        string   `json:"stage"`
	Priority     string   `json:"priority"`
	LostReason   string   `json:"lost_reason"`
	ContactIDs   []string `json:"contact_ids"`
	StageHistory []struct {
		Stage      string    `json:"stage"`
		At         time.Time `json:"at"`
		LostReason string    `json:"lost_reason"`
		NoteID     string    `json:"note_id"`
		By         struct {
			UserID    string `json:"user_id"`
			AgentID   string `json:"agent_id"`
			SessionID string `json:"session_id"`
		} `json:"by"`
	} `json:"stage_history"`
}

type metrics struct {
	Opportunities struct {
		Total, Open, Won, Lost int
		ByStage                map[string]int `json:"by_stage"`
	}
	WinRate  *float64 `json:"win_rate"`
	Coverage struct {
		Total       int
		ByType      map[string]int `json:"by_type"`
		BySentiment map[string]int `json:"by_sentiment"`
		Tier1       int            `json:"tier1"`
		TotalReach  int64          `json:"total_reach"`
	}
	OverdueNextActions int `json:"overdue_next_actions"`
}

func generalID(t *testing.T, c *testenv.Client) string {
	t.Helper()
	var l struct {
		Total     int
		Campaigns []struct{ ID, Name string }
	}
	c.Must("list_campaigns", M{"search": "General"}, &l)
	for _, x := range l.Campaigns {
		if x.Name == "General" {
			return x.ID
		}
	}
	t.Fatalf("no General campaign: %+v", l)
	return ""
}

func day(offset int) string { return time.Now().UTC().AddDate(0, 0, offset).Format(time.DateOnly) }

// TestCampaignPipelineAndMetrics is the end-to-end case: a campaign
// whose opportunities move through the stages, coverage recorded, and the
// campaign's metrics checked against figures computed by hand.
func TestCampaignPipelineAndMetrics(t *testing.T) {
	env := testenv.New(t)
	d := newDirectory(t, env)
	c := env.Client(env.AdminKey, "pipeline-session")
	campaign := testenv.ID(t, c.Must("create_campaign", M{"name": "Spring launch", "starts_on": "2026-03-01", "ends_on": "2026-05-31", "target_placements": 5}, nil))

	newOpp := func(args M) string {
		args["campaign_id"] = campaign
		return testenv.ID(t, c.Must("create_opportunity", args, nil))
	}
	move := func(id, stage string, extra M) opportunity {
		t.Helper()
		args := M{"id": id, "stage": stage}
		for k, v := range extra {
			args[k] = v
		}
		var o opportunity
		c.Must("update_opportunity_stage", args, &o)
		return o
	}

	// o1 goes all the way to won, with a step back on the way.
	o1 := newOpp(M{"title": "Feature in the Planet", "outlet_id": d.outletA, "contact_ids": []string{d.contact1}, "priority": "high"})
	path := []string{"drafting", "pitched", "drafting", "pitched", "responded", "in_progress", "placed", "published", "won"}
	for _, st := range path {
		move(o1, st, nil)
	}
	// o2 is lost: refused without a reason, accepted with one.
	o2 := newOpp(M{"title": "Ledger interview", "outlet_id": d.outletB, "stage": "pitched"})
	e := c.Fail("update_opportunity_stage", M{"id": o2, "stage": "lost"}, repo.CodeInvalid)
	if e.Field != "lost_reason" {
		t.Errorf("lost without reason: field %q, want lost_reason", e.Field)
	}
	lost := move(o2, "lost", M{"lost_reason": "went with a competitor"})
	if lost.LostReason != "went with a competitor" {
		t.Errorf("lost_reason = %q", lost.LostReason)
	}
	// o3: won, refused leave without reopen, reopened to in_progress.
	o3 := newOpp(M{"title": "Planet website piece", "channel_id": d.channelA})
	move(o3, "won", nil)
	e = c.Fail("update_opportunity_stage", M{"id": o3, "stage": "pitched"}, repo.CodeFailedPrecondition)
	if !strings.Contains(e.Message, "reopen") {
		t.Errorf("leaving won without reopen: message %q does not name reopen", e.Message)
	}
	reopened := move(o3, "in_progress", M{"reopen": true})
	if reopened.OutletID != d.outletA {
		t.Errorf("o3 outlet = %q, want the channel's outlet %s", reopened.OutletID, d.outletA)
	}
	// o4 is overdue, o5 is not, o6 is overdue but archived.
	newOpp(M{"title": "Overdue follow-up", "next_action": "call Lois", "next_action_date": day(-2)})
	newOpp(M{"title": "Future follow-up", "stage": "drafting", "next_action": "send draft", "next_action_date": day(3)})
	o6 := newOpp(M{"title": "Dropped idea", "stage": "pitched", "next_action_date": day(-5)})
	c.Must("archive_opportunity", M{"id": o6}, nil)

	cov := func(args M) string { return testenv.ID(t, c.Must("create_coverage", args, nil)) }
	cv1 := cov(M{"title": "Launch day", "url": "https://planet.example/launch", "published_at": "2026-03-10", "opportunity_id": o1, "type": "article", "sentiment": "positive", "reach": 1000, "contact_ids": []string{d.contact1}})
	cov(M{"title": "Ledger chat", "published_at": "2026-03-12T09:00:00Z", "opportunity_id": o1, "outlet_id": d.outletB, "type": "interview", "sentiment": "neutral", "reach": 500})
	cov(M{"title": "Planet on air", "published_at": "2026-03-15", "opportunity_id": o3, "type": "segment", "sentiment": "positive"})
	cv4 := cov(M{"title": "Ledger pan", "published_at": "2026-03-16", "opportunity_id": o2, "sentiment": "negative", "reach": 250})
	c.Must("archive_coverage", M{"id": cv4}, nil)
	cov(M{"title": "Unprompted mention", "published_at": "2026-03-17", "outlet_id": d.outletA, "sentiment": "mixed", "reach": 99})

	var got struct {
		Name    string
		Metrics metrics
	}
	c.Must("get_campaign", M{"id": campaign}, &got)
	var want metrics
	want.Opportunities.Total, want.Opportunities.Open, want.Opportunities.Won, want.Opportunities.Lost = 5, 3, 1, 1
	want.Opportunities.ByStage = map[string]int{"researching": 1, "drafting": 1, "pitched": 0, "responded": 0, "in_progress": 1,
		"placed": 0, "published": 0, "won": 1, "lost": 1}
	half := 0.5
	want.WinRate = &half
	want.Coverage.Total = 3
	want.Coverage.ByType = map[string]int{"article": 1, "interview": 1, "review": 0, "opinion": 0, "listicle": 0, "roundup": 0,
		"segment": 1, "appearance": 0, "award_win": 0, "other": 0}
	want.Coverage.BySentiment = map[string]int{"positive": 2, "neutral": 1, "negative": 0, "mixed": 0, "unspecified": 0}
	want.Coverage.Tier1 = 2 // cv1 (outlet from its opportunity) and cv3 (from the channel via o3)
	want.Coverage.TotalReach = 1500
	want.OverdueNextActions = 1
	if diff := cmp.Diff(want, got.Metrics); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}

	// Metrics are computed, never stored: restoring o6 counts it at once.
	c.Must("restore_opportunity", M{"id": o6}, nil)
	c.Must("get_campaign", M{"id": campaign}, &got)
	if got.Metrics.Opportunities.Total != 6 || got.Metrics.OverdueNextActions != 2 || got.Metrics.Opportunities.ByStage["pitched"] != 1 {
		t.Errorf("after restore: %+v", got.Metrics.Opportunities)
	}

	var list struct {
		Campaigns []struct {
			ID       string
			Headline map[string]int
		}
	}
	c.Must("list_campaigns", M{"search": "spring"}, &list)
	if len(list.Campaigns) != 1 || list.Campaigns[0].ID != campaign {
		t.Fatalf("list_campaigns search: %+v", list)
	}
	if diff := cmp.Diff(map[string]int{"opportunities": 6, "open": 4, "won": 1, "lost": 1, "coverage": 3}, list.Campaigns[0].Headline); diff != "" {
		t.Errorf("headline (-want +got):\n%s", diff)
	}

	// get_opportunity: the stage history, attributed, and the related records.
	var detail struct {
		opportunity
		Campaign     map[string]any
		Outlet       map[string]any
		Channel      map[string]any
		Contacts     []map[string]any
		Coverage     []map[string]any
		EmailThreads []map[string]any `json:"email_threads"`
	}
	c.Must("get_opportunity", M{"id": o1}, &detail)
	var stages []string
	for i, h := range detail.StageHistory {
		stages = append(stages, h.Stage)
		if h.By.UserID != env.AdminUserID || h.By.AgentID == "" || h.By.SessionID != "pipeline-session" {
			t.Errorf("history[%d].by = %+v", i, h.By)
		}
		if i > 0 && h.At.Before(detail.StageHistory[i-1].At) {
			t.Errorf("history[%d] is older than the entry before it", i)
		}
	}
	if diff := cmp.Diff(append([]string{"researching"}, path...), stages); diff != "" {
		t.Errorf("stage history (-want +got):\n%s", diff)
	}
	if detail.Campaign["name"] != "Spring launch" || detail.Outlet["name"] != "Daily Planet" || detail.Channel != nil {
		t.Errorf("related: campaign %v outlet %v channel %v", detail.Campaign, detail.Outlet, detail.Channel)
	}
	if len(detail.Contacts) != 1 || detail.Contacts[0]["id"] != d.contact1 || detail.Contacts[0]["last_name"] != "Lane" {
		t.Errorf("contacts = %v", detail.Contacts)
	}
	if len(detail.Coverage) != 2 || detail.Coverage[1]["id"] != cv1 || detail.Coverage[1]["published_at"] != "2026-03-10T00:00:00Z" {
		t.Errorf("coverage (newest first) = %v", detail.Coverage)
	}
	if detail.EmailThreads == nil || len(detail.EmailThreads) != 0 {
		t.Errorf("email_threads = %v, want []", detail.EmailThreads)
	}

	// Coverage appears in the interaction log of its opportunity, outlet and
	// contacts, summarised as "<type> - <sentiment> - <url>".
	for _, scope := range []M{{"opportunity_id": o1}, {"outlet_id": d.outletA}, {"contact_id": d.contact1}} {
		var il struct {
			Entries []struct {
				Type, ID, Title, Summary string
				DetailType               string `json:"detail_type"`
			}
		}
		c.Must("get_interaction_log", scope, &il)
		found := false
		for _, en := range il.Entries {
			if en.ID == cv1 {
				found = true
				if en.Type != "coverage" || en.DetailType != "article" || en.Summary != "article - positive - https://planet.example/launch" {
					t.Errorf("interaction log %v: %+v", scope, en)
				}
			}
		}
		if !found {
			t.Errorf("interaction log %v lacks coverage %s: %+v", scope, cv1, il.Entries)
		}
	}

	// The change log has one entry per stage change, with before and after.
	var log struct {
		Total   int
		Changes []struct {
			Action, Tool  string
			Before, After map[string]any
		}
	}
	c.Must("get_change_log", M{"record_id": o1, "limit": 200}, &log)
	var moves []string
	for i := len(log.Changes) - 1; i >= 0; i-- {
		ch := log.Changes[i]
		if ch.Tool == "update_opportunity_stage" {
			if ch.Action != audit.ActionUpdate {
				t.Errorf("stage change action = %s", ch.Action)
			}
			moves = append(moves, ch.Before["stage"].(string)+">"+ch.After["stage"].(string))
		}
	}
	wantMoves := []string{"researching>drafting", "drafting>pitched", "pitched>drafting", "drafting>pitched", "pitched>responded",
		"responded>in_progress", "in_progress>placed", "placed>published", "published>won"}
	if diff := cmp.Diff(wantMoves, moves); diff != "" {
		t.Errorf("stage changes in the change log (-want +got):\n%s", diff)
	}
	if log.Total != len(path)+1 {
		t.Errorf("change log of o1: %d entries, want %d (create + moves)", log.Total, len(path)+1)
	}
}

func TestGeneralCampaign(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	general := generalID(t, c)
	var o opportunity
	c.Must("create_opportunity", M{"title": "No campaign given"}, &o)
	if o.CampaignID != general || o.Stage != "researching" || o.Priority != "medium" {
		t.Errorf("defaults: %+v", o)
	}
	var detail struct {
		Campaign     map[string]any
		Outlet       map[string]any
		Contacts     []map[string]any
		Coverage     []map[string]any
		EmailThreads []map[string]any `json:"email_threads"`
	}
	c.Must("get_opportunity", M{"id": o.ID}, &detail)
	if detail.Campaign["name"] != "General" || detail.Outlet != nil || detail.Contacts == nil || len(detail.Contacts) != 0 ||
		detail.Coverage == nil || detail.EmailThreads == nil {
		t.Errorf("get_opportunity without links: %+v", detail)
	}
	c.Fail("archive_campaign", M{"id": general}, repo.CodeFailedPrecondition)
	c.Fail("update_campaign", M{"id": general, "name": "Misc"}, repo.CodeFailedPrecondition)
	c.Fail("create_campaign", M{"name": "general"}, repo.CodeConflict)
	other := testenv.ID(t, c.Must("create_campaign", M{"name": "Other"}, nil))
	c.Fail("update_campaign", M{"id": other, "name": "General"}, repo.CodeConflict)
	c.Must("update_campaign", M{"id": general, "description": "catch-all"}, nil)

	// Seeding again (every start does) changes nothing.
	ctx := audit.WithActor(context.Background(), repo.SystemActor("test"))
	if err := pipeline.Of(env.Store).Seed(ctx); err != nil {
		t.Fatal(err)
	}
	var l struct{ Total int }
	c.Must("list_campaigns", M{"search": "general"}, &l)
	if l.Total != 1 {
		t.Errorf("campaigns named General: %d, want 1", l.Total)
	}
}

func TestCampaignTools(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	for _, tc := range []struct {
		name  string
		args  M
		code  string
		field string
	}{
		{"no name", M{}, repo.CodeInvalid, "name"},
		{"blank name", M{"name": "  "}, repo.CodeInvalid, "name"},
		{"bad status", M{"name": "x", "status": "done"}, repo.CodeInvalid, "status"},
		{"bad date", M{"name": "x", "starts_on": "March"}, repo.CodeInvalid, "starts_on"},
		{"ends before start", M{"name": "x", "starts_on": "2026-03-02", "ends_on": "2026-03-01"}, repo.CodeInvalid, "ends_on"},
		{"negative target", M{"name": "x", "target_placements": -1}, repo.CodeInvalid, "target_placements"},
		{"unknown argument", M{"name": "x", "owner": "me"}, repo.CodeInvalid, "owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := c.Fail("create_campaign", tc.args, tc.code)
			if e.Field != tc.field {
				t.Errorf("field %q, want %q (%s)", e.Field, tc.field, e.Message)
			}
		})
	}
	e := c.Fail("create_campaign", M{"name": "x", "status": "done"}, repo.CodeInvalid)
	if !strings.Contains(e.Message, "planning, active, paused, completed") {
		t.Errorf("enum message does not list the allowed values: %s", e.Message)
	}

	var a struct {
		ID, Status string
		StartsOn   string `json:"starts_on"`
	}
	c.Must("create_campaign", M{"name": "Autumn", "status": "planning", "starts_on": "2026-09-01"}, &a)
	if a.Status != "planning" || a.StartsOn != "2026-09-01T00:00:00Z" {
		t.Errorf("created %+v", a)
	}
	b := testenv.ID(t, c.Must("create_campaign", M{"name": "Winter", "description": "snow and ice"}, nil))
	id := a.ID
	a = struct {
		ID, Status string
		StartsOn   string `json:"starts_on"`
	}{}
	c.Must("update_campaign", M{"id": id, "status": "active", "starts_on": ""}, &a)
	if a.Status != "active" || a.StartsOn != "" {
		t.Errorf("updated %+v", a)
	}
	c.Fail("update_campaign", M{"id": a.ID, "ends_on": "2020-01-01", "starts_on": "2021-01-01"}, repo.CodeInvalid)
	c.Must("archive_campaign", M{"id": b}, nil)
	c.Fail("archive_campaign", M{"id": b}, repo.CodeFailedPrecondition)
	c.Fail("update_campaign", M{"id": b, "goals": "x"}, repo.CodeFailedPrecondition)
	c.Fail("get_campaign", M{"id": "6f1c1f8e-0000-4000-8000-000000000000"}, repo.CodeNotFound)
	c.Fail("get_campaign", M{"id": "nope"}, repo.CodeInvalid)

	names := func(args M) []string {
		t.Helper()
		var l struct {
			Total     int
			Campaigns []struct{ Name string }
		}
		c.Must("list_campaigns", args, &l)
		var out []string
		for _, x := range l.Campaigns {
			out = append(out, x.Name)
		}
		if l.Total != len(out) {
			t.Errorf("total %d, showing %d", l.Total, len(out))
		}
		return out
	}
	for _, tc := range []struct {
		args M
		want []string
	}{
		{M{}, []string{"Autumn", "General"}},
		{M{"include_archived": true}, []string{"Winter", "Autumn", "General"}},
		{M{"status": "active"}, []string{"Autumn", "General"}},
		{M{"status": "planning"}, nil},
		{M{"search": "ICE", "include_archived": true}, []string{"Winter"}},
		{M{"search": ".*"}, nil},
	} {
		if diff := cmp.Diff(tc.want, names(tc.args)); diff != "" {
			t.Errorf("list_campaigns %v (-want +got):\n%s", tc.args, diff)
		}
	}
	c.Must("restore_campaign", M{"id": b}, nil)
	c.Fail("restore_campaign", M{"id": b}, repo.CodeFailedPrecondition)
	c.Fail("list_campaigns", M{"limit": 201}, repo.CodeInvalid)
}

func TestOpportunityRefusals(t *testing.T) {
	env := testenv.New(t)
	d := newDirectory(t, env)
	c := env.Admin()
	archivedCampaign := testenv.ID(t, c.Must("create_campaign", M{"name": "Old"}, nil))
	c.Must("archive_campaign", M{"id": archivedCampaign}, nil)
	archivedContact := mkArchived(t, c, "contact", M{"first_name": "Gone", "last_name": "Away"})
	missing := "0b9e3c54-8a51-4d6c-9d0e-2f8a5b1c7e11"
	for _, tc := range []struct {
		name  string
		args  M
		code  string
		field string
	}{
		{"no title", M{}, repo.CodeInvalid, "title"},
		{"bad stage", M{"title": "x", "stage": "closed"}, repo.CodeInvalid, "stage"},
		{"bad priority", M{"title": "x", "priority": "urgent"}, repo.CodeInvalid, "priority"},
		{"bad type", M{"title": "x", "type": "tweet"}, repo.CodeInvalid, "type"},
		{"lost without reason", M{"title": "x", "stage": "lost"}, repo.CodeInvalid, "lost_reason"},
		{"reason without lost", M{"title": "x", "lost_reason": "meh"}, repo.CodeInvalid, "lost_reason"},
		{"bad date", M{"title": "x", "next_action_date": "tomorrow"}, repo.CodeInvalid, "next_action_date"},
		{"bad uuid", M{"title": "x", "outlet_id": "123"}, repo.CodeInvalid, "outlet_id"},
		{"bad contact uuid", M{"title": "x", "contact_ids": []string{d.contact1, "x"}}, repo.CodeInvalid, "contact_ids[1]"},
		{"unknown campaign", M{"title": "x", "campaign_id": missing}, repo.CodeNotFound, "campaign_id"},
		{"archived campaign", M{"title": "x", "campaign_id": archivedCampaign}, repo.CodeNotFound, "campaign_id"},
		{"unknown outlet", M{"title": "x", "outlet_id": missing}, repo.CodeNotFound, "outlet_id"},
		{"unknown channel", M{"title": "x", "channel_id": missing}, repo.CodeNotFound, "channel_id"},
		{"unknown contact", M{"title": "x", "contact_ids": []string{missing}}, repo.CodeNotFound, "contact_ids[0]"},
		{"archived contact", M{"title": "x", "contact_ids": []string{d.contact1, archivedContact}}, repo.CodeNotFound, "contact_ids[1]"},
		{"channel of another outlet", M{"title": "x", "outlet_id": d.outletA, "channel_id": d.channelB}, repo.CodeInvalid, "channel_id"},
		{"unknown argument", M{"title": "x", "owner": "me"}, repo.CodeInvalid, "owner"},
	} {
		t.Run("create/"+tc.name, func(t *testing.T) {
			e := c.Fail("create_opportunity", tc.args, tc.code)
			if e.Field != tc.field {
				t.Errorf("field %q, want %q (%s)", e.Field, tc.field, e.Message)
			}
		})
	}
	var l struct{ Total int }
	c.Must("list_opportunities", M{"include_archived": true}, &l)
	if l.Total != 0 {
		t.Fatalf("refused creates wrote %d opportunities", l.Total)
	}

	var o opportunity
	c.Must("create_opportunity", M{"title": "Target", "outlet_id": d.outletA, "channel_id": d.channelA, "contact_ids": []string{d.contact1}}, &o)
	won := testenv.ID(t, c.Must("create_opportunity", M{"title": "Already won", "stage": "won"}, nil))
	archived := testenv.ID(t, c.Must("create_opportunity", M{"title": "Archived"}, nil))
	c.Must("archive_opportunity", M{"id": archived}, nil)
	for _, tc := range []struct {
		name, tool string
		args       M
		code       string
		field      string
		says       string
	}{
		{"stage via update", "update_opportunity", M{"id": o.ID, "stage": "pitched"}, repo.CodeInvalid, "stage", "update_opportunity_stage"},
		{"history via update", "update_opportunity", M{"id": o.ID, "stage_history": []any{}}, repo.CodeInvalid, "stage_history", ""},
		{"lost_reason of open", "update_opportunity", M{"id": o.ID, "lost_reason": "x"}, repo.CodeFailedPrecondition, "lost_reason", "update_opportunity_stage"},
		{"clear campaign", "update_opportunity", M{"id": o.ID, "campaign_id": ""}, repo.CodeInvalid, "campaign_id", ""},
		{"blank title", "update_opportunity", M{"id": o.ID, "title": " "}, repo.CodeInvalid, "title", ""},
		{"outlet without its channel", "update_opportunity", M{"id": o.ID, "outlet_id": d.outletB}, repo.CodeInvalid, "channel_id", ""},
		{"clear outlet keeping channel", "update_opportunity", M{"id": o.ID, "outlet_id": ""}, repo.CodeInvalid, "channel_id", ""},
		{"mismatched pair", "update_opportunity", M{"id": o.ID, "outlet_id": d.outletA, "channel_id": d.channelB}, repo.CodeInvalid, "channel_id", ""},
		{"update archived", "update_opportunity", M{"id": archived, "title": "y"}, repo.CodeFailedPrecondition, "", "restore"},
		{"update unknown", "update_opportunity", M{"id": missing, "title": "y"}, repo.CodeNotFound, "", missing},
		{"same stage", "update_opportunity_stage", M{"id": o.ID, "stage": "researching"}, repo.CodeFailedPrecondition, "stage", ""},
		{"lost without reason", "update_opportunity_stage", M{"id": o.ID, "stage": "lost"}, repo.CodeInvalid, "lost_reason", ""},
		{"blank lost reason", "update_opportunity_stage", M{"id": o.ID, "stage": "lost", "lost_reason": "  "}, repo.CodeInvalid, "lost_reason", ""},
		{"reason without lost", "update_opportunity_stage", M{"id": o.ID, "stage": "pitched", "lost_reason": "x"}, repo.CodeInvalid, "lost_reason", ""},
		{"bad stage", "update_opportunity_stage", M{"id": o.ID, "stage": "done"}, repo.CodeInvalid, "stage", "researching, drafting"},
		{"no stage", "update_opportunity_stage", M{"id": o.ID}, repo.CodeInvalid, "stage", ""},
		{"leave won", "update_opportunity_stage", M{"id": won, "stage": "lost", "lost_reason": "changed mind"}, repo.CodeFailedPrecondition, "reopen", "reopen: true"},
		{"move archived", "update_opportunity_stage", M{"id": archived, "stage": "pitched"}, repo.CodeFailedPrecondition, "", ""},
		{"move unknown", "update_opportunity_stage", M{"id": missing, "stage": "pitched"}, repo.CodeNotFound, "", ""},
		{"link twice", "add_opportunity_contact", M{"opportunity_id": o.ID, "contact_id": d.contact1}, repo.CodeFailedPrecondition, "contact_id", ""},
		{"link archived contact", "add_opportunity_contact", M{"opportunity_id": o.ID, "contact_id": archivedContact}, repo.CodeNotFound, "contact_id", ""},
		{"link unknown contact", "add_opportunity_contact", M{"opportunity_id": o.ID, "contact_id": missing}, repo.CodeNotFound, "contact_id", ""},
		{"unlink not linked", "remove_opportunity_contact", M{"opportunity_id": o.ID, "contact_id": d.contact2}, repo.CodeFailedPrecondition, "contact_id", ""},
		{"archive twice", "archive_opportunity", M{"id": archived}, repo.CodeFailedPrecondition, "", ""},
		{"restore active", "restore_opportunity", M{"id": o.ID}, repo.CodeFailedPrecondition, "", ""},
		{"get unknown", "get_opportunity", M{"id": missing}, repo.CodeNotFound, "", "opportunity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := c.Fail(tc.tool, tc.args, tc.code)
			if e.Field != tc.field {
				t.Errorf("field %q, want %q (%s)", e.Field, tc.field, e.Message)
			}
			if !strings.Contains(e.Message, tc.says) {
				t.Errorf("message %q does not say %q", e.Message, tc.says)
			}
		})
	}
	var after opportunity
	c.Must("get_opportunity", M{"id": o.ID}, &after)
	if after.Stage != "researching" || len(after.StageHistory) != 1 || after.OutletID != d.outletA || after.ChannelID != d.channelA {
		t.Errorf("refusals changed the opportunity: %+v", after)
	}
}

func TestOpportunityUpdatesAndLinks(t *testing.T) {
	env := testenv.New(t)
	d := newDirectory(t, env)
	c := env.Admin()
	var o opportunity
	c.Must("create_opportunity", M{"title": "Links", "outlet_id": d.outletA, "channel_id": d.channelA}, &o)
	// A channel without an outlet brings its outlet.
	id := o.ID
	c.Must("update_opportunity", M{"id": id, "channel_id": d.channelB}, &o)
	if o.OutletID != d.outletB || o.ChannelID != d.channelB {
		t.Errorf("after channel change: outlet %s channel %s", o.OutletID, o.ChannelID)
	}
	o = opportunity{}
	c.Must("update_opportunity", M{"id": id, "outlet_id": "", "channel_id": ""}, &o)
	if o.OutletID != "" || o.ChannelID != "" {
		t.Errorf("after clearing: outlet %q channel %q", o.OutletID, o.ChannelID)
	}
	c.Must("add_opportunity_contact", M{"opportunity_id": o.ID, "contact_id": d.contact2}, nil)
	c.Must("add_opportunity_contact", M{"opportunity_id": o.ID, "contact_id": d.contact1}, &o)
	if diff := cmp.Diff([]string{d.contact2, d.contact1}, o.ContactIDs); diff != "" {
		t.Errorf("contacts (-want +got):\n%s", diff)
	}
	c.Must("remove_opportunity_contact", M{"opportunity_id": o.ID, "contact_id": d.contact2}, &o)
	if diff := cmp.Diff([]string{d.contact1}, o.ContactIDs); diff != "" {
		t.Errorf("contacts after remove (-want +got):\n%s", diff)
	}
	c.Must("update_opportunity", M{"id": o.ID, "contact_ids": []string{d.contact2, d.contact2}}, &o)
	if diff := cmp.Diff([]string{d.contact2}, o.ContactIDs); diff != "" {
		t.Errorf("contacts after replace (-want +got):\n%s", diff)
	}
	var log struct {
		Changes []struct{ Action, Tool string }
	}
	c.Must("get_change_log", M{"record_id": o.ID, "limit": 3}, &log)
	var actions []string
	for _, ch := range log.Changes {
		actions = append(actions, ch.Action+"/"+ch.Tool)
	}
	if diff := cmp.Diff([]string{"update/update_opportunity", "unlink/remove_opportunity_contact", "link/add_opportunity_contact"}, actions); diff != "" {
		t.Errorf("change log (-want +got):\n%s", diff)
	}

	// Lost, reason corrected, reopened: lost_reason cleared, kept in history.
	c.Must("update_opportunity_stage", M{"id": o.ID, "stage": "lost", "lost_reason": "no reply"}, nil)
	c.Must("update_opportunity", M{"id": o.ID, "lost_reason": "no reply after three tries"}, &o)
	if o.LostReason != "no reply after three tries" {
		t.Errorf("lost_reason = %q", o.LostReason)
	}
	c.Fail("update_opportunity_stage", M{"id": o.ID, "stage": "researching"}, repo.CodeFailedPrecondition)
	o = opportunity{}
	c.Must("update_opportunity_stage", M{"id": id, "stage": "researching", "reopen": true}, &o)
	if o.LostReason != "" || len(o.StageHistory) != 3 || o.StageHistory[1].LostReason != "no reply" {
		t.Errorf("after reopen: lost_reason %q history %+v", o.LostReason, o.StageHistory)
	}
	// An update that changes nothing writes nothing.
	before := recordChangeCount(t, c, o.ID)
	c.Must("update_opportunity", M{"id": o.ID, "title": "Links"}, nil)
	if after := recordChangeCount(t, c, o.ID); after != before {
		t.Errorf("no-op update wrote %d changes", after-before)
	}
}

func recordChangeCount(t *testing.T, c *testenv.Client, recordID string) int {
	t.Helper()
	var l struct{ Total int }
	c.Must("get_change_log", M{"record_id": recordID}, &l)
	return l.Total
}

func TestStageChangeWithNote(t *testing.T) {
	env := testenv.New(t)
	c := env.Client(env.AdminKey, "note-session")
	o := testenv.ID(t, c.Must("create_opportunity", M{"title": "With note"}, nil))
	var moved opportunity
	c.Must("update_opportunity_stage", M{"id": o, "stage": "pitched", "note": "Sent the pitch to Lois by email."}, &moved)
	noteID := moved.StageHistory[len(moved.StageHistory)-1].NoteID
	if noteID == "" {
		t.Fatalf("no note id in the history: %+v", moved.StageHistory)
	}
	var log struct {
		Changes []struct {
			Coll   string         `json:"collection"`
			Record string         `json:"record_id"`
			Act    string         `json:"action"`
			After  map[string]any `json:"after"`
		}
	}
	c.Must("get_change_log", M{"session_id": "note-session"}, &log)
	if len(log.Changes) != 3 {
		t.Fatalf("%d changes, want 3 (create, stage, note)", len(log.Changes))
	}
	// Newest first: the note is written after the stage change.
	note, stage := log.Changes[0], log.Changes[1]
	if note.Coll != "notes" || note.Record != noteID || note.Act != "create" || stage.Coll != "opportunities" || stage.After["stage"] != "pitched" {
		t.Fatalf("changes: %+v", log.Changes)
	}
	var link map[string]any
	if links, _ := note.After["links"].([]any); len(links) == 1 {
		link, _ = links[0].(map[string]any)
	}
	if note.After["title"] != "Stage changed to pitched" || note.After["content"] != "Sent the pitch to Lois by email." ||
		note.After["type"] != "general" || link["opportunity_id"] != o || link["id"] == "" || note.After["occurred_at"] == nil {
		t.Errorf("note = %v", note.After)
	}
	// The notes group reads it as any other note.
	var got struct {
		Title, Content, Type string
		Links                []struct {
			ID            string `json:"id"`
			OpportunityID string `json:"opportunity_id"`
		}
	}
	c.Must("get_note", M{"id": noteID}, &got)
	if got.Title != "Stage changed to pitched" || got.Type != "general" || len(got.Links) != 1 || got.Links[0].OpportunityID != o {
		t.Errorf("get_note = %+v", got)
	}
	var listed struct{ Total int }
	c.Must("list_notes", M{"opportunity_id": o}, &listed)
	if listed.Total != 1 {
		t.Errorf("list_notes of the opportunity: %d, want 1", listed.Total)
	}
	// Without a note, no note is written.
	c.Must("update_opportunity_stage", M{"id": o, "stage": "responded"}, &moved)
	if moved.StageHistory[len(moved.StageHistory)-1].NoteID != "" {
		t.Errorf("note id without a note")
	}
	var notes struct{ Total int }
	c.Must("get_change_log", M{"collection": "notes"}, &notes)
	if notes.Total != 1 {
		t.Errorf("%d note changes, want 1", notes.Total)
	}
}

func TestListOpportunityFilters(t *testing.T) {
	env := testenv.New(t)
	d := newDirectory(t, env)
	c := env.Admin()
	camp := testenv.ID(t, c.Must("create_campaign", M{"name": "Filters"}, nil))
	mk := func(args M) string { return testenv.ID(t, c.Must("create_opportunity", args, nil)) }
	a := mk(M{"title": "Alpha pitch", "campaign_id": camp, "outlet_id": d.outletA, "priority": "high", "contact_ids": []string{d.contact1}, "next_action_date": "2026-04-01"})
	b := mk(M{"title": "Beta interview", "campaign_id": camp, "stage": "pitched", "outlet_id": d.outletB, "contact_ids": []string{d.contact1, d.contact2}, "next_action_date": "2026-04-02T12:00:00Z"})
	g := mk(M{"title": "Gamma", "description": "a 50% [odd] (idea)", "priority": "low", "next_action": "Ask about the PODCAST"})
	x := mk(M{"title": "Archived alpha", "campaign_id": camp, "outlet_id": d.outletA})
	c.Must("archive_opportunity", M{"id": x}, nil)

	ids := func(args M) []string {
		t.Helper()
		var l struct {
			Total         int
			Showing       int
			Limit, Offset int
			Opportunities []struct{ ID string }
		}
		c.Must("list_opportunities", args, &l)
		var out []string
		for _, o := range l.Opportunities {
			out = append(out, o.ID)
		}
		if l.Showing != len(out) {
			t.Errorf("showing %d, got %d", l.Showing, len(out))
		}
		return out
	}
	for _, tc := range []struct {
		name string
		args M
		want []string
	}{
		{"all, newest first", M{}, []string{g, b, a}},
		{"include_archived", M{"include_archived": true}, []string{x, g, b, a}},
		{"campaign", M{"campaign_id": camp}, []string{b, a}},
		{"stage", M{"stage": "pitched"}, []string{b}},
		{"priority", M{"priority": "high"}, []string{a}},
		{"outlet", M{"outlet_id": d.outletA}, []string{a}},
		{"outlet with archived", M{"outlet_id": d.outletA, "include_archived": true}, []string{x, a}},
		{"contact", M{"contact_id": d.contact2}, []string{b}},
		{"contact shared", M{"contact_id": d.contact1}, []string{b, a}},
		{"next action before a date", M{"next_action_before": "2026-04-02"}, []string{a}},
		{"next action before a time", M{"next_action_before": "2026-04-02T12:00:01Z"}, []string{b, a}},
		{"search title", M{"search": "ALPHA"}, []string{a}},
		{"search description literally", M{"search": "50% [odd] (idea)"}, []string{g}},
		{"search next action", M{"search": "podcast"}, []string{g}},
		{"search regex is literal", M{"search": "a.*"}, nil},
		{"combined", M{"campaign_id": camp, "contact_id": d.contact1, "priority": "medium"}, []string{b}},
		{"unknown campaign", M{"campaign_id": "0b9e3c54-8a51-4d6c-9d0e-2f8a5b1c7e11"}, nil},
		{"page 1", M{"limit": 2}, []string{g, b}},
		{"page 2", M{"limit": 2, "offset": 2}, []string{a}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ids(tc.args)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, tc := range []struct {
		args  M
		field string
	}{
		{M{"limit": 201}, "limit"}, {M{"offset": -1}, "offset"}, {M{"stage": "open"}, "stage"}, {M{"priority": "urgent"}, "priority"},
		{M{"next_action_before": "soon"}, "next_action_before"}, {M{"contact_id": "x"}, "contact_id"}, {M{"owner": "me"}, "owner"},
	} {
		e := c.Fail("list_opportunities", tc.args, repo.CodeInvalid)
		if e.Field != tc.field {
			t.Errorf("%v: field %q, want %q", tc.args, e.Field, tc.field)
		}
	}
}

type coverage struct {
	ID            string   `json:"id"`
	Title         string   `json:"title"`
	Type          string   `json:"type"`
	Sentiment     string   `json:"sentiment"`
	URL           string   `json:"url"`
	OutletID      string   `json:"outlet_id"`
	ChannelID     string   `json:"channel_id"`
	OpportunityID string   `json:"opportunity_id"`
	CampaignID    string   `json:"campaign_id"`
	ContactIDs    []string `json:"contact_ids"`
	PublishedAt   string   `json:"published_at"`
	Reach         *int64   `json:"reach"`
}

func TestCoverage(t *testing.T) {
	env := testenv.New(t)
	d := newDirectory(t, env)
	c := env.Admin()
	camp := testenv.ID(t, c.Must("create_campaign", M{"name": "Coverage"}, nil))
	opp := testenv.ID(t, c.Must("create_opportunity", M{"title": "Source", "campaign_id": camp, "outlet_id": d.outletB}, nil))
	gone := testenv.ID(t, c.Must("create_opportunity", M{"title": "Gone"}, nil))
	c.Must("archive_opportunity", M{"id": gone}, nil)
	missing := "0b9e3c54-8a51-4d6c-9d0e-2f8a5b1c7e11"

	for _, tc := range []struct {
		name  string
		args  M
		code  string
		field string
	}{
		{"no title", M{"published_at": "2026-01-01"}, repo.CodeInvalid, "title"},
		{"no published_at", M{"title": "x"}, repo.CodeInvalid, "published_at"},
		{"bad published_at", M{"title": "x", "published_at": "yesterday"}, repo.CodeInvalid, "published_at"},
		{"bad type", M{"title": "x", "published_at": "2026-01-01", "type": "tweet"}, repo.CodeInvalid, "type"},
		{"bad sentiment", M{"title": "x", "published_at": "2026-01-01", "sentiment": "happy"}, repo.CodeInvalid, "sentiment"},
		{"bad depth", M{"title": "x", "published_at": "2026-01-01", "depth": "deep"}, repo.CodeInvalid, "depth"},
		{"bad share_of_voice", M{"title": "x", "published_at": "2026-01-01", "share_of_voice": "all"}, repo.CodeInvalid, "share_of_voice"},
		{"bad initiated_by", M{"title": "x", "published_at": "2026-01-01", "initiated_by": "luck"}, repo.CodeInvalid, "initiated_by"},
		{"bad url", M{"title": "x", "published_at": "2026-01-01", "url": "planet.example/x"}, repo.CodeInvalid, "url"},
		{"negative reach", M{"title": "x", "published_at": "2026-01-01", "reach": -5}, repo.CodeInvalid, "reach"},
		{"fractional reach", M{"title": "x", "published_at": "2026-01-01", "reach": 1.5}, repo.CodeInvalid, "reach"},
		{"quoted not bool", M{"title": "x", "published_at": "2026-01-01", "spokesperson_quoted": "yes"}, repo.CodeInvalid, "spokesperson_quoted"},
		{"unknown opportunity", M{"title": "x", "published_at": "2026-01-01", "opportunity_id": missing}, repo.CodeNotFound, "opportunity_id"},
		{"archived opportunity", M{"title": "x", "published_at": "2026-01-01", "opportunity_id": gone}, repo.CodeNotFound, "opportunity_id"},
		{"unknown outlet", M{"title": "x", "published_at": "2026-01-01", "outlet_id": missing}, repo.CodeNotFound, "outlet_id"},
		{"unknown contact", M{"title": "x", "published_at": "2026-01-01", "contact_ids": []string{missing}}, repo.CodeNotFound, "contact_ids[0]"},
		{"channel of another outlet", M{"title": "x", "published_at": "2026-01-01", "outlet_id": d.outletA, "channel_id": d.channelB}, repo.CodeInvalid, "channel_id"},
		{"unknown argument", M{"title": "x", "published_at": "2026-01-01", "campaign_id": camp}, repo.CodeInvalid, "campaign_id"},
	} {
		t.Run("create/"+tc.name, func(t *testing.T) {
			e := c.Fail("create_coverage", tc.args, tc.code)
			if e.Field != tc.field {
				t.Errorf("field %q, want %q (%s)", e.Field, tc.field, e.Message)
			}
		})
	}

	// Defaults: type article; outlet and campaign from the opportunity.
	var cv coverage
	c.Must("create_coverage", M{"title": "From the opportunity", "published_at": "2026-02-10T08:30:00Z", "opportunity_id": opp,
		"url": "https://ledger.example/a", "sentiment": "positive", "depth": "feature", "share_of_voice": "sole_focus",
		"spokesperson_quoted": true, "initiated_by": "pitched", "reach": 1200, "summary": "Big feature", "full_text": "…",
		"contact_ids": []string{d.contact1}}, &cv)
	want := coverage{ID: cv.ID, Title: "From the opportunity", Type: "article", Sentiment: "positive", URL: "https://ledger.example/a",
		OutletID: d.outletB, OpportunityID: opp, CampaignID: camp, ContactIDs: []string{d.contact1}, PublishedAt: "2026-02-10T08:30:00Z", Reach: ptr(int64(1200))}
	if diff := cmp.Diff(want, cv); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	// A channel brings its outlet, before the opportunity's.
	var viaChannel coverage
	c.Must("create_coverage", M{"title": "Via channel", "published_at": "2026-02-11", "opportunity_id": opp, "channel_id": d.channelA, "type": "segment", "sentiment": "neutral", "contact_ids": []string{d.contact2}}, &viaChannel)
	if viaChannel.OutletID != d.outletA || viaChannel.CampaignID != camp {
		t.Errorf("via channel: outlet %s campaign %s", viaChannel.OutletID, viaChannel.CampaignID)
	}
	var organic coverage
	c.Must("create_coverage", M{"title": "Organic", "published_at": "2026-02-12T23:59:00Z", "outlet_id": d.outletA, "type": "review", "sentiment": "mixed"}, &organic)
	if organic.CampaignID != "" || organic.OpportunityID != "" {
		t.Errorf("organic coverage has campaign %q opportunity %q", organic.CampaignID, organic.OpportunityID)
	}
	old := testenv.ID(t, c.Must("create_coverage", M{"title": "Archived piece", "published_at": "2026-02-13", "outlet_id": d.outletA}, nil))
	c.Must("archive_coverage", M{"id": old}, nil)

	ids := func(args M) []string {
		t.Helper()
		var l struct {
			Total    int
			Coverage []struct{ ID string }
		}
		c.Must("list_coverage", args, &l)
		var out []string
		for _, x := range l.Coverage {
			out = append(out, x.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		args M
		want []string
	}{
		{"all, latest published first", M{}, []string{organic.ID, viaChannel.ID, cv.ID}},
		{"include_archived", M{"include_archived": true}, []string{old, organic.ID, viaChannel.ID, cv.ID}},
		{"campaign", M{"campaign_id": camp}, []string{viaChannel.ID, cv.ID}},
		{"opportunity", M{"opportunity_id": opp}, []string{viaChannel.ID, cv.ID}},
		{"outlet", M{"outlet_id": d.outletA}, []string{organic.ID, viaChannel.ID}},
		{"contact", M{"contact_id": d.contact2}, []string{viaChannel.ID}},
		{"type", M{"type": "review"}, []string{organic.ID}},
		{"sentiment", M{"sentiment": "positive"}, []string{cv.ID}},
		{"since a date", M{"since": "2026-02-11"}, []string{organic.ID, viaChannel.ID}},
		{"until a bare date includes the day", M{"until": "2026-02-12"}, []string{organic.ID, viaChannel.ID, cv.ID}},
		{"until a time", M{"until": "2026-02-12T23:00:00Z"}, []string{viaChannel.ID, cv.ID}},
		{"since and until", M{"since": "2026-02-10T09:00:00Z", "until": "2026-02-11"}, []string{viaChannel.ID}},
		{"search title", M{"search": "CHANNEL"}, []string{viaChannel.ID}},
		{"search summary", M{"search": "big feature"}, []string{cv.ID}},
		{"search url", M{"search": "ledger.example"}, []string{cv.ID}},
		{"paging", M{"limit": 1, "offset": 1}, []string{viaChannel.ID}},
	} {
		t.Run("list/"+tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ids(tc.args)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, tc := range []struct {
		args  M
		field string
	}{
		{M{"type": "tweet"}, "type"}, {M{"sentiment": "happy"}, "sentiment"}, {M{"since": "x"}, "since"}, {M{"until": "x"}, "until"},
		{M{"outlet_id": "x"}, "outlet_id"}, {M{"limit": 0}, "limit"},
	} {
		if e := c.Fail("list_coverage", tc.args, repo.CodeInvalid); e.Field != tc.field {
			t.Errorf("%v: field %q, want %q", tc.args, e.Field, tc.field)
		}
	}

	// get_coverage brings the related records.
	var detail struct {
		coverage
		Outlet      map[string]any
		Opportunity map[string]any
		Campaign    map[string]any
		Contacts    []map[string]any
		Media       []map[string]any
	}
	c.Must("get_coverage", M{"id": cv.ID}, &detail)
	if detail.Outlet["name"] != "Smallville Ledger" || detail.Opportunity["title"] != "Source" || detail.Campaign["name"] != "Coverage" ||
		len(detail.Contacts) != 1 || detail.Contacts[0]["first_name"] != "Lois" || detail.Media == nil {
		t.Errorf("get_coverage: %+v", detail)
	}

	// Updates: clearing, enums, and the campaign following the opportunity.
	other := testenv.ID(t, c.Must("create_campaign", M{"name": "Other"}, nil))
	opp2 := testenv.ID(t, c.Must("create_opportunity", M{"title": "Second", "campaign_id": other}, nil))
	organicID := organic.ID
	organic = coverage{}
	c.Must("update_coverage", M{"id": organicID, "opportunity_id": opp2, "sentiment": "", "url": "https://planet.example/r"}, &organic)
	if organic.CampaignID != other || organic.Sentiment != "" || organic.OutletID != d.outletA {
		t.Errorf("after update: %+v", organic)
	}
	c.Fail("update_coverage", M{"id": organic.ID, "type": ""}, repo.CodeInvalid)
	c.Fail("update_coverage", M{"id": organic.ID, "published_at": ""}, repo.CodeInvalid)
	c.Fail("update_coverage", M{"id": organic.ID, "depth": "deep"}, repo.CodeInvalid)
	c.Fail("update_coverage", M{"id": organic.ID, "channel_id": d.channelB, "outlet_id": d.outletA}, repo.CodeInvalid)
	c.Fail("update_coverage", M{"id": old, "title": "x"}, repo.CodeFailedPrecondition)
	organic = coverage{}
	c.Must("update_coverage", M{"id": organicID, "opportunity_id": ""}, &organic)
	if organic.CampaignID != "" {
		t.Errorf("campaign after clearing the opportunity: %q", organic.CampaignID)
	}

	// Moving an opportunity to another campaign moves its coverage, archived
	// coverage too, in the same write.
	archivedCv := testenv.ID(t, c.Must("create_coverage", M{"title": "Archived of opp", "published_at": "2026-02-14", "opportunity_id": opp}, nil))
	c.Must("archive_coverage", M{"id": archivedCv}, nil)
	c.Must("update_opportunity", M{"id": opp, "campaign_id": other}, nil)
	for _, id := range []string{cv.ID, viaChannel.ID, archivedCv} {
		var x coverage
		c.Must("get_coverage", M{"id": id}, &x)
		if x.CampaignID != other {
			t.Errorf("coverage %s campaign %s, want %s", id, x.CampaignID, other)
		}
	}
	if got := ids(M{"campaign_id": camp, "include_archived": true}); len(got) != 0 {
		t.Errorf("coverage left in the old campaign: %v", got)
	}
	var log struct {
		Changes []struct {
			Collection, Tool string
		}
	}
	c.Must("get_change_log", M{"record_id": cv.ID, "limit": 1}, &log)
	if len(log.Changes) != 1 || log.Changes[0].Tool != "update_opportunity" {
		t.Errorf("coverage's last change: %+v", log.Changes)
	}
	c.Must("restore_coverage", M{"id": old}, nil)
	c.Fail("restore_coverage", M{"id": old}, repo.CodeFailedPrecondition)
	c.Fail("get_coverage", M{"id": missing}, repo.CodeNotFound)
}

// TestPipelineToolsNeedWriteScope checks the annotations' scopes in practice.
func TestPipelineToolsNeedWriteScope(t *testing.T) {
	env := testenv.New(t)
	ro := env.Client(env.Key("read"), "")
	ro.Fail("create_campaign", M{"name": "x"}, repo.CodePermissionDenied)
	ro.Fail("create_opportunity", M{"title": "x"}, repo.CodePermissionDenied)
	ro.Fail("create_coverage", M{"title": "x", "published_at": "2026-01-01"}, repo.CodePermissionDenied)
	var l struct{ Total int }
	ro.Must("list_opportunities", nil, &l)
	ro.Must("list_coverage", nil, &l)
	raw := ro.Must("list_campaigns", nil, &l)
	if l.Total != 1 || !json.Valid(raw) {
		t.Errorf("list_campaigns: %s", raw)
	}
}
