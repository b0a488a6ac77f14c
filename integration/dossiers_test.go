package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/repo"
)

// dossierWorld is an outlet with current and past contacts, opportunities
// at several stages, coverage, notes and email threads. Everything is made
// through the tools but the email threads (no tools yet: Store.Fixture).
type dossierWorld struct {
	planet, other                  string
	morning, pod                   string
	lois, jimmy, perry, kat        string
	o1, o2, o3, o4, o5, o6, o7     string
	c1, c2, c5                     string
	noteKat                        string
	replyThread, replyMsg, sentMsg string
	sentThread                     string
	replyAt, sentAt                time.Time
	o5Due                          time.Time
}

type stageEntry struct {
	Stage string    `json:"stage"`
	At    time.Time `json:"at"`
}

// history reads an opportunity's stage history through get_opportunity.
func history(t *testing.T, c *testenv.Client, id string) []stageEntry {
	t.Helper()
	var o struct {
		StageHistory []stageEntry `json:"stage_history"`
	}
	c.Must("get_opportunity", M{"id": id}, &o)
	return o.StageHistory
}

func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

func seedDossiers(t *testing.T, env *testenv.Env) dossierWorld {
	t.Helper()
	c := env.Admin()
	var w dossierWorld
	w.planet = mk(t, c, "create_outlet", M{"name": "The Planet", "tier": 1, "audience_size": 100000})
	w.other = mk(t, c, "create_outlet", M{"name": "Other Times"})
	w.morning = mk(t, c, "create_channel", M{"outlet_id": w.planet, "type": "newsletter", "name": "Morning"})
	w.pod = mkArchived(t, c, "channel", M{"outlet_id": w.planet, "type": "podcast", "name": "Planet Pod"})
	w.lois = mk(t, c, "create_contact", M{"first_name": "Lois", "last_name": "Lane", "email": "lois@planet.example", "outlet_ids": []string{w.planet}})
	w.jimmy = mk(t, c, "create_contact", M{"first_name": "Jimmy", "last_name": "Olsen", "email": "jimmy@planet.example"})
	c.Must("add_contact_outlet", M{"contact_id": w.jimmy, "outlet_id": w.planet, "role": "photographer", "started_on": "2024-01-01", "ended_on": "2025-06-30"}, nil)
	w.perry = mkArchived(t, c, "contact", M{"first_name": "Perry", "last_name": "White", "outlet_ids": []string{w.planet}})
	w.kat = mk(t, c, "create_contact", M{"first_name": "Kat", "last_name": "Grant", "outlet_ids": []string{w.other},
		"do_not_contact": true, "do_not_contact_reason": "asked not to be pitched"})

	move := func(id string, stages ...string) {
		for _, st := range stages {
			args := M{"id": id, "stage": st}
			if st == "lost" {
				args["lost_reason"] = "no interest"
			}
			if st == "pitched" {
				args["override_reason"] = "fixture: the same contact is pitched on purpose"
			}
			c.Must("update_opportunity_stage", args, nil)
		}
	}
	opp := func(title, outlet string, contacts ...string) string {
		return mk(t, c, "create_opportunity", M{"title": title, "outlet_id": outlet, "contact_ids": contacts})
	}
	w.o1 = opp("Launch feature", w.planet, w.lois)
	move(w.o1, "pitched", "responded")
	w.o2 = opp("Podcast slot", w.planet, w.lois)
	move(w.o2, "pitched")
	w.o3 = opp("Lost cause", w.planet, w.lois)
	move(w.o3, "pitched", "lost")
	w.o4 = opp("Won piece", w.planet, w.lois)
	move(w.o4, "pitched", "won")
	w.o5Due = ms(time.Now().Add(-10*24*time.Hour - 3*time.Hour))
	w.o5 = mk(t, c, "create_opportunity", M{"title": "Drafting idea", "outlet_id": w.planet, "contact_ids": []string{w.lois, w.jimmy},
		"next_action": "Send the draft", "next_action_date": w.o5Due.Format(time.RFC3339Nano), "next_action_owner": "Ann"})
	move(w.o5, "drafting")
	w.o6 = opp("Other pitch", w.other, w.kat)
	w.o7 = opp("Archived pitch", w.planet, w.lois)
	move(w.o7, "pitched")
	c.Must("archive_opportunity", M{"id": w.o7}, nil)

	w.c1 = mk(t, c, "create_coverage", M{"title": "Won piece story", "published_at": "2026-04-10", "type": "article", "sentiment": "positive", "reach": 1000,
		"outlet_id": w.planet, "opportunity_id": w.o4, "contact_ids": []string{w.lois}})
	w.c2 = mk(t, c, "create_coverage", M{"title": "The interview", "published_at": "2026-04-12", "type": "interview", "sentiment": "negative", "reach": 500,
		"outlet_id": w.planet, "contact_ids": []string{w.lois}})
	mkArchived(t, c, "coverage", M{"title": "Withdrawn", "published_at": "2026-04-13", "sentiment": "positive", "reach": 7, "outlet_id": w.planet, "contact_ids": []string{w.lois}})
	mk(t, c, "create_coverage", M{"title": "Other story", "published_at": "2026-04-11", "sentiment": "neutral", "reach": 50, "outlet_id": w.other, "contact_ids": []string{w.kat}})
	w.c5 = mk(t, c, "create_coverage", M{"title": "Brief mention", "published_at": "2026-04-09", "outlet_id": w.planet, "contact_ids": []string{w.jimmy}})

	mk(t, c, "create_note", M{"title": "Coffee with Lois", "occurred_at": "2026-04-01", "contact_ids": []string{w.lois}})
	mk(t, c, "create_note", M{"title": "Planned lunch", "occurred_at": "2030-01-01", "contact_ids": []string{w.lois}}) // in the future: not a contact yet
	mk(t, c, "create_note", M{"title": "Jimmy's portfolio", "occurred_at": "2026-04-01", "contact_ids": []string{w.jimmy}})
	w.noteKat = mk(t, c, "create_note", M{"title": "Met Kat", "occurred_at": "2026-04-05", "contact_ids": []string{w.kat}})

	ctx := audit.WithActor(context.Background(), repo.SystemActor("fixtures"))
	msg := func(from string, at time.Time, subject string) map[string]any {
		return map[string]any{"id": uuid.NewString(), "message_id": "<" + uuid.NewString() + "@mail>", "from": from, "to": []string{"x@example.com"},
			"subject": subject, "date": at, "body_text": "text", "contact_ids": []string{w.lois}}
	}
	thread := func(subject string, links []string, msgs ...map[string]any) string {
		t.Helper()
		ls := []map[string]any{}
		for _, l := range links {
			ls = append(ls, map[string]any{"id": uuid.NewString(), "opportunity_id": l, "linked_at": time.Now()})
		}
		last := msgs[len(msgs)-1]["date"]
		id, err := env.Store.Fixture(ctx, "email_threads", map[string]any{"subject": subject, "contact_ids": []string{w.lois}, "opportunity_links": ls,
			"last_message_at": last, "messages": msgs})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	thread("Old hello", nil, msg("lois@planet.example", time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), "Old hello"))
	// After every stage move: Lois answers the podcast pitch, then the team writes to her.
	w.replyAt = ms(time.Now())
	reply := msg("Lois Lane <LOIS@planet.example>", w.replyAt, "Re: Podcast slot")
	w.replyMsg = reply["id"].(string)
	w.replyThread = thread("Podcast slot", []string{w.o2}, msg("press@team.example", time.Date(2026, 3, 5, 9, 0, 0, 0, time.UTC), "Podcast slot"), reply)
	time.Sleep(2 * time.Millisecond)
	w.sentAt = ms(time.Now())
	sent := msg("press@team.example", w.sentAt, "Following up")
	w.sentMsg = sent["id"].(string)
	w.sentThread = thread("Following up", nil, sent)
	return w
}

