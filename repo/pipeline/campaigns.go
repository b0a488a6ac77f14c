package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger"
	"outreach/repo"
	"outreach/repo/textlist"
)

// GeneralCampaign is the name of the campaign that exists from the first
// start and collects opportunities created without a campaign_id.
const GeneralCampaign = "General"

// CampaignStatuses are the allowed campaign statuses.
var CampaignStatuses = []string{"planning", "active", "paused", "completed"}

// Campaign groups related opportunities. Its metrics are computed on read.
type Campaign struct {
	repo.Meta        `bson:",inline"`
	Name             string     `bson:"name" json:"name"`
	Description      string     `bson:"description,omitempty" json:"description,omitempty"`
	Status           string     `bson:"status" json:"status"`
	StartsOn         *time.Time `bson:"starts_on,omitempty" json:"starts_on,omitempty"`
	EndsOn           *time.Time `bson:"ends_on,omitempty" json:"ends_on,omitempty"`
	Goals            string     `bson:"goals,omitempty" json:"goals,omitempty"`
	TargetPlacements *int64     `bson:"target_placements,omitempty" json:"target_placements,omitempty"`
	// EmbargoUntil is when the campaign's material may be published (UTC);
	// EmbargoZone the offset it was given in, for display (guards.go).
	EmbargoUntil *time.Time `bson:"embargo_until,omitempty" json:"embargo_until,omitempty"`
	EmbargoZone  string     `bson:"embargo_zone,omitempty" json:"embargo_zone,omitempty"`
}

// General reports whether c is the General campaign.
func (c *Campaign) General() bool { return c.Name == GeneralCampaign }

// CampaignPatch is a change to a campaign; nil fields are left as they are,
// and an empty string or a nil date clears an optional field.
type CampaignPatch struct {
	Name, Description, Status, Goals *string
	StartsOn, EndsOn                 **time.Time
	TargetPlacements                 **int64
	// Embargo, when given, sets (or, nil, clears) the embargo.
	Embargo **Embargo
}

// Seed creates what the service needs from its first start: the General
// campaign, unless a campaign of that name exists. Running it again changes
// nothing.
func (s *Store) Seed(ctx context.Context) error {
	n, err := s.Count(ctx, repo.CollCampaigns, bson.M{"name": GeneralCampaign})
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	if n > 0 {
		return nil
	}
	ctx = audit.WithActor(ctx, repo.SystemActor("seed"))
	c := &Campaign{Name: GeneralCampaign, Status: "active",
		Description: "Opportunities created without a campaign join this one."}
	if err := repo.Insert(ctx, s.Store, repo.CollCampaigns, c); err != nil {
		return fmt.Errorf("seed the %s campaign: %w", GeneralCampaign, err)
	}
	return nil
}

// generalID returns the id of the General campaign.
func (s *Store) generalID(ctx context.Context) (string, error) {
	var m repo.Meta
	err := s.FindOne(ctx, repo.CollCampaigns, bson.M{"name": GeneralCampaign},
		options.FindOne().SetSort(bson.D{{Key: "created_at", Value: 1}, {Key: "_id", Value: 1}})).Decode(&m)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return "", repo.Errorf(repo.CodeFailedPrecondition, "the %s campaign is missing; restart the service to create it, or give campaign_id", GeneralCampaign)
	}
	if err != nil {
		return "", ledger.DriverErr(err, "campaign", GeneralCampaign)
	}
	if m.ArchivedAt != nil {
		return "", repo.Errorf(repo.CodeFailedPrecondition, "the %s campaign is archived; restore it or give campaign_id", GeneralCampaign)
	}
	return m.ID, nil
}

// checkCampaignName refuses an empty name, and the reserved name General for
// any campaign but General itself (id), so there is always exactly one.
func (s *Store) checkCampaignName(ctx context.Context, name, id string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", repo.Invalid("name", "must not be empty")
	}
	if strings.EqualFold(name, GeneralCampaign) {
		var m repo.Meta
		err := s.FindOne(ctx, repo.CollCampaigns, bson.M{"name": GeneralCampaign}).Decode(&m)
		if err == nil && m.ID != id {
			return "", &repo.Error{Code: repo.CodeConflict, Field: "name", Message: fmt.Sprintf("name: %q is reserved for the %s campaign (%s); choose another name", name, GeneralCampaign, m.ID)}
		}
	}
	return name, nil
}

