package reports

import (
	"context"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/repo"
	"outreach/repo/pipeline"
)

// PipelineReportQuery selects the opportunities a pipeline report counts:
// the active opportunities of one campaign, or of the whole team; the range
// [Since, Until] is the window of the conversion figures (stage changes
// made in it).
type PipelineReportQuery struct {
	Since, Until time.Time
	CampaignID   string
}

// Pipeline report thresholds.
const (
	// StaleAfter is how long an open opportunity may stay in its stage
	// before the report lists it as stale.
	StaleAfter = 14 * 24 * time.Hour
	// UpcomingWithin is how far ahead the report lists embargoes and
	// deadlines.
	UpcomingWithin = 30 * 24 * time.Hour
	// MaxListed bounds the stale and upcoming lists (their counts are whole).
	MaxListed = 50
	// MaxPipelineItems bounds the opportunities one report reads.
	MaxPipelineItems = 100_000
)

// PipelineReport is the pipeline report.
type PipelineReport struct {
	Scope      string    `json:"scope"` // campaign or team
	CampaignID string    `json:"campaign_id,omitempty"`
	Since      time.Time `json:"since"`
	Until      time.Time `json:"until"`
	// Opportunities is the active (not archived) opportunities of the scope.
	Opportunities int            `json:"opportunities"`
	ByStage       map[string]int `json:"by_stage"`
	// ByOwner counts the open (not won or lost) opportunities per owner's
	// name ("unassigned" without one).
	ByOwner    []OwnerCount `json:"open_by_owner"`
	Conversion Conversion   `json:"conversion"`
	// Stale lists open opportunities whose stage has not changed for
	// StaleAfter (the longest first); StaleCount counts them all.
	Stale      []PipelineItem `json:"stale"`
	StaleCount int            `json:"stale_count"`
	StaleLabel string         `json:"stale_label"`
	// Upcoming lists the embargoes lifting and the target and next-action
	// dates of open opportunities in the next UpcomingWithin (soonest first).
	Upcoming      []Upcoming `json:"upcoming"`
	UpcomingCount int        `json:"upcoming_count"`
	UpcomingLabel string     `json:"upcoming_label"`
	ComputedAt    time.Time  `json:"computed_at"`
}

// OwnerCount is one owner's open opportunities.
type OwnerCount struct {
	Owner string `json:"owner"`
	Open  int    `json:"open"`
}

// Conversion follows the opportunities pitched in the range: how many of
// them reached responded (or any later stage) and placed (or later) so far.
type Conversion struct {
	Label     string `json:"label"`
	Pitched   int    `json:"pitched"`
	Responded int    `json:"responded"`
	Placed    int    `json:"placed"`
	// Rates are percentages of Pitched, one decimal.
	RespondedRate float64 `json:"responded_percent"`
	PlacedRate    float64 `json:"placed_percent"`
}

// PipelineItem is one opportunity in a report's list.
type PipelineItem struct {
	ID          string    `json:"id"`
	Title       string    `json:"title"`
	Stage       string    `json:"stage"`
	Owner       string    `json:"owner"`
	StageSince  time.Time `json:"stage_since"`
	DaysInStage int       `json:"days_in_stage"`
}

// Upcoming is one date ahead: an embargo lifting, a target date or a next
// action.
type Upcoming struct {
	OpportunityID string    `json:"opportunity_id"`
	Title         string    `json:"title"`
	What          string    `json:"what"` // embargo_until, target_date or next_action_date
	At            time.Time `json:"at"`
	Owner         string    `json:"owner"`
}

const (
	labelConversion = "conversion: the opportunities that entered pitched in the range (their stage history), and of them those that reached responded or a later stage (in_progress, placed, published, won), and placed or later (published, won), so far; percentages of pitched"
	unassigned      = "unassigned"
)

// reached lists, per milestone, the stages that count as having reached it.
var (
	reachedResponded = []string{"responded", "in_progress", "placed", "published", pipeline.StageWon}
	reachedPlaced    = []string{"placed", "published", pipeline.StageWon}
)