type touch struct {
	At       time.Time `json:"at"`
	Via      string    `json:"via"`
	ID       string    `json:"id"`
	ThreadID string    `json:"thread_id"`
}

type contactDossier struct {
	Contact struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"contact"`
	Affiliations []struct {
		OutletID  string `json:"outlet_id"`
		IsPrimary bool   `json:"is_primary"`
	} `json:"affiliations"`
	DoNotContact struct {
		DoNotContact bool   `json:"do_not_contact"`
		Reason       string `json:"reason"`
	} `json:"do_not_contact"`
	Opportunities struct {
		Open   []struct{ ID, Stage string } `json:"open"`
		Closed []struct{ ID, Stage string } `json:"closed"`
	} `json:"opportunities"`
	Coverage []struct {
		ID string `json:"id"`
	} `json:"coverage"`
	LastContacted *touch `json:"last_contacted"`
	LastHeardFrom *touch `json:"last_heard_from"`
	Pitches       struct {
		Pitched      int      `json:"pitched"`
		Responded    int      `json:"responded"`
		ResponseRate *float64 `json:"response_rate"`
	} `json:"pitches"`
	LatestInteractions json.RawMessage `json:"latest_interactions"`
}

func idsOf[T any](xs []T, id func(T) string) []string {
	out := []string{}
	for _, x := range xs {
		out = append(out, id(x))
	}
	return out
}

func TestContactDossier(t *testing.T) {
	env := testenv.New(t)
	w := seedDossiers(t, env)
	c := env.Admin()
	type oppRef = struct{ ID, Stage string }

	var d contactDossier
	c.Must("get_contact_dossier", M{"contact_id": w.lois}, &d)
	if d.Contact.ID != w.lois || d.Contact.Name != "Lois Lane" || len(d.Affiliations) != 1 || d.Affiliations[0].OutletID != w.planet || !d.Affiliations[0].IsPrimary {
		t.Errorf("contact and affiliations: %+v %+v", d.Contact, d.Affiliations)
	}
	// Open: o5, o2, o1 (newest first); closed: o4 won, o3 lost; o7 is archived.
	if diff := cmp.Diff([]oppRef{{w.o5, "drafting"}, {w.o2, "pitched"}, {w.o1, "responded"}}, d.Opportunities.Open); diff != "" {
		t.Errorf("open opportunities (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]oppRef{{w.o4, "won"}, {w.o3, "lost"}}, d.Opportunities.Closed); diff != "" {
		t.Errorf("closed opportunities (-want +got):\n%s", diff)
	}
	// Coverage she wrote, latest first, without the archived piece.
	if diff := cmp.Diff([]string{w.c2, w.c1}, idsOf(d.Coverage, func(x struct {
		ID string `json:"id"`
	}) string {
		return x.ID
	})); diff != "" {
		t.Errorf("coverage (-want +got):\n%s", diff)
	}
	// Pitched: o1, o2, o3, o4 (o5 never pitched, o7 archived). Responded:
	// o1 (moved to responded), o2 (her email after the pitch), o4 (won);
	// not o3 (lost). 3 of 4.
	if d.Pitches.Pitched != 4 || d.Pitches.Responded != 3 || d.Pitches.ResponseRate == nil || *d.Pitches.ResponseRate != 3.0/4 {
		t.Errorf("pitches %+v (rate %v), want 4 pitched, 3 responded, rate 0.75", d.Pitches, d.Pitches.ResponseRate)
	}
	// Last contacted: the team's email, sent after every stage move and
	// after the last note that is not in the future. Last heard from: her
	// reply (From "Lois Lane <LOIS@…>"), later than her March email.
	if diff := cmp.Diff(&touch{At: w.sentAt, Via: "email", ID: w.sentMsg, ThreadID: w.sentThread}, d.LastContacted); diff != "" {
		t.Errorf("last contacted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&touch{At: w.replyAt, Via: "email", ID: w.replyMsg, ThreadID: w.replyThread}, d.LastHeardFrom); diff != "" {
		t.Errorf("last heard from (-want +got):\n%s", diff)
	}
	if d.DoNotContact.DoNotContact {
		t.Errorf("do not contact: %+v", d.DoNotContact)
	}
	// The latest interactions are the interaction log's first ten.
	want := c.Must("get_interaction_log", M{"contact_id": w.lois, "limit": 10}, nil)
	if diff := cmp.Diff(string(want), string(d.LatestInteractions)); diff != "" {
		t.Errorf("latest interactions (-log +dossier):\n%s", diff)
	}

	// Jimmy: last contacted by the stage move of o5 (later than his note of
	// April); never heard from; nothing pitched, so no response rate.
	var dj contactDossier
	c.Must("get_contact_dossier", M{"contact_id": w.jimmy, "interactions": 1}, &dj)
	h5 := history(t, c, w.o5)
	if diff := cmp.Diff(&touch{At: h5[1].At, Via: "stage_change", ID: w.o5}, dj.LastContacted); diff != "" {
		t.Errorf("jimmy last contacted (-want +got):\n%s", diff)
	}
	if dj.LastHeardFrom != nil || dj.Pitches.Pitched != 0 || dj.Pitches.ResponseRate != nil {
		t.Errorf("jimmy: heard from %+v, pitches %+v", dj.LastHeardFrom, dj.Pitches)
	}
	var log interactionLog
	json.Unmarshal(dj.LatestInteractions, &log)
	if log.Showing != 1 || log.TotalEntries != 2 { // his note and the coverage he wrote
		t.Errorf("jimmy interactions: %+v", log)
	}

	// Kat: do not contact, with the reason; last contacted by her note.
	var dk contactDossier
	c.Must("get_contact_dossier", M{"contact_id": w.kat}, &dk)
	if !dk.DoNotContact.DoNotContact || dk.DoNotContact.Reason != "asked not to be pitched" {
		t.Errorf("kat do not contact: %+v", dk.DoNotContact)
	}
	if diff := cmp.Diff(&touch{At: time.Date(2026, 4, 5, 0, 0, 0, 0, time.UTC), Via: "note", ID: w.noteKat}, dk.LastContacted); diff != "" {
		t.Errorf("kat last contacted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]oppRef{{w.o6, "researching"}}, dk.Opportunities.Open); diff != "" {
		t.Errorf("kat open (-want +got):\n%s", diff)
	}

	c.Fail("get_contact_dossier", M{"contact_id": uuid.NewString()}, "not_found")
	if e := c.Fail("get_contact_dossier", M{"contact_id": "lois"}, "invalid_argument"); e.Field != "contact_id" {
		t.Errorf("field %q", e.Field)
	}
	if e := c.Fail("get_contact_dossier", M{"contact_id": w.lois, "interactions": 51}, "invalid_argument"); e.Field != "interactions" {
		t.Errorf("field %q", e.Field)
	}
}

func TestOutletDossier(t *testing.T) {
	env := testenv.New(t)
	w := seedDossiers(t, env)
	c := env.Admin()
	type person = struct {
		ID       string `json:"id"`
		Name     string `json:"name"`
		Archived bool   `json:"archived"`
	}
	var d struct {
		Outlet struct {
			ID           string `json:"id"`
			AudienceSize int64  `json:"audience_size"`
		} `json:"outlet"`
		Channels []struct {
			ID         string     `json:"id"`
			ArchivedAt *time.Time `json:"archived_at"`
		} `json:"channels"`
		Contacts struct {
			Current []person `json:"current"`
			Past    []person `json:"past"`
		} `json:"contacts"`
		Opportunities struct {
			Total, Open, Won, Lost int
			ByStage                map[string]int `json:"by_stage"`
			Items                  []struct{ ID string }
		} `json:"opportunities"`
		Coverage struct {
			Total       int            `json:"total"`
			ByType      map[string]int `json:"by_type"`
			BySentiment map[string]int `json:"by_sentiment"`
			TotalReach  int64          `json:"total_reach"`
		} `json:"coverage"`
		LatestInteractions json.RawMessage `json:"latest_interactions"`
	}
	c.Must("get_outlet_dossier", M{"outlet_id": w.planet}, &d)
	if d.Outlet.ID != w.planet || d.Outlet.AudienceSize != 100000 {
		t.Errorf("outlet %+v", d.Outlet)
	}
	if len(d.Channels) != 2 || d.Channels[0].ID != w.morning || d.Channels[0].ArchivedAt != nil || d.Channels[1].ID != w.pod || d.Channels[1].ArchivedAt == nil {
		t.Errorf("channels (by name, the archived podcast marked): %+v", d.Channels)
	}
	// Current: Lois. Past: Jimmy (affiliation ended 2025-06-30) and Perry (archived).
	if diff := cmp.Diff([]person{{w.lois, "Lois Lane", false}}, d.Contacts.Current); diff != "" {
		t.Errorf("current contacts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]person{{w.jimmy, "Jimmy Olsen", false}, {w.perry, "Perry White", true}}, d.Contacts.Past); diff != "" {
		t.Errorf("past contacts (-want +got):\n%s", diff)
	}
	// o1 responded, o2 pitched, o3 lost, o4 won, o5 drafting; o6 is another
	// outlet's, o7 archived.
	o := d.Opportunities
	wantStages := map[string]int{"researching": 0, "drafting": 1, "pitched": 1, "responded": 1, "in_progress": 0, "placed": 0, "published": 0, "won": 1, "lost": 1}
	if o.Total != 5 || o.Open != 3 || o.Won != 1 || o.Lost != 1 || !cmp.Equal(wantStages, o.ByStage) || len(o.Items) != 5 {
		t.Errorf("opportunities %+v", o)
	}
	// Coverage: c1 (article, positive, 1000), c2 (interview, negative, 500),
	// c5 (article by default, no sentiment, no reach); the archived piece and
	// the other outlet's are left out.
	cv := d.Coverage
	if cv.Total != 3 || cv.TotalReach != 1500 || cv.ByType["article"] != 2 || cv.ByType["interview"] != 1 ||
		!cmp.Equal(map[string]int{"positive": 1, "negative": 1, "neutral": 0, "mixed": 0, "unspecified": 1}, cv.BySentiment) {
		t.Errorf("coverage %+v", cv)
	}
	want := c.Must("get_interaction_log", M{"outlet_id": w.planet, "limit": 10}, nil)
	if diff := cmp.Diff(string(want), string(d.LatestInteractions)); diff != "" {
		t.Errorf("latest interactions (-log +dossier):\n%s", diff)
	}
	c.Fail("get_outlet_dossier", M{"outlet_id": uuid.NewString()}, "not_found")
}

type oppStatus struct {
	Stage          string    `json:"stage"`
	EnteredStageAt time.Time `json:"entered_stage_at"`
	DaysInStage    int       `json:"days_in_stage"`
	StageHistory   []struct {
		Stage           string     `json:"stage"`
		At              time.Time  `json:"at"`
		LeftAt          *time.Time `json:"left_at"`
		DurationSeconds int64      `json:"duration_seconds"`
		Days            int        `json:"days"`
	} `json:"stage_history"`
	NextAction struct {
		Action      string     `json:"action"`
		Date        *time.Time `json:"date"`
		Owner       string     `json:"owner"`
		Overdue     bool       `json:"overdue"`
		DaysOverdue int        `json:"days_overdue"`
		DueInDays   *int       `json:"due_in_days"`
	} `json:"next_action"`
	Contacts []struct {
		ID string `json:"id"`
	} `json:"contacts"`
	Coverage []struct {
		ID string `json:"id"`
	} `json:"coverage"`
	ReplySincePitch struct {
		PitchedAt *time.Time `json:"pitched_at"`
		Replied   bool       `json:"replied"`
		Reply     *touch     `json:"reply"`
		ContactID string     `json:"contact_id"`
	} `json:"reply_since_pitch"`
	LatestInteractions json.RawMessage `json:"latest_interactions"`
	AsOf               time.Time       `json:"as_of"`
}

func TestOpportunityStatus(t *testing.T) {
	env := testenv.New(t)
	w := seedDossiers(t, env)
	c := env.Admin()

	// o1: researching → pitched → responded. As of 3 days and 5 hours after
	// the last move, it has been 3 days in responded; each earlier stage
	// lasted until the next began.
	h := history(t, c, w.o1)
	asOf := h[2].At.Add(3*24*time.Hour + 5*time.Hour)
	var s oppStatus
	c.Must("get_opportunity_status", M{"opportunity_id": w.o1, "as_of": asOf.Format(time.RFC3339Nano)}, &s)
	if s.Stage != "responded" || !s.EnteredStageAt.Equal(h[2].At) || s.DaysInStage != 3 || !s.AsOf.Equal(asOf) {
		t.Errorf("stage %s entered %v days %d as of %v", s.Stage, s.EnteredStageAt, s.DaysInStage, s.AsOf)
	}
	if len(s.StageHistory) != 3 {
		t.Fatalf("history %+v", s.StageHistory)
	}
	for i, sp := range s.StageHistory {
		end := asOf
		if i+1 < len(h) {
			end = h[i+1].At
			if sp.LeftAt == nil || !sp.LeftAt.Equal(end) {
				t.Errorf("%s left_at %v, want %v", sp.Stage, sp.LeftAt, end)
			}
		} else if sp.LeftAt != nil {
			t.Errorf("current stage has left_at %v", sp.LeftAt)
		}
		dur := end.Sub(h[i].At)
		if sp.Stage != h[i].Stage || sp.DurationSeconds != int64(dur/time.Second) || sp.Days != int(dur/(24*time.Hour)) {
			t.Errorf("span %d: %+v, want %s %ds %dd", i, sp, h[i].Stage, int64(dur/time.Second), int(dur/(24*time.Hour)))
		}
	}
	if s.StageHistory[2].DurationSeconds != 3*86400+5*3600 {
		t.Errorf("current stage lasted %ds", s.StageHistory[2].DurationSeconds)
	}
	// Pitched, and no email since: no reply.
	if s.ReplySincePitch.PitchedAt == nil || !s.ReplySincePitch.PitchedAt.Equal(h[1].At) || s.ReplySincePitch.Replied || s.ReplySincePitch.Reply != nil {
		t.Errorf("o1 reply since pitch %+v", s.ReplySincePitch)
	}
	if s.NextAction.Date != nil || s.NextAction.Overdue {
		t.Errorf("o1 has no next action: %+v", s.NextAction)
	}

	// o2: Lois replied in the linked thread after the pitch (the team's
	// earlier message in the thread is not a reply).
	var s2 oppStatus
	c.Must("get_opportunity_status", M{"opportunity_id": w.o2}, &s2)
	h2 := history(t, c, w.o2)
	if !s2.ReplySincePitch.PitchedAt.Equal(h2[1].At) || !s2.ReplySincePitch.Replied || s2.ReplySincePitch.ContactID != w.lois ||
		!cmp.Equal(&touch{At: w.replyAt, Via: "email", ID: w.replyMsg, ThreadID: w.replyThread}, s2.ReplySincePitch.Reply) {
		t.Errorf("o2 reply since pitch %+v %+v", s2.ReplySincePitch, s2.ReplySincePitch.Reply)
	}
	if s2.DaysInStage != int(s2.AsOf.Sub(h2[1].At)/(24*time.Hour)) {
		t.Errorf("o2 days in stage %d", s2.DaysInStage)
	}
	want := c.Must("get_interaction_log", M{"opportunity_id": w.o2, "limit": 10}, nil)
	if diff := cmp.Diff(string(want), string(s2.LatestInteractions)); diff != "" {
		t.Errorf("latest interactions (-log +status):\n%s", diff)
	}

	// o5: the next action was due 10 days and 3 hours ago: overdue by 10 days.
	var s5 oppStatus
	c.Must("get_opportunity_status", M{"opportunity_id": w.o5}, &s5)
	na := s5.NextAction
	if na.Action != "Send the draft" || na.Owner != "Ann" || !na.Date.Equal(w.o5Due) || !na.Overdue ||
		na.DaysOverdue != int(s5.AsOf.Sub(w.o5Due)/(24*time.Hour)) || na.DaysOverdue != 10 || na.DueInDays != nil {
		t.Errorf("o5 next action %+v", na)
	}
	if diff := cmp.Diff([]string{w.jimmy, w.lois}, idsOf(s5.Contacts, func(x struct {
		ID string `json:"id"`
	}) string {
		return x.ID
	})); diff != "" {
		t.Errorf("o5 contacts by name (-want +got):\n%s", diff)
	}
	// As of 12 days earlier, the same action is due in 1 day (1 day 21 hours).
	var early oppStatus
	c.Must("get_opportunity_status", M{"opportunity_id": w.o5, "as_of": w.o5Due.Add(-45 * time.Hour).Format(time.RFC3339Nano)}, &early)
	if early.NextAction.Overdue || early.NextAction.DueInDays == nil || *early.NextAction.DueInDays != 1 {
		t.Errorf("o5 as of before the due date: %+v", early.NextAction)
	}
	if early.DaysInStage != 0 {
		t.Errorf("days in stage before the stage began: %d", early.DaysInStage)
	}

	// o4 won: its coverage; a next action of a closed opportunity is never overdue.
	var s4 oppStatus
	c.Must("get_opportunity_status", M{"opportunity_id": w.o4}, &s4)
	if s4.Stage != "won" || len(s4.Coverage) != 1 || s4.Coverage[0].ID != w.c1 {
		t.Errorf("o4 %s coverage %+v", s4.Stage, s4.Coverage)
	}
	// o6 was never pitched.
	var s6 oppStatus
	c.Must("get_opportunity_status", M{"opportunity_id": w.o6}, &s6)
	if s6.ReplySincePitch.PitchedAt != nil || s6.ReplySincePitch.Replied || len(s6.StageHistory) != 1 {
		t.Errorf("o6 %+v", s6)
	}
	// An archived opportunity's status can be read, and says it is archived.
	var s7 struct {
		Archived    bool `json:"archived"`
		Opportunity struct {
			ID, Title, Stage string
		} `json:"opportunity"`
	}
	c.Must("get_opportunity_status", M{"opportunity_id": w.o7}, &s7)
	if !s7.Archived || s7.Opportunity.ID != w.o7 || s7.Opportunity.Title != "Archived pitch" || s7.Opportunity.Stage != "pitched" {
		t.Errorf("o7 %+v", s7)
	}
	if e := c.Fail("get_opportunity_status", M{"opportunity_id": w.o6, "as_of": "yesterday"}, "invalid_argument"); e.Field != "as_of" {
		t.Errorf("field %q", e.Field)
	}
	c.Fail("get_opportunity_status", M{"opportunity_id": uuid.NewString()}, "not_found")
}
