package reportrender

import (
	"strings"
	"time"
)

// Column kinds: how a spreadsheet types a cell.
const (
	ColText   = "text"
	ColNumber = "number"
	ColDate   = "date"
	ColURL    = "url"
)

// Column is one column of a table.
type Column struct{ Name, Kind string }

// Table is one list of the report: the figures, the clips, the stale and
// upcoming opportunities. CSV gives one, XLSX each on a sheet of its own.
// A cell is a string, an int, an int64, a float64, a time.Time, or nil
// (no value).
type Table struct {
	Name    string
	Columns []Column
	Rows    [][]any
}

// TableNames lists the tables of a kind, the first being the figures.
func TableNames(kind string) []string {
	if kind == KindPipeline {
		return []string{"figures", "stale", "upcoming"}
	}
	return []string{"figures", "clips"}
}

// Tables lists the document's tables.
func (d *Document) Tables() []Table {
	figs := Table{Name: "figures", Columns: []Column{{"section", ColText}, {"figure", ColText}, {"key", ColText}, {"value", ColNumber}}}
	for _, f := range d.Figures() {
		figs.Rows = append(figs.Rows, []any{f.Section, f.Name, f.Key, f.Value})
	}
	if d.Kind == KindPipeline {
		p := d.Pipeline
		stale := Table{Name: "stale", Columns: []Column{{"opportunity", ColText}, {"stage", ColText}, {"owner", ColText}, {"stage_since", ColDate}, {"days_in_stage", ColNumber}, {"id", ColText}}}
		for _, s := range p.Stale {
			stale.Rows = append(stale.Rows, []any{s.Title, s.Stage, s.Owner, s.StageSince, s.DaysInStage, s.ID})
		}
		up := Table{Name: "upcoming", Columns: []Column{{"opportunity", ColText}, {"what", ColText}, {"at", ColDate}, {"owner", ColText}, {"id", ColText}}}
		for _, u := range p.Upcoming {
			up.Rows = append(up.Rows, []any{u.Title, u.What, u.At, u.Owner, u.OpportunityID})
		}
		return []Table{figs, stale, up}
	}
	clips := Table{Name: "clips", Columns: []Column{{"headline", ColText}, {"url", ColURL}, {"outlet", ColText}, {"published_at", ColDate},
		{"type", ColText}, {"sentiment", ColText}, {"reach", ColNumber}, {"journalists", ColText}, {"id", ColText}}}
	for _, c := range d.Coverage.Clips {
		var reach any
		if c.Reach != nil {
			reach = *c.Reach
		}
		clips.Rows = append(clips.Rows, []any{c.Title, c.URL, c.Outlet, c.PublishedAt, c.Type, c.Sentiment, reach, strings.Join(c.Journalists, "; "), c.ID})
	}
	return []Table{figs, clips}
}

// Table returns the named table, or false.
func (d *Document) Table(name string) (Table, bool) {
	for _, t := range d.Tables() {
		if t.Name == name {
			return t, true
		}
	}
	return Table{}, false
}

// cellText is a cell as text (CSV, PDF, HTML).
func cellText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case int, int64, float64:
		return rawNumber(x)
	}
	return ""
}
