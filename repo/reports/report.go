package reports

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/ledger"
	"outreach/repo"
	"outreach/repo/directory"
	"outreach/repo/pipeline"
	"outreach/repo/pitches"
)

// CoverageReportQuery selects the coverage a report counts: active coverage
// published in [Since, Until], of one campaign, of a set of outlets, or of
// the whole team (neither given).
type CoverageReportQuery struct {
	Since, Until time.Time
	CampaignID   string
	OutletIDs    []string
	// Clips asks for the clip list and the top outlets as well (the
	// rendered reports); the figures are the same either way.
	Clips bool
}

// MaxReportItems bounds the coverage one report reads; a larger range is
// refused with a hint to narrow it.
const MaxReportItems = 200_000

// Reach is the reach of the coverage counted two ways, each labelled.
type Reach struct {
	TotalImpressions      int64  `json:"total_impressions"`
	TotalImpressionsLabel string `json:"total_impressions_label"`
	UniqueAudience        int64  `json:"unique_audience"`
	UniqueAudienceLabel   string `json:"unique_audience_label"`
	ItemsWithoutReach     int    `json:"items_without_reach"`
	OutletsWithoutSize    int    `json:"outlets_without_audience_size"`
	// Saturated is true when a sum reached the largest figure it can hold
	// (9223372036854775807) and stopped there instead of wrapping.
	Saturated bool `json:"saturated"`
}

// ShareOfVoice compares the coverage (every item mentions us) with the
// items naming each tracked competitor.
type ShareOfVoice struct {
	Label       string             `json:"label"`
	Competitors []string           `json:"competitors"`
	Ours        int                `json:"ours"`
	Mentions    map[string]int     `json:"competitor_mentions"`
	Share       map[string]float64 `json:"share_percent"`
}

// WeekTrend is one week of the trend: weeks start on Monday, 00:00 UTC.
type WeekTrend struct {
	WeekStart        string `json:"week_start"`
	Items            int    `json:"items"`
	TotalImpressions int64  `json:"total_impressions"`
}

// AVE is the advertising value equivalent, given only when a rate is set.
type AVE struct {
	Value           float64 `json:"value"`
	Currency        string  `json:"currency,omitempty"`
	RatePerThousand float64 `json:"rate_per_thousand"`
	Label           string  `json:"label"`
}

// CoverageReport is the coverage report.
type CoverageReport struct {
	Scope       string         `json:"scope"` // campaign, outlets or team
	CampaignID  string         `json:"campaign_id,omitempty"`
	OutletIDs   []string       `json:"outlet_ids,omitempty"`
	Since       time.Time      `json:"since"`
	Until       time.Time      `json:"until"`
	Items       int            `json:"items"`
	ByType      map[string]int `json:"by_type"`
	BySentiment map[string]int `json:"by_sentiment"`
	ByTier      map[string]int `json:"by_outlet_tier"`
	Reach       Reach          `json:"reach"`
	Share       ShareOfVoice   `json:"share_of_voice"`
	Trend       []WeekTrend    `json:"trend_by_week"`
	// TrendNote says which weeks the trend lists.
	TrendNote string `json:"trend_note"`
	AVE       *AVE   `json:"ave"`
	// Pitches counts the pitches sent in the range, in the same scope.
	Pitches    ReportPitches `json:"pitches"`
	ComputedAt time.Time     `json:"computed_at"`

	// Clips and TopOutlets are read only when the query asks (Clips): the
	// rendered reports show them; get_coverage_report leaves them out.
	Clips      []Clip        `json:"-"`
	TopOutlets []OutletReach `json:"-"`
}

// Clip is one coverage item of a report's clip list.
type Clip struct {
	ID          string    `json:"id"`
	Title       string    `json:"title"`
	URL         string    `json:"url,omitempty"`
	Outlet      string    `json:"outlet,omitempty"`
	PublishedAt time.Time `json:"published_at"`
	Type        string    `json:"type"`
	Sentiment   string    `json:"sentiment,omitempty"`
	Reach       *int64    `json:"reach,omitempty"`
	Journalists []string  `json:"journalists,omitempty"`
}

