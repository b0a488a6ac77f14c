package integration

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/repo"
)

// The coverage report counts the recipients pitches were sent to in its
// range and scope (a campaign's opportunities, the outlets'), with the
// replies and bounces recorded so far.
func TestCoverageReportPitches(t *testing.T) {
	env := testenv.New(t)
	c := env.Client(env.Key("read", "write"), "report")
	a := mk(t, c, "create_outlet", M{"name": "Alpha Daily"})
	b := mk(t, c, "create_outlet", M{"name": "Beta Pod"})
	k := mk(t, c, "create_campaign", M{"name": "Launch"})
	o1 := mk(t, c, "create_opportunity", M{"title": "Launch story", "campaign_id": k, "outlet_id": a})
	o2 := mk(t, c, "create_opportunity", M{"title": "Podcast", "outlet_id": b})
	ctx := audit.WithActor(context.Background(), repo.SystemActor("fixtures"))
	n := 0
	to := func(state, sent string) map[string]any {
		n++
		r := map[string]any{"contact_id": "c" + string(rune('a'+n)), "email": "r@paper.example", "first_name": "R", "state": state}
		if sent != "" {
			at, _ := time.Parse(time.DateOnly, sent)
			r["sent_at"] = at.Add(9 * time.Hour)
		}
		return r
	}
	pitch := func(opp string, archived bool, recipients ...map[string]any) {
		f := map[string]any{"opportunity_id": opp, "from": "team@example.com", "subject": "S", "body": "B", "state": "sent",
			"content_hash": "h", "drafted_by": map[string]any{"user_id": "u", "agent_id": "x"}, "recipients": recipients}
		if archived {
			f["archived_at"] = time.Now()
		}
		if _, err := env.Store.Fixture(ctx, "pitches", f); err != nil {
			t.Fatal(err)
		}
	}
	pitch(o1, false, to("replied", "2026-11-03"), to("bounced", "2026-11-04"), to("suppressed", ""))
	pitch(o2, false, to("sent", "2026-11-05"), to("sent", "2026-12-01"))
	pitch(o1, false, to("replied", "2026-10-01"))
	pitch(o1, true, to("sent", "2026-11-03"))

	type counts struct {
		Pitches        int     `json:"pitches"`
		RecipientsSent int     `json:"recipients_sent"`
		Replied        int     `json:"replied"`
		Bounced        int     `json:"bounced"`
		ReplyRate      float64 `json:"reply_rate_percent"`
		Label          string  `json:"label"`
	}
	for _, tc := range []struct {
		name string
		args M
		want counts
	}{
		{"team", M{}, counts{Pitches: 2, RecipientsSent: 3, Replied: 1, Bounced: 1, ReplyRate: 33.3}},
		{"campaign", M{"campaign_id": k}, counts{Pitches: 1, RecipientsSent: 2, Replied: 1, Bounced: 1, ReplyRate: 50}},
		{"outlets", M{"outlet_ids": []string{b}}, counts{Pitches: 1, RecipientsSent: 1}},
	} {
		args := M{"since": "2026-11-02", "until": "2026-11-15"}
		for k, v := range tc.args {
			args[k] = v
		}
		var r struct {
			Pitches counts `json:"pitches"`
		}
		c.Must("get_coverage_report", args, &r)
		if r.Pitches.Label == "" {
			t.Errorf("%s: pitches without their label", tc.name)
		}
		r.Pitches.Label = ""
		if diff := cmp.Diff(r.Pitches, tc.want); diff != "" {
			t.Errorf("%s (-got +want):\n%s", tc.name, diff)
		}
	}
}