// PipelineReport computes the pipeline report: one bounded read of the
// scope's opportunities and one of their owners' names.
func (s *Store) PipelineReport(ctx context.Context, q PipelineReportQuery) (*PipelineReport, error) {
	if q.Until.Before(q.Since) {
		return nil, repo.Invalid("until", "%s is before since %s", q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339))
	}
	now := repo.Now()
	r := &PipelineReport{Scope: "team", Since: q.Since, Until: q.Until, ComputedAt: now, ByStage: map[string]int{},
		ByOwner: []OwnerCount{}, Stale: []PipelineItem{}, Upcoming: []Upcoming{},
		StaleLabel:    "open opportunities (not won or lost) whose stage has not changed for 14 days or more, as of computed_at",
		UpcomingLabel: "embargoes lifting, target dates and next actions of open opportunities in the 30 days after computed_at",
		Conversion:    Conversion{Label: labelConversion}}
	for _, st := range pipeline.Stages {
		r.ByStage[st] = 0
	}
	filter := bson.M{"archived_at": nil}
	if q.CampaignID != "" {
		if _, err := pipeline.Of(s.Store).Campaign(ctx, q.CampaignID); err != nil {
			return nil, repo.WithField(err, "campaign_id")
		}
		filter["campaign_id"] = q.CampaignID
		r.Scope, r.CampaignID = "campaign", q.CampaignID
	}
	n, err := s.Count(ctx, repo.CollOpportunities, filter)
	if err != nil {
		return nil, err
	}
	if n > MaxPipelineItems {
		return nil, repo.Errorf(repo.CodeFailedPrecondition, "the scope holds %d opportunities, more than the %d one report reads; name a campaign", n, MaxPipelineItems)
	}
	var opps []pipeline.Opportunity
	if err := s.FindProjected(ctx, repo.CollOpportunities, filter, bson.M{"title": 1, "stage": 1, "stage_history": 1, "owner_id": 1,
		"embargo_until": 1, "target_date": 1, "next_action_date": 1, "created_at": 1}, &opps); err != nil {
		return nil, err
	}
	ownerIDs := []string{}
	for _, o := range opps {
		if o.OwnerID != "" && !slices.Contains(ownerIDs, o.OwnerID) {
			ownerIDs = append(ownerIDs, o.OwnerID)
		}
	}
	owners := map[string]string{}
	if len(ownerIDs) > 0 {
		var users []repo.User
		if err := s.lookup(ctx, repo.CollUsers, ownerIDs, bson.M{"name": 1}, &users); err != nil {
			return nil, err
		}
		for _, u := range users {
			owners[u.ID] = u.Name
		}
	}
	ownerOf := func(o pipeline.Opportunity) string {
		if o.OwnerID == "" {
			return unassigned
		}
		if n := owners[o.OwnerID]; n != "" {
			return n
		}
		return o.OwnerID
	}
	open := map[string]int{}
	horizon := now.Add(UpcomingWithin)
	for _, o := range opps {
		r.Opportunities++
		r.ByStage[o.Stage]++
		since := o.CreatedAt
		pitched := false
		var reached []string
		for _, h := range o.StageHistory {
			if h.Stage == "pitched" && !h.At.Before(q.Since) && !h.At.After(q.Until) {
				pitched = true
			}
			reached = append(reached, h.Stage)
		}
		if n := len(o.StageHistory); n > 0 {
			since = o.StageHistory[n-1].At
		}
		if pitched {
			r.Conversion.Pitched++
			if slices.ContainsFunc(reached, func(st string) bool { return slices.Contains(reachedResponded, st) }) {
				r.Conversion.Responded++
			}
			if slices.ContainsFunc(reached, func(st string) bool { return slices.Contains(reachedPlaced, st) }) {
				r.Conversion.Placed++
			}
		}
		if pipeline.Terminal(o.Stage) {
			continue
		}
		owner := ownerOf(o)
		open[owner]++
		if now.Sub(since) >= StaleAfter {
			r.StaleCount++
			r.Stale = append(r.Stale, PipelineItem{ID: o.ID, Title: o.Title, Stage: o.Stage, Owner: owner, StageSince: since,
				DaysInStage: int(now.Sub(since).Hours() / 24)})
		}
		for _, d := range []struct {
			what string
			at   *time.Time
		}{{"embargo_until", o.EmbargoUntil}, {"target_date", o.TargetDate}, {"next_action_date", o.NextActionDate}} {
			if d.at != nil && !d.at.Before(now) && !d.at.After(horizon) {
				r.UpcomingCount++
				r.Upcoming = append(r.Upcoming, Upcoming{OpportunityID: o.ID, Title: o.Title, What: d.what, At: *d.at, Owner: owner})
			}
		}
	}
	for name, n := range open {
		r.ByOwner = append(r.ByOwner, OwnerCount{Owner: name, Open: n})
	}
	slices.SortFunc(r.ByOwner, func(a, b OwnerCount) int {
		if a.Open != b.Open {
			return b.Open - a.Open
		}
		return strings.Compare(a.Owner, b.Owner)
	})
	slices.SortFunc(r.Stale, func(a, b PipelineItem) int {
		if c := a.StageSince.Compare(b.StageSince); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	slices.SortFunc(r.Upcoming, func(a, b Upcoming) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.OpportunityID+a.What, b.OpportunityID+b.What)
	})
	r.Stale = r.Stale[:min(len(r.Stale), MaxListed)]
	r.Upcoming = r.Upcoming[:min(len(r.Upcoming), MaxListed)]
	if c := &r.Conversion; c.Pitched > 0 {
		c.RespondedRate, c.PlacedRate = percent(c.Responded, c.Pitched), percent(c.Placed, c.Pitched)
	}
	return r, nil
}