// OutletReach is one outlet's coverage in a report: items and the sum of
// their reach (total impressions).
type OutletReach struct {
	OutletID    string `json:"outlet_id"`
	Outlet      string `json:"outlet"`
	Items       int    `json:"items"`
	Impressions int64  `json:"total_impressions"`
}

// TopOutletsShown is how many outlets a report's top-outlets chart shows.
const TopOutletsShown = 10

// ReportPitches counts the recipients pitches were sent to in a report's
// range (their sent_at), and what became of them so far.
type ReportPitches struct {
	Label string `json:"label"`
	// Pitches is the pitches with at least one recipient sent in range.
	Pitches        int     `json:"pitches"`
	RecipientsSent int     `json:"recipients_sent"`
	Replied        int     `json:"replied"`
	Bounced        int     `json:"bounced"`
	ReplyRate      float64 `json:"reply_rate_percent"`
}

const (
	labelImpressions = "total impressions: the sum of reach over every coverage item (an outlet counts once per item)"
	labelAudience    = "unique audience: the audience_size of each distinct outlet with coverage, counted once per outlet"
	labelShare       = "share of voice: our coverage items (every item counts for us) against the items whose title or summary names each tracked competitor (literal, any case); share_percent = mentions / (ours + all competitor mentions) × 100"
	labelAVE         = "AVE (advertising value equivalent): total impressions / 1000 × the configured rate; an estimate of what the space would cost as advertising, not a measure of outcome"
	untiered         = "untiered"
	unrated          = "unrated"
	maxTrendWeeks    = 520
	labelPitches     = "pitches: recipients a pitch was sent to in the range (their sent_at), of the scope's opportunities (a campaign's, or the outlets'); replied and bounced as recorded so far; reply_rate_percent = replied / recipients_sent × 100; archived pitches are left out"
)

// weekStart is the Monday 00:00 UTC of t's week.
func weekStart(t time.Time) time.Time {
	t = t.UTC()
	d := (int(t.Weekday()) + 6) % 7
	return time.Date(t.Year(), t.Month(), t.Day()-d, 0, 0, 0, 0, time.UTC)
}

