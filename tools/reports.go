package tools

import (
	"context"
	"strings"
	"time"

	"outreach/repo"
	"outreach/repo/reports"
)

// Reports is the Reports group: the coverage report and the organisation
// settings it reads (tracked competitors, the AVE rate).
func Reports(s *repo.Store) []Tool {
	type reportIn struct {
		Since      string   `json:"since,omitempty" jsonschema:"first moment counted, by published_at, inclusive (YYYY-MM-DD = that day's start, midnight UTC, or ISO datetime); default 30 days before until (for a YYYY-MM-DD until, the 30 whole days ending with that day)"`
		Until      string   `json:"until,omitempty" jsonschema:"last moment counted, inclusive (YYYY-MM-DD = the whole of that day, up to 23:59:59.999 UTC, or ISO datetime); default now"`
		CampaignID string   `json:"campaign_id,omitempty" jsonschema:"report on this campaign's coverage (UUID); leave out campaign_id and outlet_ids for the whole team"`
		OutletIDs  []string `json:"outlet_ids,omitempty" jsonschema:"report on the coverage of these outlets (UUIDs); not with campaign_id"`
	}
	type settingsIn struct {
		Competitors        *[]string `json:"competitors,omitempty" max:"competitors" jsonschema:"the complete list of competitor names share of voice tracks (at most 50; [] clears it)"`
		AVERatePerThousand *float64  `json:"ave_rate_per_thousand,omitempty" jsonschema:"advertising-value rate per thousand impressions (0 to 1e9); turns AVE on in coverage reports"`
		AVEOff             bool      `json:"ave_off,omitempty" jsonschema:"true turns AVE off (clears the rate); not with ave_rate_per_thousand"`
		AVECurrency        *string   `json:"ave_currency,omitempty" jsonschema:"currency code shown with AVE, e.g. EUR"`
		TeamName           *string   `json:"team_name,omitempty" max:"team_name" jsonschema:"the team's name, printed on rendered and shared reports (one line; \"\" clears it)"`
	}
	type noIn struct{}
	return withApps(append([]Tool{
		newTool("get_coverage_report", "The coverage report over any date range (by published_at, both ends inclusive), for a campaign, a set of outlets, or the whole team: counts by type, sentiment and outlet tier; reach counted two ways, each labelled (total impressions = sum of reach per item; unique audience = audience_size once per outlet); share of voice against the tracked competitors (see update_settings); a trend by week (Monday 00:00 UTC); and, only when a rate is configured, a labelled AVE; and the pitches sent in the range and scope, with replies and bounces so far. Sums stop at the largest figure instead of wrapping (reach.saturated says so). Archived coverage is not counted.", read,
			func(ctx context.Context, in *reportIn) (any, error) {
				q, err := coverageQuery(in.Since, in.Until, in.CampaignID, in.OutletIDs)
				if err != nil {
					return nil, err
				}
				return reports.Of(s).CoverageReport(ctx, q)
			}),
		newTool("get_settings", "The organisation settings: the competitor names share of voice tracks, and the AVE rate and currency (null when AVE is off).", read,
			func(ctx context.Context, _ *noIn) (any, error) { return reports.Of(s).Settings(ctx) }),
		newTool("update_settings", "Change the organisation settings; only the fields given change. competitors replaces the whole list of tracked competitor names; ave_rate_per_thousand sets the AVE rate and ave_off: true clears it.", change,
			func(ctx context.Context, in *settingsIn) (any, error) {
				p := reports.SettingsPatch{Competitors: in.Competitors, AVECurrency: in.AVECurrency, TeamName: in.TeamName}
				switch {
				case in.AVEOff && in.AVERatePerThousand != nil:
					return nil, repo.Invalid("ave_off", "turns AVE off; do not give ave_rate_per_thousand with it")
				case in.AVEOff:
					var off *float64
					p.AVERate = &off
				case in.AVERatePerThousand != nil:
					p.AVERate = &in.AVERatePerThousand
				}
				if p.Competitors == nil && p.AVERate == nil && p.AVECurrency == nil && p.TeamName == nil {
					return nil, repo.Invalid("competitors", "nothing to change: give competitors, ave_rate_per_thousand, ave_currency or team_name")
				}
				return reports.Of(s).UpdateSettings(ctx, p)
			}),
	}, ReportDocs(s)...))
}

// coverageQuery reads a report's range and scope: a bare-date until is the
// end of that day, as everywhere; the default since is then the start of
// the day 29 days before, so the default range is 30 whole days.
func coverageQuery(sinceArg, untilArg, campaignID string, outletIDs []string) (reports.CoverageReportQuery, error) {
	q := reports.CoverageReportQuery{CampaignID: campaignID, OutletIDs: outletIDs, Until: time.Now().UTC()}
	if err := optUUID("campaign_id", campaignID); err != nil {
		return q, err
	}
	if err := checkUUIDs("outlet_ids", outletIDs); err != nil {
		return q, err
	}
	until, err := optionalTime("until", untilArg, true)
	if err != nil {
		return q, err
	}
	q.Since = q.Until.AddDate(0, 0, -30)
	if until != nil {
		q.Until = *until
		q.Since = q.Until.AddDate(0, 0, -30)
		if _, bare := time.Parse(time.DateOnly, strings.TrimSpace(untilArg)); bare == nil {
			q.Since = q.Until.Add(time.Millisecond).AddDate(0, 0, -30)
		}
	}
	since, err := optTime("since", sinceArg)
	if err != nil {
		return q, err
	}
	if since != nil {
		q.Since = *since
	}
	return q, nil
}
