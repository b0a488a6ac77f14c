package reports_test

import (
	"context"
	"testing"
	"time"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/pipeline"
	"outreach/repo/reports"
	"outreach/repo/repotest"
)

// TestPipelineReportCounts stores opportunities with stage histories in the
// past (through the write path) and checks every figure of the pipeline
// report against the counts worked out by hand.
func TestPipelineReportCounts(t *testing.T) {
	s := repotest.OpenEmbedded(t)
	ctx := audit.WithActor(context.Background(), audit.Actor{UserID: "u", AgentID: "a", SessionID: "s", Tool: "test"})
	if err := pipeline.Of(s).Seed(ctx); err != nil {
		t.Fatal(err)
	}
	ann := &repo.User{Name: "Ann", Email: "ann@example.com"}
	if err := repo.Insert(ctx, s, repo.CollUsers, ann); err != nil {
		t.Fatal(err)
	}
	camp, err := pipeline.Of(s).CreateCampaign(ctx, &pipeline.Campaign{Name: "Launch"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	day := func(d int) time.Time { return now.AddDate(0, 0, d).Truncate(time.Millisecond) }
	at := func(d int) *time.Time { t := day(d); return &t }
	h := func(stages ...any) []pipeline.StageChange {
		var out []pipeline.StageChange
		for i := 0; i < len(stages); i += 2 {
			out = append(out, pipeline.StageChange{Stage: stages[i].(string), At: day(stages[i+1].(int))})
		}
		return out
	}
	for _, o := range []*pipeline.Opportunity{
		// pitched 20 days ago, placed 10 days ago: converted, open, not stale (10 days)
		{Title: "placed", Stage: "placed", OwnerID: ann.ID, StageHistory: h("researching", -40, "pitched", -20, "responded", -15, "placed", -10)},
		// pitched 5 days ago, no answer: stale? no (5 days); an embargo in 3 days
		{Title: "waiting", Stage: "pitched", StageHistory: h("researching", -30, "pitched", -5), EmbargoUntil: at(3)},
		// pitched 60 days ago (outside the 30-day range), stale, a target date in 40 days (beyond 30)
		{Title: "old", Stage: "pitched", OwnerID: ann.ID, StageHistory: h("researching", -70, "pitched", -60), TargetDate: at(40)},
		// won: not open, counts in conversion when pitched in range
		{Title: "won", Stage: "won", StageHistory: h("pitched", -25, "responded", -20, "won", -2)},
		// researching for 20 days: stale, a next action tomorrow
		{Title: "stuck", Stage: "researching", OwnerID: ann.ID, StageHistory: h("researching", -20), NextActionDate: at(1)},
	} {
		o.CampaignID, o.Priority, o.ContactIDs = camp.ID, "medium", []string{}
		o.CreatedAt = o.StageHistory[0].At
		if err := repo.Insert(ctx, s, repo.CollOpportunities, o); err != nil {
			t.Fatal(err)
		}
	}
	r, err := reports.Of(s).PipelineReport(ctx, reports.PipelineReportQuery{Since: day(-30), Until: now, CampaignID: camp.ID})
	if err != nil {
		t.Fatal(err)
	}
	if r.Opportunities != 5 || r.ByStage["pitched"] != 2 || r.ByStage["placed"] != 1 || r.ByStage["won"] != 1 || r.ByStage["researching"] != 1 || r.ByStage["lost"] != 0 {
		t.Errorf("by stage: %d %v", r.Opportunities, r.ByStage)
	}
	if len(r.ByOwner) != 2 || r.ByOwner[0] != (reports.OwnerCount{Owner: "Ann", Open: 3}) || r.ByOwner[1] != (reports.OwnerCount{Owner: "unassigned", Open: 1}) {
		t.Errorf("by owner: %+v", r.ByOwner)
	}
	if c := r.Conversion; c.Pitched != 3 || c.Responded != 2 || c.Placed != 2 || c.RespondedRate != 66.7 || c.PlacedRate != 66.7 {
		t.Errorf("conversion: %+v", c)
	}
	if r.StaleCount != 2 || len(r.Stale) != 2 || r.Stale[0].Title != "old" || r.Stale[1].Title != "stuck" || r.Stale[0].DaysInStage != 60 {
		t.Errorf("stale: %d %+v", r.StaleCount, r.Stale)
	}
	if r.UpcomingCount != 2 || len(r.Upcoming) != 2 || r.Upcoming[0].What != "next_action_date" || r.Upcoming[1].What != "embargo_until" {
		t.Errorf("upcoming: %d %+v", r.UpcomingCount, r.Upcoming)
	}
	other, err := pipeline.Of(s).CreateCampaign(ctx, &pipeline.Campaign{Name: "Empty"})
	if err != nil {
		t.Fatal(err)
	}
	if empty, err := reports.Of(s).PipelineReport(ctx, reports.PipelineReportQuery{Since: day(-30), Until: now, CampaignID: other.ID}); err != nil || empty.Opportunities != 0 || empty.Conversion.Pitched != 0 {
		t.Errorf("an empty campaign: %v %+v", err, empty)
	}
	if _, err := reports.Of(s).PipelineReport(ctx, reports.PipelineReportQuery{Since: now, Until: day(-1)}); repo.ErrorCode(err) != repo.CodeInvalid {
		t.Errorf("until before since: %v", err)
	}
}
