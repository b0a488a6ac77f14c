// Package reportrender renders the reports of repo/reports for people: an
// HTML page with server-side SVG charts, a PDF (A4 or Letter), CSV, XLSX,
// and a PNG of one chart. Every rendering is made from one Document, which
// holds the report exactly as computed (the figures get_coverage_report
// answers), so the formats cannot disagree: the figures table, the charts'
// data points and the lists are derived here once and each format only lays
// them out. It reads nothing and writes nothing; callers hand it a report.
package reportrender

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"outreach/repo/reports"
)

// Kinds of report.
const (
	KindCoverage = "coverage"
	KindPipeline = "pipeline"
)

// Kinds lists the kinds of report, and Formats the renderings.
var (
	Kinds   = []string{KindCoverage, KindPipeline}
	Formats = []string{"html", "pdf", "csv", "xlsx", "png"}
)

// Document is one report to render, with what its page prints around the
// figures.
type Document struct {
	Kind     string
	Coverage *reports.CoverageReport // Kind coverage
	Pipeline *reports.PipelineReport // Kind pipeline
	// Team is the team's name (settings' team_name), printed on every page.
	Team string
	// ScopeName names the scope in words: a campaign's name, the outlets'
	// names, or "the whole team".
	ScopeName string
	// SharedAt, when set, is the moment the shared snapshot was taken; the
	// rendering says the figures are as of then.
	SharedAt *time.Time
}

// FromSnapshot is the document of a computed report; sharedAt, when set,
// is the moment of a shared snapshot.
func FromSnapshot(snap *reports.Snapshot, sharedAt *time.Time) *Document {
	return &Document{Kind: snap.Kind, Coverage: snap.Coverage, Pipeline: snap.Pipeline, Team: snap.Team, ScopeName: snap.ScopeName, SharedAt: sharedAt}
}

// Title is the document's title.
func (d *Document) Title() string {
	if d.Kind == KindPipeline {
		return "Pipeline report"
	}
	return "Coverage report"
}

// Since and Until are the report's range, and ComputedAt when its figures
// were computed.
func (d *Document) Since() time.Time {
	return pick(d, func(c *reports.CoverageReport) time.Time { return c.Since }, func(p *reports.PipelineReport) time.Time { return p.Since })
}
func (d *Document) Until() time.Time {
	return pick(d, func(c *reports.CoverageReport) time.Time { return c.Until }, func(p *reports.PipelineReport) time.Time { return p.Until })
}
func (d *Document) ComputedAt() time.Time {
	return pick(d, func(c *reports.CoverageReport) time.Time { return c.ComputedAt }, func(p *reports.PipelineReport) time.Time { return p.ComputedAt })
}

func pick[T any](d *Document, c func(*reports.CoverageReport) T, p func(*reports.PipelineReport) T) T {
	if d.Kind == KindPipeline {
		return p(d.Pipeline)
	}
	return c(d.Coverage)
}

// Subtitle says what the document covers and as of when.
func (d *Document) Subtitle() string {
	rng := d.Since().UTC().Format("2 Jan 2006") + " – " + d.Until().UTC().Format("2 Jan 2006")
	return d.ScopeName + " · " + rng
}

// Moment says when the figures were taken.
func (d *Document) Moment() string {
	if d.SharedAt != nil {
		return "Shared snapshot: the figures as of " + d.SharedAt.UTC().Format("2 Jan 2006 15:04 UTC")
	}
	return "Computed " + d.ComputedAt().UTC().Format("2 Jan 2006 15:04 UTC")
}

// Empty reports a report with nothing in its scope and range, which the
// renderings say in words instead of drawing empty charts.
func (d *Document) Empty() bool {
	if d.Kind == KindPipeline {
		return d.Pipeline.Opportunities == 0
	}
	return d.Coverage.Items == 0
}

// EmptyText is what an empty report says.
func (d *Document) EmptyText() string {
	if d.Kind == KindPipeline {
		return "No opportunities in this scope."
	}
	return "No coverage in this range."
}

