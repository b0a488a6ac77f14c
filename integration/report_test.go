package integration

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"outreach/integration/testenv"
	"outreach/repo"
)

type coverageReport struct {
	Scope       string         `json:"scope"`
	Items       int            `json:"items"`
	ByType      map[string]int `json:"by_type"`
	BySentiment map[string]int `json:"by_sentiment"`
	ByTier      map[string]int `json:"by_outlet_tier"`
	Reach       struct {
		TotalImpressions      int64  `json:"total_impressions"`
		TotalImpressionsLabel string `json:"total_impressions_label"`
		UniqueAudience        int64  `json:"unique_audience"`
		UniqueAudienceLabel   string `json:"unique_audience_label"`
		ItemsWithoutReach     int    `json:"items_without_reach"`
		OutletsWithoutSize    int    `json:"outlets_without_audience_size"`
		Saturated             bool   `json:"saturated"`
	} `json:"reach"`
	Share struct {
		Ours     int                `json:"ours"`
		Mentions map[string]int     `json:"competitor_mentions"`
		Share    map[string]float64 `json:"share_percent"`
	} `json:"share_of_voice"`
	Trend []struct {
		WeekStart        string `json:"week_start"`
		Items            int    `json:"items"`
		TotalImpressions int64  `json:"total_impressions"`
	} `json:"trend_by_week"`
	AVE *struct {
		Value    float64 `json:"value"`
		Currency string  `json:"currency"`
		Label    string  `json:"label"`
	} `json:"ave"`
}

// TestCoverageReport builds a fixture through the tools and checks the
// report against figures worked out by hand.
func TestCoverageReport(t *testing.T) {
	env := testenv.New(t)
	c := env.Client(env.Key("read", "write"), "report")
	id := func(tool string, args M) string { return testenv.ID(t, c.Must(tool, args, nil)) }
	a := id("create_outlet", M{"name": "Alpha Daily", "tier": 1, "audience_size": 1000000})
	b := id("create_outlet", M{"name": "Beta Pod", "tier": 2, "audience_size": 500000, "type": "podcast_network"})
	cc := id("create_outlet", M{"name": "Gamma Blog", "type": "blog"})
	k := id("create_campaign", M{"name": "Launch"})
	o1 := id("create_opportunity", M{"title": "Launch story", "campaign_id": k, "outlet_id": a})
	id("create_coverage", M{"title": "Acme beats Globex in review", "type": "review", "sentiment": "positive", "opportunity_id": o1, "reach": 100000, "published_at": "2026-11-03T10:00:00Z"})
	id("create_coverage", M{"title": "Launch day", "summary": "INITECH was also there", "type": "article", "sentiment": "neutral", "opportunity_id": o1, "reach": 200000, "published_at": "2026-11-10"})
	id("create_coverage", M{"title": "Podcast", "type": "segment", "outlet_id": b, "reach": 50000, "published_at": "2026-11-11T08:00:00Z"})
	id("create_coverage", M{"title": "Other", "summary": "globex and initech", "type": "article", "sentiment": "negative", "outlet_id": cc, "published_at": "2026-11-12T00:00:00Z"})
	id("create_coverage", M{"title": "Later, Globex", "type": "article", "outlet_id": a, "reach": 999, "published_at": "2026-11-20"})
	archived := id("create_coverage", M{"title": "Archived Globex", "type": "article", "outlet_id": b, "reach": 7, "published_at": "2026-11-05"})
	c.Must("archive_coverage", M{"id": archived}, nil)

	var noAVE coverageReport
	c.Must("get_coverage_report", M{"since": "2026-11-02", "until": "2026-11-15T23:59:59Z"}, &noAVE)
	if noAVE.AVE != nil || noAVE.Share.Ours != 4 || len(noAVE.Share.Mentions) != 0 {
		t.Errorf("before settings: AVE %+v, share %+v; want no AVE and no competitors", noAVE.AVE, noAVE.Share)
	}
	c.Must("update_settings", M{"competitors": []string{"Globex", "Initech", "globex"}, "ave_rate_per_thousand": 25, "ave_currency": "EUR"}, nil)
	c.Fail("update_settings", M{"ave_off": true, "ave_rate_per_thousand": 3}, repo.CodeInvalid)

	var team coverageReport
	c.Must("get_coverage_report", M{"since": "2026-11-02", "until": "2026-11-15T23:59:59Z"}, &team)
	if team.Scope != "team" || team.Items != 4 {
		t.Fatalf("team report: scope %s items %d, want team 4", team.Scope, team.Items)
	}
	for _, d := range []struct {
		name      string
		got, want any
	}{
		{"by_type", team.ByType, map[string]int{"article": 2, "review": 1, "segment": 1, "interview": 0, "opinion": 0, "listicle": 0, "roundup": 0, "appearance": 0, "award_win": 0, "other": 0}},
		{"by_sentiment", team.BySentiment, map[string]int{"positive": 1, "neutral": 1, "negative": 1, "mixed": 0, "unrated": 1}},
		{"by_tier", team.ByTier, map[string]int{"1": 2, "2": 1, "3": 0, "untiered": 1}},
		{"reach", []int64{team.Reach.TotalImpressions, team.Reach.UniqueAudience, int64(team.Reach.ItemsWithoutReach), int64(team.Reach.OutletsWithoutSize)}, []int64{350000, 1500000, 1, 1}},
		{"mentions", team.Share.Mentions, map[string]int{"Globex": 2, "Initech": 2}},
		{"share", team.Share.Share, map[string]float64{"ours": 50, "Globex": 25, "Initech": 25}},
		{"trend", len(team.Trend), 2},
	} {
		if diff := cmp.Diff(d.got, d.want); diff != "" {
			t.Errorf("%s (-got +want):\n%s", d.name, diff)
		}
	}
	if team.Reach.TotalImpressionsLabel == "" || team.Reach.UniqueAudienceLabel == "" || team.Reach.Saturated {
		t.Errorf("reach labels %q %q saturated %v", team.Reach.TotalImpressionsLabel, team.Reach.UniqueAudienceLabel, team.Reach.Saturated)
	}
	if len(team.Trend) == 2 && (team.Trend[0].WeekStart != "2026-11-02" || team.Trend[0].Items != 1 || team.Trend[0].TotalImpressions != 100000 ||
		team.Trend[1].WeekStart != "2026-11-09" || team.Trend[1].Items != 3 || team.Trend[1].TotalImpressions != 250000) {
		t.Errorf("trend %+v", team.Trend)
	}
	if team.AVE == nil || team.AVE.Value != 8750 || team.AVE.Currency != "EUR" || team.AVE.Label == "" {
		t.Errorf("AVE %+v, want 8750 EUR labelled", team.AVE)
	}

	var camp coverageReport
	c.Must("get_coverage_report", M{"since": "2026-11-02", "until": "2026-11-15T23:59:59Z", "campaign_id": k}, &camp)
	if camp.Scope != "campaign" || camp.Items != 2 || camp.Reach.TotalImpressions != 300000 || camp.Reach.UniqueAudience != 1000000 || camp.ByTier["1"] != 2 {
		t.Errorf("campaign report: %+v", camp)
	}
	var set coverageReport
	c.Must("get_coverage_report", M{"since": "2026-11-02", "until": "2026-11-15T23:59:59Z", "outlet_ids": []string{b, cc}}, &set)
	if set.Scope != "outlets" || set.Items != 2 || set.Reach.TotalImpressions != 50000 || set.Reach.UniqueAudience != 500000 || set.Share.Mentions["Globex"] != 1 {
		t.Errorf("outlet-set report: %+v", set)
	}

	c.Fail("get_coverage_report", M{"since": "2026-11-15", "until": "2026-11-01"}, repo.CodeInvalid)
	c.Fail("get_coverage_report", M{"campaign_id": k, "outlet_ids": []string{a}}, repo.CodeInvalid)
	c.Fail("get_coverage_report", M{"campaign_id": "2b7a4c1e-0000-4000-8000-000000000000"}, repo.CodeNotFound)
	c.Must("update_settings", M{"ave_off": true}, nil)
	var off coverageReport
	c.Must("get_coverage_report", M{"since": "2026-11-02", "until": "2026-11-15T23:59:59Z"}, &off)
	if off.AVE != nil {
		t.Errorf("AVE after ave_off: %+v", off.AVE)
	}
}

