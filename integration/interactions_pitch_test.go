package integration

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/dossiers"
)

// A sent pitch is an interaction per recipient it went to (whatever
// happened next), in both builders of the log: not a recipient the guards
// suppressed, not a draft, not an archived pitch.
func TestInteractionLogPitches(t *testing.T) {
	env := testenv.New(t)
	w := fixtures(t, env)
	c := env.Admin()
	ctx := audit.WithActor(context.Background(), repo.SystemActor("fixtures"))
	other := mk(t, c, "create_opportunity", M{"title": "Other opp"})
	pitch := func(opp, subject string, archived bool, recipients ...map[string]any) string {
		f := map[string]any{"opportunity_id": opp, "from": "team@example.com", "subject": subject, "body": "Hi", "state": "sent",
			"content_hash": "h", "drafted_by": map[string]any{"user_id": "u", "agent_id": "a"}, "recipients": recipients}
		if archived {
			f["archived_at"] = logDay(9, 0)
		}
		id, err := env.Store.Fixture(ctx, "pitches", f)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	to := func(contact, email, state string, day int) map[string]any {
		r := map[string]any{"contact_id": contact, "email": email, "first_name": "X", "state": state}
		if day > 0 {
			r["sent_at"] = logDay(day, 8)
			r["message_id"] = "<" + contact + "@team>"
		}
		return r
	}
	launch := pitch(w.opportunity, "The launch", false, to(w.contact, "lois@planet.example", "replied", 4), to(w.contact2, "jimmy@planet.example", "suppressed", 0))
	later := pitch(other, "Another angle", false, to(w.contact2, "jimmy@planet.example", "sent", 6), to(w.contact, "lois@planet.example", "bounced", 5))
	pitch(w.opportunity, "Draft", false, to(w.contact, "lois@planet.example", "pending", 0))
	pitch(w.opportunity, "Archived", true, to(w.contact, "lois@planet.example", "sent", 7))

	type entry struct{ Type, ID, Title, Summary, Detail string }
	run := func(args M) []entry {
		var l interactionLog
		c.Must("get_interaction_log", args, &l)
		out := []entry{}
		for _, e := range l.Entries {
			if e.Type == "pitch" {
				out = append(out, entry{e.Type, e.ID, e.Title, e.Summary, *e.DetailType})
			}
		}
		return out
	}
	loisLaunch := entry{"pitch", launch + ":" + w.contact, "The launch", "to lois@planet.example (replied)", "replied"}
	loisLater := entry{"pitch", later + ":" + w.contact, "Another angle", "to lois@planet.example (bounced)", "bounced"}
	jimmyLater := entry{"pitch", later + ":" + w.contact2, "Another angle", "to jimmy@planet.example (sent)", "sent"}
	for _, tc := range []struct {
		name string
		args M
		want []entry
	}{
		{"contact", M{"contact_id": w.contact}, []entry{loisLater, loisLaunch}},
		{"contact2", M{"contact_id": w.contact2}, []entry{jimmyLater}},
		{"opportunity", M{"opportunity_id": w.opportunity}, []entry{loisLaunch}},
		{"outlet: its contact, or its opportunity", M{"outlet_id": w.outlet}, []entry{loisLater, loisLaunch}},
		{"dates", M{"contact_id": w.contact, "since": logDay(5, 0).Format("2006-01-02")}, []entry{loisLater}},
	} {
		if diff := cmp.Diff(run(tc.args), tc.want); diff != "" {
			t.Errorf("%s (-got +want):\n%s", tc.name, diff)
		}
	}

	if !env.Store.Capabilities().UnionWith {
		return // the builders are compared where the server has $unionWith
	}
	since, until := logDay(5, 0), logDay(6, 23)
	for _, q := range []dossiers.InteractionQuery{
		{ContactID: w.contact}, {ContactID: w.contact2}, {OpportunityID: w.opportunity}, {OutletID: w.outlet},
		{ContactID: w.contact, Since: &since, Until: &until}, {ContactID: w.contact, Limit: 1},
	} {
		if q.Limit == 0 {
			q.Limit = 50
		}
		a, err := dossiers.Of(env.Store).InteractionLog(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		b, err := dossiers.Of(env.Store).InteractionLogMerged(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(b, a); diff != "" {
			t.Errorf("%+v: pipeline differs from merge (-merge +pipeline):\n%s", q, diff)
		}
	}
}