// CoverageReport computes the report: one bounded read of the coverage in
// range (published_at is indexed) and one of its outlets, counted in Go, so
// it gives the same figures on every store.
func (s *Store) CoverageReport(ctx context.Context, q CoverageReportQuery) (*CoverageReport, error) {
	if q.Until.Before(q.Since) {
		return nil, repo.Invalid("until", "%s is before since %s", q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339))
	}
	r := &CoverageReport{Scope: "team", Since: q.Since, Until: q.Until, ComputedAt: repo.Now(),
		ByType: map[string]int{}, BySentiment: map[string]int{unrated: 0}, ByTier: map[string]int{"1": 0, "2": 0, "3": 0, untiered: 0},
		Trend: []WeekTrend{}}
	for _, t := range pipeline.CoverageTypes {
		r.ByType[t] = 0
	}
	for _, t := range pipeline.Sentiments {
		r.BySentiment[t] = 0
	}
	filter := bson.M{"archived_at": nil, "published_at": bson.M{"$gte": q.Since, "$lte": q.Until}}
	var oppFilter bson.M // the scope's opportunities, for the pitches; nil: the team's
	switch {
	case q.CampaignID != "" && len(q.OutletIDs) > 0:
		return nil, repo.Invalid("outlet_ids", "give either campaign_id or outlet_ids (or neither, for the team), not both")
	case q.CampaignID != "":
		if _, err := pipeline.Of(s.Store).Campaign(ctx, q.CampaignID); err != nil {
			return nil, repo.WithField(err, "campaign_id")
		}
		filter["campaign_id"] = q.CampaignID
		oppFilter = bson.M{"campaign_id": q.CampaignID}
		r.Scope, r.CampaignID = "campaign", q.CampaignID
	case len(q.OutletIDs) > 0:
		ids := pipeline.UniqueIDs(q.OutletIDs)
		for _, id := range ids {
			if _, err := repo.Find[*directory.Outlet](ctx, s.Store, repo.CollOutlets, id); err != nil {
				return nil, repo.WithField(err, "outlet_ids")
			}
		}
		filter["outlet_id"] = bson.M{"$in": ids}
		oppFilter = bson.M{"outlet_id": bson.M{"$in": ids}}
		r.Scope, r.OutletIDs = "outlets", ids
	}
	settings, err := s.Settings(ctx)
	if err != nil {
		return nil, err
	}
	// One read, bounded: one item past the limit tells a range too large
	// (a count first would scan the collection twice). The title is read
	// for the clip list and share of voice alone; the summary only when
	// share of voice looks for competitors in it: it is long text the
	// service's index leaves out (repo's mirrorSpecs), so without it the
	// index answers the read.
	var items []pipeline.Coverage
	projection := bson.M{"type": 1, "sentiment": 1, "outlet_id": 1, "reach": 1, "published_at": 1}
	if q.Clips || len(settings.Competitors) > 0 {
		projection["title"] = 1
	}
	if q.Clips {
		projection["url"], projection["contact_ids"] = 1, 1
	}
	if err := s.FindAll(ctx, repo.CollCoverage, filter, options.Find().SetProjection(projection).SetLimit(MaxReportItems+1), &items); err != nil {
		return nil, err
	}
	if len(items) > MaxReportItems {
		return nil, repo.Errorf(repo.CodeFailedPrecondition, "the range holds more than the %d coverage items one report reads; narrow since/until or the scope", MaxReportItems)
	}
	if len(settings.Competitors) > 0 && len(items) > 0 {
		if err := s.summaries(ctx, filter, items); err != nil {
			return nil, err
		}
	}
	outletIDs := []string{}
	seenOutlet := map[string]bool{}
	for _, c := range items {
		if c.OutletID != "" && !seenOutlet[c.OutletID] {
			seenOutlet[c.OutletID] = true
			outletIDs = append(outletIDs, c.OutletID)
		}
	}
	var outlets []directory.Outlet
	if err := s.lookup(ctx, repo.CollOutlets, outletIDs, bson.M{"tier": 1, "audience_size": 1, "name": 1}, &outlets); err != nil {
		return nil, err
	}
	byOutlet := map[string]*directory.Outlet{}
	for i := range outlets {
		byOutlet[outlets[i].ID] = &outlets[i]
	}
	r.Reach.TotalImpressionsLabel, r.Reach.UniqueAudienceLabel = labelImpressions, labelAudience
	r.Share = ShareOfVoice{Label: labelShare, Competitors: settings.Competitors, Mentions: map[string]int{}, Share: map[string]float64{}}
	lowered := make([]string, len(settings.Competitors))
	for i, c := range settings.Competitors {
		lowered[i] = strings.ToLower(c)
		r.Share.Mentions[c] = 0
	}
	weeks := map[string]*WeekTrend{}
	for _, c := range items {
		r.Items++
		r.ByType[c.Type]++
		if c.Sentiment == "" {
			r.BySentiment[unrated]++
		} else {
			r.BySentiment[c.Sentiment]++
		}
		tier := untiered
		if o := byOutlet[c.OutletID]; o != nil && o.Tier != nil {
			tier = strconv.Itoa(*o.Tier)
		}
		r.ByTier[tier]++
		reach := int64(0)
		if c.Reach != nil {
			reach = *c.Reach
		} else {
			r.Reach.ItemsWithoutReach++
		}
		r.Reach.TotalImpressions = pipeline.AddFigures(r.Reach.TotalImpressions, reach)
		text := strings.ToLower(c.Title + "\n" + c.Summary)
		for i, name := range lowered {
			if strings.Contains(text, name) {
				r.Share.Mentions[settings.Competitors[i]]++
			}
		}
		wk := weekStart(c.PublishedAt).Format(time.DateOnly)
		w := weeks[wk]
		if w == nil {
			w = &WeekTrend{WeekStart: wk}
			weeks[wk] = w
		}
		w.Items++
		w.TotalImpressions = pipeline.AddFigures(w.TotalImpressions, reach)
	}
	for _, id := range outletIDs {
		o := byOutlet[id]
		if o == nil || o.AudienceSize == nil {
			r.Reach.OutletsWithoutSize++
			continue
		}
		r.Reach.UniqueAudience = pipeline.AddFigures(r.Reach.UniqueAudience, *o.AudienceSize)
	}
	r.Reach.Saturated = r.Reach.TotalImpressions == math.MaxInt64 || r.Reach.UniqueAudience == math.MaxInt64
	r.Share.Ours = r.Items
	total := r.Items
	for _, m := range r.Share.Mentions {
		total += m
	}
	if total > 0 {
		r.Share.Share["ours"] = percent(r.Items, total)
		for name, m := range r.Share.Mentions {
			r.Share.Share[name] = percent(m, total)
		}
	}
	first, last := weekStart(q.Since), weekStart(q.Until)
	if span := int(last.Sub(first).Hours() / (24 * 7)); span < maxTrendWeeks {
		r.TrendNote = "every week of the range, Monday 00:00 UTC, weeks without coverage at 0"
		for w := first; !w.After(last); w = w.AddDate(0, 0, 7) {
			k := w.Format(time.DateOnly)
			if weeks[k] != nil {
				r.Trend = append(r.Trend, *weeks[k])
			} else {
				r.Trend = append(r.Trend, WeekTrend{WeekStart: k})
			}
		}
	} else {
		r.TrendNote = fmt.Sprintf("the range spans more than %d weeks: only weeks with coverage are listed (Monday 00:00 UTC)", maxTrendWeeks)
		for _, w := range weeks {
			r.Trend = append(r.Trend, *w)
		}
		slices.SortFunc(r.Trend, func(a, b WeekTrend) int { return strings.Compare(a.WeekStart, b.WeekStart) })
	}
	if rate := settings.AVERatePerThousand; rate != nil {
		v := float64(r.Reach.TotalImpressions) / 1000 * *rate
		r.AVE = &AVE{Value: math.Round(v*100) / 100, Currency: settings.AVECurrency, RatePerThousand: *rate, Label: labelAVE}
	}
	if r.Pitches, err = s.pitchCounts(ctx, oppFilter, q.Since, q.Until); err != nil {
		return nil, err
	}
	if q.Clips {
		if err := s.clips(ctx, r, items, byOutlet); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// clips fills the clip list (newest first) and the top outlets by total
// impressions from the items the figures were counted from.
func (s *Store) clips(ctx context.Context, r *CoverageReport, items []pipeline.Coverage, byOutlet map[string]*directory.Outlet) error {
	contactIDs := []string{}
	seen := map[string]bool{}
	for _, c := range items {
		for _, id := range c.ContactIDs {
			if !seen[id] {
				seen[id] = true
				contactIDs = append(contactIDs, id)
			}
		}
	}
	names := map[string]string{}
	if len(contactIDs) > 0 {
		var contacts []directory.Contact
		if err := s.lookup(ctx, repo.CollContacts, contactIDs, bson.M{"name": 1}, &contacts); err != nil {
			return err
		}
		for _, c := range contacts {
			names[c.ID] = c.Name
		}
	}
	per := map[string]*OutletReach{}
	r.Clips = make([]Clip, 0, len(items))
	for _, c := range items {
		clip := Clip{ID: c.ID, Title: c.Title, URL: c.URL, PublishedAt: c.PublishedAt, Type: c.Type, Sentiment: c.Sentiment, Reach: c.Reach}
		if o := byOutlet[c.OutletID]; o != nil {
			clip.Outlet = o.Name
			or := per[o.ID]
			if or == nil {
				or = &OutletReach{OutletID: o.ID, Outlet: o.Name}
				per[o.ID] = or
			}
			or.Items++
			if c.Reach != nil {
				or.Impressions = pipeline.AddFigures(or.Impressions, *c.Reach)
			}
		}
		for _, id := range c.ContactIDs {
			if n := names[id]; n != "" {
				clip.Journalists = append(clip.Journalists, n)
			}
		}
		r.Clips = append(r.Clips, clip)
	}
	slices.SortStableFunc(r.Clips, func(a, b Clip) int {
		if c := b.PublishedAt.Compare(a.PublishedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	r.TopOutlets = make([]OutletReach, 0, len(per))
	for _, o := range per {
		r.TopOutlets = append(r.TopOutlets, *o)
	}
	slices.SortFunc(r.TopOutlets, func(a, b OutletReach) int {
		switch {
		case a.Impressions != b.Impressions:
			if a.Impressions > b.Impressions {
				return -1
			}
			return 1
		case a.Items != b.Items:
			return b.Items - a.Items
		}
		return strings.Compare(a.Outlet+a.OutletID, b.Outlet+b.OutletID)
	})
	if len(r.TopOutlets) > TopOutletsShown {
		r.TopOutlets = r.TopOutlets[:TopOutletsShown]
	}
	return nil
}

// lookupAll is how many ids a look-up reads the records of one by one
// (`_id` $in); past it, lookup reads the collection's projected fields
// whole, once: an $in of thousands of ids costs the store (and the index)
// ids × records (2,000 contacts: 4.6 s), the whole read records (20 ms).
const lookupAll = 64

// lookup reads the records of coll with ids, projected, into out (a
// pointer to a slice); past lookupAll ids it may return others too, which
// callers index by id.
func (s *Store) lookup(ctx context.Context, coll string, ids []string, projection bson.M, out any) error {
	if len(ids) > lookupAll {
		return s.FindProjected(ctx, coll, bson.M{}, projection, out)
	}
	return s.FindProjected(ctx, coll, pipeline.ByIDs(ids), projection, out)
}

// summaries fills the summaries of items (the coverage filter matched),
// which share of voice searches: in one read of the store, with the same
// filter, since the service's index leaves this long text out and would
// fetch it record by record.
func (s *Store) summaries(ctx context.Context, filter bson.M, items []pipeline.Coverage) error {
	cur, err := s.Collection(repo.CollCoverage).Find(ctx, filter, options.Find().SetProjection(bson.M{"summary": 1}))
	if err != nil {
		return ledger.DriverErr(err, "coverage", "report")
	}
	var docs []struct {
		ID      string `bson:"_id"`
		Summary string `bson:"summary"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return ledger.DriverErr(err, "coverage", "report")
	}
	by := make(map[string]string, len(docs))
	for _, d := range docs {
		by[d.ID] = d.Summary
	}
	for i := range items {
		items[i].Summary = by[items[i].ID]
	}
	return nil
}

// pitchCounts counts the recipients sent in [since, until] of the pitches
// of the opportunities oppFilter selects (every opportunity when nil).
func (s *Store) pitchCounts(ctx context.Context, oppFilter bson.M, since, until time.Time) (ReportPitches, error) {
	pc := ReportPitches{Label: labelPitches}
	filter := bson.M{"archived_at": nil, "recipients.sent_at": bson.M{"$gte": since, "$lte": until}}
	if oppFilter != nil {
		opps, err := s.DistinctIDs(ctx, repo.CollOpportunities, oppFilter)
		if err != nil {
			return pc, err
		}
		filter["opportunity_id"] = bson.M{"$in": opps}
	}
	var sent []pitches.Pitch
	if err := s.FindProjected(ctx, repo.CollPitches, filter, bson.M{"recipients": 1}, &sent); err != nil {
		return pc, err
	}
	for _, p := range sent {
		counted := false
		for _, rc := range p.Recipients {
			if rc.SentAt == nil || rc.SentAt.Before(since) || rc.SentAt.After(until) {
				continue
			}
			counted = true
			pc.RecipientsSent++
			switch rc.State {
			case pitches.RecipientReplied:
				pc.Replied++
			case pitches.RecipientBounced:
				pc.Bounced++
			}
		}
		if counted {
			pc.Pitches++
		}
	}
	if pc.RecipientsSent > 0 {
		pc.ReplyRate = percent(pc.Replied, pc.RecipientsSent)
	}
	return pc, nil
}

func percent(n, total int) float64 {
	return math.Round(float64(n)*1000/float64(total)) / 10
}
