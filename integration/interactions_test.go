package integration

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/dossiers"
)

type interactionLog struct {
	TotalEntries int `json:"total_entries"`
	Showing      int `json:"showing"`
	Entries      []struct {
		Type       string    `json:"type"`
		ID         string    `json:"id"`
		Date       time.Time `json:"date"`
		Title      string    `json:"title"`
		Summary    string    `json:"summary"`
		DetailType *string   `json:"detail_type"`
	} `json:"entries"`
}

func logDay(d int, h int) time.Time { return time.Date(2026, 4, d, h, 0, 0, 0, time.UTC) }

// logWorld holds records of every source of the log around two contacts, an
// outlet and an opportunity.
type logWorld struct {
	entities
	otherOutlet, otherOpp string
	ids                   map[string]string // name → id of each interaction
}

// seedLog makes the records through their tools, and the email threads
// (which have no tools) directly in the store.
func seedLog(t *testing.T, env *testenv.Env) logWorld {
	t.Helper()
	ctx := audit.WithActor(context.Background(), repo.SystemActor("fixtures"))
	w := logWorld{entities: fixtures(t, env), ids: map[string]string{}}
	thread := func(fields map[string]any) {
		if _, err := env.Store.Fixture(ctx, "email_threads", fields); err != nil {
			t.Fatal(err)
		}
	}
	c := env.Admin()
	w.otherOutlet = mk(t, c, "create_outlet", M{"name": "Other"})
	w.otherOpp = mk(t, c, "create_opportunity", M{"title": "Other opp", "outlet_id": w.otherOutlet})
	note := func(name string, args M) {
		var n struct {
			ID string `json:"id"`
		}
		c.Must("create_note", args, &n)
		w.ids[name] = n.ID
	}
	note("n-contact", M{"type": "meeting", "title": "Coffee", "content": "\n  First line here  \nsecond", "occurred_at": logDay(1, 9).Format(time.RFC3339), "contact_ids": []string{w.contact}})
	note("n-both", M{"type": "phone_call", "title": "Call", "content": "About the launch", "occurred_at": logDay(3, 9).Format(time.RFC3339), "contact_ids": []string{w.contact}, "opportunity_ids": []string{w.opportunity}})
	note("n-outlet", M{"type": "research", "title": "Outlet research", "occurred_at": logDay(5, 9).Format(time.RFC3339), "outlet_ids": []string{w.outlet}})
	note("n-archived", M{"title": "Gone", "occurred_at": logDay(6, 9).Format(time.RFC3339), "contact_ids": []string{w.contact}})
	c.Must("archive_note", M{"id": w.ids["n-archived"]}, nil)

	w.ids["c-contact"] = mk(t, c, "create_coverage", M{"title": "Launch story", "url": "https://planet.example/launch", "published_at": logDay(4, 12).Format(time.RFC3339),
		"type": "article", "sentiment": "positive", "contact_ids": []string{w.contact}, "outlet_id": w.outlet, "opportunity_id": w.opportunity})
	w.ids["c-other"] = mk(t, c, "create_coverage", M{"title": "Other story", "published_at": logDay(2, 12).Format(time.RFC3339), "type": "segment",
		"contact_ids": []string{w.contact2}, "outlet_id": w.otherOutlet})
	mkArchived(t, c, "coverage", M{"title": "Archived story", "published_at": logDay(2, 13).Format(time.RFC3339), "type": "article", "contact_ids": []string{w.contact}})

	msg := func(name, subject, body string, at time.Time, contacts ...string) map[string]any {
		w.ids[name] = uuid.NewString()
		return map[string]any{"id": w.ids[name], "message_id": "<" + name + "@mail>", "from": "a@example.com", "to": []string{"b@example.com"},
			"subject": subject, "date": at, "body_text": body, "contact_ids": contacts}
	}
	thread(map[string]any{"subject": "Launch", "contact_ids": []string{w.contact}, "last_message_at": logDay(2, 15),
		"opportunity_links": []map[string]any{{"id": "l1", "opportunity_id": w.opportunity, "linked_at": logDay(2, 0)}},
		"messages": []map[string]any{
			msg("e-1", "Launch", "Hi Lois,\nhere is the kit", logDay(2, 10), w.contact),
			msg("e-2", "Re: Launch", "Thanks!", logDay(2, 15), w.contact),
		}})
	thread(map[string]any{"subject": "Hello Jimmy", "contact_ids": []string{w.contact2}, "last_message_at": logDay(3, 15),
		"opportunity_links": []map[string]any{{"id": "l2", "opportunity_id": w.otherOpp, "linked_at": logDay(2, 0)}},
		"messages":          []map[string]any{msg("e-3", "Hello Jimmy", "  \n\nplain", logDay(3, 15), w.contact2)}})
	return w
}