// Figure is one figure of the report: its key is the field's path in the
// tool's JSON answer (get_coverage_report, or the pipeline report), so a
// reader can check a rendering against the tool.
type Figure struct {
	Section string
	Key     string
	Name    string
	Value   any // int, int64 or float64
}

// Text is the figure's value as the pages print it.
func (f Figure) Text() string { return FormatValue(f.Value) }

// FormatValue prints a figure with thousands separators (one decimal for
// a fraction).
func FormatValue(v any) string {
	switch x := v.(type) {
	case int:
		return group(strconv.FormatInt(int64(x), 10))
	case int64:
		return group(strconv.FormatInt(x, 10))
	case float64:
		s := strconv.FormatFloat(x, 'f', 2, 64)
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
		whole, frac, _ := strings.Cut(s, ".")
		if frac != "" {
			return group(whole) + "." + frac
		}
		return group(whole)
	}
	return fmt.Sprint(v)
}

func group(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Figures lists the report's figures in the order the pages show them.
func (d *Document) Figures() []Figure {
	var out []Figure
	add := func(section, key, name string, v any) { out = append(out, Figure{section, key, name, v}) }
	if d.Kind == KindPipeline {
		p := d.Pipeline
		add("Pipeline", "opportunities", "Opportunities (active)", p.Opportunities)
		for _, st := range stageOrder(p.ByStage) {
			add("By stage", "by_stage."+st, st, p.ByStage[st])
		}
		for _, o := range p.ByOwner {
			add("Open by owner", "open_by_owner."+o.Owner, o.Owner, o.Open)
		}
		c := p.Conversion
		add("Conversion", "conversion.pitched", "Pitched in range", c.Pitched)
		add("Conversion", "conversion.responded", "Responded or later", c.Responded)
		add("Conversion", "conversion.placed", "Placed or later", c.Placed)
		add("Conversion", "conversion.responded_percent", "Responded %", c.RespondedRate)
		add("Conversion", "conversion.placed_percent", "Placed %", c.PlacedRate)
		add("Attention", "stale_count", "Stale opportunities", p.StaleCount)
		add("Attention", "upcoming_count", "Upcoming embargoes and deadlines", p.UpcomingCount)
		return out
	}
	c := d.Coverage
	add("Coverage", "items", "Coverage items", c.Items)
	add("Reach", "reach.total_impressions", "Total impressions", c.Reach.TotalImpressions)
	add("Reach", "reach.unique_audience", "Unique audience", c.Reach.UniqueAudience)
	add("Reach", "reach.items_without_reach", "Items without reach", c.Reach.ItemsWithoutReach)
	add("Reach", "reach.outlets_without_audience_size", "Outlets without audience size", c.Reach.OutletsWithoutSize)
	if c.AVE != nil {
		add("AVE", "ave.value", "AVE "+c.AVE.Currency, c.AVE.Value)
	}
	for _, k := range sortedKeys(c.ByType) {
		add("By type", "by_type."+k, k, c.ByType[k])
	}
	for _, k := range sortedKeys(c.BySentiment) {
		add("By sentiment", "by_sentiment."+k, k, c.BySentiment[k])
	}
	for _, k := range sortedKeys(c.ByTier) {
		add("By outlet tier", "by_outlet_tier."+k, tierName(k), c.ByTier[k])
	}
	add("Share of voice", "share_of_voice.ours", "Ours (items)", c.Share.Ours)
	for _, k := range c.Share.Competitors {
		add("Share of voice", "share_of_voice.competitor_mentions."+k, k+" (mentions)", c.Share.Mentions[k])
	}
	for _, k := range sortedKeys(c.Share.Share) {
		add("Share of voice", "share_of_voice.share_percent."+k, k+" %", c.Share.Share[k])
	}
	add("Pitches", "pitches.pitches", "Pitches sent", c.Pitches.Pitches)
	add("Pitches", "pitches.recipients_sent", "Recipients sent", c.Pitches.RecipientsSent)
	add("Pitches", "pitches.replied", "Replied", c.Pitches.Replied)
	add("Pitches", "pitches.bounced", "Bounced", c.Pitches.Bounced)
	add("Pitches", "pitches.reply_rate_percent", "Reply rate %", c.Pitches.ReplyRate)
	return out
}

func tierName(k string) string {
	if _, err := strconv.Atoi(k); err == nil {
		return "tier " + k
	}
	return k
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// stageOrder lists a pipeline's stages in pipeline order, unknown ones last.
func stageOrder(m map[string]int) []string {
	order := []string{"researching", "drafting", "pitched", "responded", "in_progress", "placed", "published", "won", "lost"}
	out := []string{}
	for _, st := range order {
		if _, ok := m[st]; ok {
			out = append(out, st)
		}
	}
	for _, k := range sortedKeys(m) {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// Chart is one chart's data: the SVG, the PDF and the PNG draw the same
// points.
type Chart struct {
	ID    string
	Title string
	// Line draws a line over time; otherwise bars. Horizontal bars suit
	// long labels (outlets).
	Line, Horizontal bool
	Unit             string
	Points           []Point
}

// Point is one data point.
type Point struct {
	Label string
	Value float64
}

// Charts lists the document's charts; an empty report has none.
func (d *Document) Charts() []Chart {
	if d.Empty() {
		return nil
	}
	if d.Kind == KindPipeline {
		p := d.Pipeline
		stages := Chart{ID: "stages", Title: "Opportunities by stage", Unit: "opportunities"}
		for _, st := range stageOrder(p.ByStage) {
			stages.Points = append(stages.Points, Point{st, float64(p.ByStage[st])})
		}
		owners := Chart{ID: "owners", Title: "Open opportunities by owner", Unit: "opportunities", Horizontal: true}
		for _, o := range p.ByOwner {
			owners.Points = append(owners.Points, Point{o.Owner, float64(o.Open)})
		}
		conv := Chart{ID: "conversion", Title: "Conversion of the opportunities pitched in the range", Unit: "opportunities"}
		conv.Points = []Point{{"pitched", float64(p.Conversion.Pitched)}, {"responded or later", float64(p.Conversion.Responded)}, {"placed or later", float64(p.Conversion.Placed)}}
		return []Chart{stages, owners, conv}
	}
	c := d.Coverage
	trend := Chart{ID: "trend", Title: "Coverage over time (items per week)", Unit: "items", Line: true}
	for _, w := range c.Trend {
		trend.Points = append(trend.Points, Point{w.WeekStart, float64(w.Items)})
	}
	sent := Chart{ID: "sentiment", Title: "Sentiment", Unit: "items"}
	for _, k := range []string{"positive", "neutral", "negative", "mixed", "unrated"} {
		if v, ok := c.BySentiment[k]; ok {
			sent.Points = append(sent.Points, Point{k, float64(v)})
		}
	}
	for _, k := range sortedKeys(c.BySentiment) {
		if !slices.ContainsFunc(sent.Points, func(p Point) bool { return p.Label == k }) {
			sent.Points = append(sent.Points, Point{k, float64(c.BySentiment[k])})
		}
	}
	share := Chart{ID: "share", Title: "Share of voice against competitors (items mentioning)", Unit: "items", Horizontal: true}
	share.Points = append(share.Points, Point{"ours", float64(c.Share.Ours)})
	for _, k := range c.Share.Competitors {
		share.Points = append(share.Points, Point{k, float64(c.Share.Mentions[k])})
	}
	tier := Chart{ID: "tiers", Title: "Tier mix", Unit: "items"}
	for _, k := range sortedKeys(c.ByTier) {
		tier.Points = append(tier.Points, Point{tierName(k), float64(c.ByTier[k])})
	}
	top := Chart{ID: "outlets", Title: "Top outlets by reach (total impressions)", Unit: "impressions", Horizontal: true}
	for _, o := range c.TopOutlets {
		top.Points = append(top.Points, Point{o.Outlet, float64(o.Impressions)})
	}
	return []Chart{trend, sent, share, tier, top}
}

// ChartIDs lists the chart ids of a kind, for the PNG's choice.
func ChartIDs(kind string) []string {
	if kind == KindPipeline {
		return []string{"stages", "owners", "conversion"}
	}
	return []string{"trend", "sentiment", "share", "tiers", "outlets"}
}