// Defect: a bare-date until dropped that whole day from the coverage report
// (list_coverage includes it), and the default since moved with it. A
// bare-date until is the end of its day everywhere, and the default since
// makes the range the 30 whole days ending with it.
func TestCoverageReportBareDateUntilIncludesTheDay(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	for _, at := range []string{"2026-05-29T23:59:59Z", "2026-05-30T00:00:00Z", "2026-06-28T12:00:00Z", "2026-06-28T23:59:59.999Z", "2026-06-29T00:00:00Z"} {
		c.Must("create_coverage", M{"title": "Story " + at, "published_at": at}, nil)
	}
	var list struct {
		Total int `json:"total"`
	}
	c.Must("list_coverage", M{"since": "2026-06-28", "until": "2026-06-28"}, &list)
	var rep struct {
		Items int    `json:"items"`
		Since string `json:"since"`
		Until string `json:"until"`
	}
	c.Must("get_coverage_report", M{"since": "2026-06-28", "until": "2026-06-28"}, &rep)
	if list.Total != 2 || rep.Items != list.Total {
		t.Errorf("2026-06-28 alone: list_coverage %d, get_coverage_report %d items; want 2 and 2", list.Total, rep.Items)
	}
	// The default since: the 30 whole days ending with until's day.
	c.Must("get_coverage_report", M{"until": "2026-06-28"}, &rep)
	if rep.Items != 3 || rep.Since != "2026-05-30T00:00:00Z" || rep.Until != "2026-06-28T23:59:59.999Z" {
		t.Errorf("until 2026-06-28 alone: %d items from %s to %s; want 3 from 2026-05-30T00:00:00Z to 2026-06-28T23:59:59.999Z", rep.Items, rep.Since, rep.Until)
	}
	// A datetime until is that moment, and the default since 30 days before it.
	c.Must("get_coverage_report", M{"until": "2026-06-28T12:00:00Z"}, &rep)
	if rep.Items != 3 || rep.Since != "2026-05-29T12:00:00Z" {
		t.Errorf("until 2026-06-28T12:00:00Z: %d items from %s; want 3 from 2026-05-29T12:00:00Z", rep.Items, rep.Since)
	}
}