func TestInteractionLog(t *testing.T) {
	env := testenv.New(t)
	w := seedLog(t, env)
	c := env.Admin()
	names := map[string]string{}
	for k, v := range w.ids {
		names[v] = k
	}
	run := func(args M) []string {
		var l interactionLog
		c.Must("get_interaction_log", args, &l)
		out := []string{}
		for _, e := range l.Entries {
			out = append(out, names[e.ID])
		}
		if l.Showing != len(l.Entries) {
			t.Errorf("showing %d for %d entries", l.Showing, len(l.Entries))
		}
		return out
	}
	cases := []struct {
		name string
		args M
		want []string
	}{
		{"contact", M{"contact_id": w.contact}, []string{"c-contact", "n-both", "e-2", "e-1", "n-contact"}},
		{"other contact", M{"contact_id": w.contact2}, []string{"e-3", "c-other"}},
		{"opportunity", M{"opportunity_id": w.opportunity}, []string{"c-contact", "n-both", "e-2", "e-1"}},
		// An outlet's log: notes linked to it, coverage in it, and emails of its
		// affiliated contacts or of threads linked to its opportunities.
		{"outlet", M{"outlet_id": w.outlet}, []string{"n-outlet", "c-contact", "e-2", "e-1"}},
		{"other outlet", M{"outlet_id": w.otherOutlet}, []string{"e-3", "c-other"}},
		{"contact and opportunity", M{"contact_id": w.contact, "opportunity_id": w.opportunity}, []string{"c-contact", "n-both", "e-2", "e-1"}},
		{"contact and outlet", M{"contact_id": w.contact, "outlet_id": w.outlet}, []string{"c-contact", "e-2", "e-1"}},
		{"contact2 and outlet", M{"contact_id": w.contact2, "outlet_id": w.outlet}, []string{}},
		{"since is inclusive", M{"contact_id": w.contact, "since": logDay(2, 15).Format(time.RFC3339)}, []string{"c-contact", "n-both", "e-2"}},
		{"bare until includes the whole day", M{"contact_id": w.contact, "until": "2026-04-02"}, []string{"e-2", "e-1", "n-contact"}},
		{"since and until dates", M{"contact_id": w.contact, "since": "2026-04-02", "until": "2026-04-03"}, []string{"n-both", "e-2", "e-1"}},
		{"limit", M{"contact_id": w.contact, "limit": 2}, []string{"c-contact", "n-both"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, run(tc.args)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	var l interactionLog
	raw := c.Must("get_interaction_log", M{"contact_id": w.contact, "limit": 2}, &l)
	if l.TotalEntries != 5 || l.Showing != 2 {
		t.Errorf("total_entries %d showing %d; want 5 and 2", l.TotalEntries, l.Showing)
	}
	var shape map[string]json.RawMessage
	json.Unmarshal(raw, &shape)
	if diff := cmp.Diff([]string{"entries", "showing", "total_entries"}, keys(shape)); diff != "" {
		t.Errorf("response fields (-want +got):\n%s", diff)
	}

	c.Must("get_interaction_log", M{"contact_id": w.contact}, &l)
	got := map[string]map[string]any{}
	var rawLog struct {
		Entries []map[string]any `json:"entries"`
	}
	json.Unmarshal(c.Must("get_interaction_log", M{"contact_id": w.contact}, nil), &rawLog)
	for _, e := range rawLog.Entries {
		got[names[e["id"].(string)]] = e
	}
	want := map[string]map[string]any{
		"c-contact": {"type": "coverage", "id": w.ids["c-contact"], "date": "2026-04-04T12:00:00Z", "title": "Launch story",
			"summary": "article - positive - https://planet.example/launch", "detail_type": "article"},
		"n-both":    {"type": "note", "id": w.ids["n-both"], "date": "2026-04-03T09:00:00Z", "title": "Call", "summary": "About the launch", "detail_type": "phone_call"},
		"e-2":       {"type": "email", "id": w.ids["e-2"], "date": "2026-04-02T15:00:00Z", "title": "Re: Launch", "summary": "Thanks!"},
		"e-1":       {"type": "email", "id": w.ids["e-1"], "date": "2026-04-02T10:00:00Z", "title": "Launch", "summary": "Hi Lois,"},
		"n-contact": {"type": "note", "id": w.ids["n-contact"], "date": "2026-04-01T09:00:00Z", "title": "Coffee", "summary": "First line here", "detail_type": "meeting"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got); detail_type absent for email:\n%s", diff)
	}
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestInteractionLogDefaultsToFifty(t *testing.T) {
	env := testenv.New(t)
	e := fixtures(t, env)
	c := env.Admin()
	for i := 0; i < 55; i++ {
		c.Must("create_note", M{"occurred_at": logDay(1, 0).Add(time.Duration(i) * time.Minute).Format(time.RFC3339), "contact_ids": []string{e.contact}}, nil)
	}
	var l interactionLog
	c.Must("get_interaction_log", M{"contact_id": e.contact}, &l)
	if l.TotalEntries != 55 || l.Showing != 50 || !l.Entries[0].Date.Equal(logDay(1, 0).Add(54*time.Minute)) {
		t.Errorf("total %d showing %d first %v", l.TotalEntries, l.Showing, l.Entries[0].Date)
	}
}

var updateGolden = flag.Bool("update", false, "rewrite golden files")

// TestInteractionPipelineGolden pins the shape of the $unionWith pipeline
// that MongoDB runs (the embedded store cannot run it).
func TestInteractionPipelineGolden(t *testing.T) {
	env := testenv.New(t)
	since, until := logDay(1, 0), logDay(30, 0)
	p, err := dossiers.Of(env.Store).InteractionPipeline(context.Background(), dossiers.InteractionQuery{
		ContactID: "11111111-1111-4111-8111-111111111111", OpportunityID: "22222222-2222-4222-8222-222222222222",
		OutletID: "33333333-3333-4333-8333-333333333333", Since: &since, Until: &until, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := bson.MarshalExtJSON(bson.M{"pipeline": p}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	got, _ := json.MarshalIndent(v, "", "  ")
	path := filepath.Join("testdata", "interaction_pipeline.golden.json")
	if *updateGolden {
		os.WriteFile(path, append(got, '\n'), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.TrimSpace(string(want)), string(got)); diff != "" {
		t.Errorf("pipeline (-golden +now); if intended: go test ./integration -run Golden -update\n%s", diff)
	}
}

// TestInteractionBuildersAgree runs both builders on the same fixtures where
// the server has $unionWith (MongoDB through MONGODB_URI or testcontainers).
func TestInteractionBuildersAgree(t *testing.T) {
	env := testenv.New(t)
	if !env.Store.Capabilities().UnionWith {
		t.Skip("this server has no $unionWith (the embedded store): the pipeline builder is compared where MongoDB runs")
	}
	w := seedLog(t, env)
	ctx := context.Background()
	since, until := logDay(2, 0), logDay(3, 23)
	for _, q := range []dossiers.InteractionQuery{
		{ContactID: w.contact}, {ContactID: w.contact2}, {OpportunityID: w.opportunity}, {OutletID: w.outlet},
		{OutletID: w.otherOutlet}, {ContactID: w.contact, OutletID: w.outlet}, {ContactID: w.contact, Since: &since, Until: &until},
		{ContactID: w.contact, Limit: 2},
	} {
		if q.Limit == 0 {
			q.Limit = 50
		}
		a, err := dossiers.Of(env.Store).InteractionLog(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		b, err := dossiers.Of(env.Store).InteractionLogMerged(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(b, a); diff != "" {
			t.Errorf("%+v: pipeline differs from merge (-merge +pipeline):\n%s", q, diff)
		}
	}
}