func checkCampaign(c *Campaign) error {
	if !slices.Contains(CampaignStatuses, c.Status) {
		return repo.Invalid("status", "%q is not allowed; use one of: %s", c.Status, strings.Join(CampaignStatuses, ", "))
	}
	if c.StartsOn != nil && c.EndsOn != nil && c.EndsOn.Before(*c.StartsOn) {
		return repo.Invalid("ends_on", "%s is before starts_on %s", c.EndsOn.Format(time.DateOnly), c.StartsOn.Format(time.DateOnly))
	}
	if c.TargetPlacements != nil && *c.TargetPlacements < 0 {
		return repo.Invalid("target_placements", "%d is negative; use 0 or more", *c.TargetPlacements)
	}
	return nil
}

// CreateCampaign creates a campaign; status defaults to active.
func (s *Store) CreateCampaign(ctx context.Context, c *Campaign) (*Campaign, error) {
	name, err := s.checkCampaignName(ctx, c.Name, "")
	if err != nil {
		return nil, err
	}
	c.Name = name
	if c.Status == "" {
		c.Status = "active"
	}
	if err := checkCampaign(c); err != nil {
		return nil, err
	}
	c.Meta = repo.Meta{}
	if err := repo.Insert(ctx, s.Store, repo.CollCampaigns, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Campaign returns a campaign.
func (s *Store) Campaign(ctx context.Context, id string) (*Campaign, error) {
	return repo.Find[*Campaign](ctx, s.Store, repo.CollCampaigns, id)
}

// UpdateCampaign applies p to an active campaign. General keeps its name.
func (s *Store) UpdateCampaign(ctx context.Context, id string, p CampaignPatch) (*Campaign, error) {
	if p.Name != nil {
		name, err := s.checkCampaignName(ctx, *p.Name, id)
		if err != nil {
			return nil, err
		}
		p.Name = &name
	}
	return repo.Modify(ctx, s.Store, repo.CollCampaigns, id, audit.ActionUpdate, func(c *Campaign) error {
		if c.Archived() {
			return repo.Errorf(repo.CodeFailedPrecondition, "campaign %s is archived; restore it before changing it", id)
		}
		if p.Name != nil {
			if c.General() && *p.Name != GeneralCampaign {
				return &repo.Error{Code: repo.CodeFailedPrecondition, Field: "name", Message: fmt.Sprintf("name: the %s campaign cannot be renamed: it collects opportunities created without a campaign", GeneralCampaign)}
			}
			c.Name = *p.Name
		}
		set(&c.Description, p.Description)
		set(&c.Status, p.Status)
		set(&c.Goals, p.Goals)
		set(&c.StartsOn, p.StartsOn)
		set(&c.EndsOn, p.EndsOn)
		set(&c.TargetPlacements, p.TargetPlacements)
		if p.Embargo != nil {
			c.EmbargoUntil, c.EmbargoZone = embargoFields(*p.Embargo)
			g, err := embargoCoverage(ctx, s.View(), "campaign_id", id, c.EmbargoUntil)
			if err != nil {
				return err
			}
			if g != nil {
				return g.ToolError()
			}
		}
		return checkCampaign(c)
	})
}

// ArchiveCampaign archives a campaign; General cannot be archived.
func (s *Store) ArchiveCampaign(ctx context.Context, id string) (*Campaign, error) {
	return repo.Archive(ctx, s.Store, repo.CollCampaigns, id, func(c *Campaign) error {
		if c.General() {
			return repo.Errorf(repo.CodeFailedPrecondition, "%s", generalArchived())
		}
		return nil
	})
}

// RestoreCampaign restores an archived campaign.
func (s *Store) RestoreCampaign(ctx context.Context, id string) (*Campaign, error) {
	return repo.Restore[*Campaign](ctx, s.Store, repo.CollCampaigns, id)
}

// CampaignFilter selects campaigns; empty fields do not filter.
type CampaignFilter struct {
	Status, Search  string
	IncludeArchived bool
}

// ListCampaigns lists campaigns, newest first.
func (s *Store) ListCampaigns(ctx context.Context, f CampaignFilter, limit, offset int) (repo.Page[Campaign], error) {
	filter := bson.M{}
	if f.Status != "" {
		filter["status"] = f.Status
	}
	if f.Search != "" {
		return textlist.Page[Campaign](ctx, s.Store, textlist.Filter{Coll: repo.CollCampaigns, Text: f.Search}, repo.Active(filter, f.IncludeArchived), repo.NewestFirst, limit, offset)
	}
	return repo.ListPage[Campaign](ctx, s.Store, repo.CollCampaigns, repo.Active(filter, f.IncludeArchived), repo.NewestFirst, limit, offset)
}

// CampaignMetrics are a campaign's summary figures, computed from the active
// opportunities and coverage at the time of the call.
type CampaignMetrics struct {
	Opportunities OpportunityCounts `json:"opportunities"`
	// WinRate is won / (won + lost), nil while nothing is closed.
	WinRate            *float64       `json:"win_rate"`
	Coverage           CoverageCounts `json:"coverage"`
	OverdueNextActions int            `json:"overdue_next_actions"`
	ComputedAt         time.Time      `json:"computed_at"`
}

// OpportunityCounts counts a campaign's active opportunities.
type OpportunityCounts struct {
	Total   int            `json:"total"`
	Open    int            `json:"open"`
	Won     int            `json:"won"`
	Lost    int            `json:"lost"`
	ByStage map[string]int `json:"by_stage"`
}

// CoverageTally counts coverage by type and sentiment (every allowed value
// listed, 0 when none) and sums its reach without ever wrapping. Campaign
// metrics and the outlet dossier share it.
type CoverageTally struct {
	Total       int            `json:"total"`
	ByType      map[string]int `json:"by_type"`
	BySentiment map[string]int `json:"by_sentiment"`
	TotalReach  int64          `json:"total_reach"`
}

func NewCoverageTally() CoverageTally {
	c := CoverageTally{ByType: map[string]int{}, BySentiment: map[string]int{NoSentiment: 0}}
	for _, ty := range CoverageTypes {
		c.ByType[ty] = 0
	}
	for _, se := range Sentiments {
		c.BySentiment[se] = 0
	}
	return c
}

func (c *CoverageTally) Add(typ, sentiment string, reach *int64) {
	c.Total++
	c.ByType[typ]++
	if sentiment == "" {
		sentiment = NoSentiment
	}
	c.BySentiment[sentiment]++
	if reach != nil {
		c.TotalReach = AddFigures(c.TotalReach, *reach)
	}
}

// CoverageCounts counts a campaign's active coverage.
type CoverageCounts struct {
	CoverageTally
	Tier1 int `json:"tier1"`
}

// NoSentiment is the by_sentiment bucket of coverage recorded without one.
const NoSentiment = "unspecified"

// CampaignMetrics computes the metrics of campaign id. Joins are done here
// with $in queries: the embedded store has no $lookup and no $group
// accumulators beyond $sum.
func (s *Store) CampaignMetrics(ctx context.Context, id string) (*CampaignMetrics, error) {
	t := repo.Now()
	m := &CampaignMetrics{ComputedAt: t}
	m.Opportunities.ByStage = map[string]int{}
	for _, st := range Stages {
		m.Opportunities.ByStage[st] = 0
	}
	var opps []struct {
		Stage          string     `bson:"stage"`
		NextActionDate *time.Time `bson:"next_action_date"`
	}
	if err := s.FindProjected(ctx, repo.CollOpportunities, bson.M{"campaign_id": id, "archived_at": nil},
		bson.M{"stage": 1, "next_action_date": 1}, &opps); err != nil {
		return nil, err
	}
	for _, o := range opps {
		m.Opportunities.Total++
		m.Opportunities.ByStage[o.Stage]++
		switch o.Stage {
		case StageWon:
			m.Opportunities.Won++
		case StageLost:
			m.Opportunities.Lost++
		default:
			m.Opportunities.Open++
			if o.NextActionDate != nil && o.NextActionDate.Before(t) {
				m.OverdueNextActions++
			}
		}
	}
	if closed := m.Opportunities.Won + m.Opportunities.Lost; closed > 0 {
		r := float64(m.Opportunities.Won) / float64(closed)
		m.WinRate = &r
	}
	c := &m.Coverage
	c.CoverageTally = NewCoverageTally()
	var cov []struct {
		Type      string `bson:"type"`
		Sentiment string `bson:"sentiment"`
		OutletID  string `bson:"outlet_id"`
		Reach     *int64 `bson:"reach"`
	}
	if err := s.FindProjected(ctx, repo.CollCoverage, bson.M{"campaign_id": id, "archived_at": nil},
		bson.M{"type": 1, "sentiment": 1, "outlet_id": 1, "reach": 1}, &cov); err != nil {
		return nil, err
	}
	var outletIDs []string
	for _, x := range cov {
		if x.OutletID != "" && !slices.Contains(outletIDs, x.OutletID) {
			outletIDs = append(outletIDs, x.OutletID)
		}
	}
	tier1 := map[string]bool{}
	if len(outletIDs) > 0 {
		var outlets []struct {
			ID   string `bson:"_id"`
			Tier *int64 `bson:"tier"`
		}
		if err := s.FindProjected(ctx, repo.CollOutlets, bson.M{"_id": bson.M{"$in": outletIDs}}, bson.M{"tier": 1}, &outlets); err != nil {
			return nil, err
		}
		for _, o := range outlets {
			tier1[o.ID] = o.Tier != nil && *o.Tier == 1
		}
	}
	for _, x := range cov {
		c.Add(x.Type, x.Sentiment, x.Reach)
		if tier1[x.OutletID] {
			c.Tier1++
		}
	}
	return m, nil
}

// CampaignHeadline is the short summary list_campaigns shows per campaign.
type CampaignHeadline struct {
	Opportunities int `json:"opportunities"`
	Open          int `json:"open"`
	Won           int `json:"won"`
	Lost          int `json:"lost"`
	Coverage      int `json:"coverage"`
}

// CampaignHeadlines computes the headline counts of the campaigns ids over
// their active opportunities and coverage.
func (s *Store) CampaignHeadlines(ctx context.Context, ids []string) (map[string]*CampaignHeadline, error) {
	out := make(map[string]*CampaignHeadline, len(ids))
	for _, id := range ids {
		out[id] = &CampaignHeadline{}
	}
	if len(ids) == 0 {
		return out, nil
	}
	var opps []struct {
		CampaignID string `bson:"campaign_id"`
		Stage      string `bson:"stage"`
	}
	if err := s.FindProjected(ctx, repo.CollOpportunities, bson.M{"campaign_id": bson.M{"$in": ids}, "archived_at": nil},
		bson.M{"campaign_id": 1, "stage": 1}, &opps); err != nil {
		return nil, err
	}
	for _, o := range opps {
		h := out[o.CampaignID]
		h.Opportunities++
		switch o.Stage {
		case StageWon:
			h.Won++
		case StageLost:
			h.Lost++
		default:
			h.Open++
		}
	}
	var cov []struct {
		CampaignID string `bson:"campaign_id"`
	}
	if err := s.FindProjected(ctx, repo.CollCoverage, bson.M{"campaign_id": bson.M{"$in": ids}, "archived_at": nil},
		bson.M{"campaign_id": 1}, &cov); err != nil {
		return nil, err
	}
	for _, c := range cov {
		out[c.CampaignID].Coverage++
	}
	return out, nil
}

// set applies an optional patch value.
func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// AddFigures adds two figures of 0 or more, held at the largest int64
// rather than wrapping: a figure stored before MaxFigure (or by hand) must
// not turn a total negative.
func AddFigures(a, b int64) int64 {
	if b < 0 {
		b = 0
	}
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// generalArchived is the rule that the General campaign is never archived.
func generalArchived() string {
	return fmt.Sprintf("the %s campaign cannot be archived: opportunities created without a campaign join it", GeneralCampaign)
}

func campaignRule(ctx context.Context, v *repo.RuleView, id string, state bson.M) error {
	c, err := repo.DecodeState[Campaign](id, state)
	if err != nil {
		return err
	}
	if err := checkCampaign(c); err != nil {
		return repo.FieldViolation("campaign_fields", err)
	}
	stored, err := v.Stored(ctx, repo.CollCampaigns, id)
	if err != nil {
		return err
	}
	if repo.Str(stored, "name") == GeneralCampaign || c.General() {
		if c.Archived() {
			return repo.Violated("general_campaign", "%s; leave this change as it is", generalArchived())
		}
		if !c.General() {
			return repo.Violated("general_campaign", "the %s campaign cannot be renamed (to %q): it collects opportunities created without a campaign; leave this change as it is", GeneralCampaign, c.Name)
		}
	}
	if g, err := embargoCoverage(ctx, v, "campaign_id", id, c.EmbargoUntil); err != nil || g != nil {
		if err != nil {
			return err
		}
		return g.AsViolation()
	}
	if strings.EqualFold(c.Name, GeneralCampaign) {
		others, err := v.Matching(ctx, repo.CollCampaigns, bson.M{"name": GeneralCampaign}, func(st bson.M) bool {
			return repo.Str(st, "_id") != id && repo.Str(st, "name") == GeneralCampaign
		})
		if err != nil {
			return err
		}
		if len(others) > 0 {
			return repo.Violated("general_campaign", "campaign %s would be named %q, which is reserved for the %s campaign (%s); rename it with update_campaign first", id, c.Name, GeneralCampaign, repo.Str(others[0], "_id"))
		}
	}
	return nil
}

func init() { repo.RegisterRule(repo.CollCampaigns, campaignRule) }
