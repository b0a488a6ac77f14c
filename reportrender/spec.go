package reportrender

import (
	"bytes"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"outreach/repo"
	"outreach/repo/reports"
)

// Spec is one rendering of a report: the format and its options.
type Spec struct {
	Format string // html, pdf, csv, xlsx, png
	Chart  string // png: which chart (ChartIDs)
	Paper  string // pdf: A4 or Letter
	Table  string // csv: which table (TableNames)
}

// PNG size of a chart.
const (
	PNGWidth  = 900
	PNGHeight = 450
)

// Check fills the defaults of kind and refuses what does not apply,
// naming the field.
func (sp *Spec) Check(kind string) error {
	if !slices.Contains(Formats, sp.Format) {
		return repo.Invalid("format", "%q is not a rendering; use one of: %s", sp.Format, strings.Join(Formats, ", "))
	}
	if sp.Chart != "" && sp.Format != "png" {
		return repo.Invalid("chart", "applies to format png only")
	}
	if sp.Paper != "" && sp.Format != "pdf" {
		return repo.Invalid("paper", "applies to format pdf only")
	}
	if sp.Table != "" && sp.Format != "csv" {
		return repo.Invalid("table", "applies to format csv only (the xlsx has every table, a sheet each)")
	}
	switch sp.Format {
	case "png":
		if sp.Chart == "" {
			sp.Chart = ChartIDs(kind)[0]
		}
		if !slices.Contains(ChartIDs(kind), sp.Chart) {
			return repo.Invalid("chart", "%q is not a chart of the %s report; use one of: %s", sp.Chart, kind, strings.Join(ChartIDs(kind), ", "))
		}
	case "pdf":
		if sp.Paper == "" {
			sp.Paper = "A4"
		}
		if !slices.Contains(Papers, sp.Paper) {
			return repo.Invalid("paper", "%q is not a paper size; use A4 or Letter", sp.Paper)
		}
	case "csv":
		if sp.Table == "" {
			sp.Table = TableNames(kind)[min(1, len(TableNames(kind))-1)]
			if kind == KindPipeline {
				sp.Table = "figures"
			}
		}
		if !slices.Contains(TableNames(kind), sp.Table) {
			return repo.Invalid("table", "%q is not a table of the %s report; use one of: %s", sp.Table, kind, strings.Join(TableNames(kind), ", "))
		}
	}
	return nil
}

// Rendered is a rendering's bytes and how to name them.
type Rendered struct {
	Bytes    []byte
	MimeType string
	Filename string
}

// Render renders d as sp (checked) says.
func Render(d *Document, sp Spec) (*Rendered, error) {
	var b bytes.Buffer
	var err error
	out := &Rendered{}
	name := d.Kind + "-report-" + d.Since().UTC().Format("2006-01-02") + "-to-" + d.Until().UTC().Format("2006-01-02")
	switch sp.Format {
	case "html":
		err = d.HTML(&b)
		out.MimeType, out.Filename = "text/html; charset=utf-8", name+".html"
	case "pdf":
		err = d.PDF(&b, sp.Paper)
		out.MimeType, out.Filename = "application/pdf", name+"-"+strings.ToLower(sp.Paper)+".pdf"
	case "csv":
		err = d.CSV(&b, sp.Table)
		out.MimeType, out.Filename = "text/csv; charset=utf-8", name+"-"+sp.Table+".csv"
	case "xlsx":
		err = d.XLSX(&b)
		out.MimeType, out.Filename = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", name+".xlsx"
	case "png":
		var png []byte
		png, err = d.PNG(sp.Chart, PNGWidth, PNGHeight)
		if err == ErrNoChart {
			return nil, repo.Errorf(repo.CodeFailedPrecondition, "%s: there is nothing to chart; the other formats say so in words", strings.TrimSuffix(d.EmptyText(), "."))
		}
		b.Write(png)
		out.MimeType, out.Filename = "image/png", name+"-"+sp.Chart+".png"
	default:
		return nil, fmt.Errorf("reportrender: format %q", sp.Format)
	}
	if err != nil {
		return nil, err
	}
	out.Bytes = b.Bytes()
	return out, nil
}

// Params writes a report query and a rendering as URL parameters (a
// download URL's), and ParseParams reads them back.
func Params(q reports.ReportQuery, sp Spec) url.Values {
	v := url.Values{"kind": {q.Kind}, "format": {sp.Format}, "since": {q.Since.UTC().Format(time.RFC3339Nano)}, "until": {q.Until.UTC().Format(time.RFC3339Nano)}}
	if q.CampaignID != "" {
		v.Set("campaign_id", q.CampaignID)
	}
	for _, id := range q.OutletIDs {
		v.Add("outlet_id", id)
	}
	for k, x := range map[string]string{"chart": sp.Chart, "paper": sp.Paper, "table": sp.Table} {
		if x != "" {
			v.Set(k, x)
		}
	}
	return v
}

// ParseParams reads what Params wrote.
func ParseParams(v url.Values) (reports.ReportQuery, Spec, error) {
	q := reports.ReportQuery{Kind: v.Get("kind"), CampaignID: v.Get("campaign_id"), OutletIDs: v["outlet_id"]}
	sp := Spec{Format: v.Get("format"), Chart: v.Get("chart"), Paper: v.Get("paper"), Table: v.Get("table")}
	var err error
	if q.Since, err = time.Parse(time.RFC3339Nano, v.Get("since")); err != nil {
		return q, sp, repo.Invalid("since", "not a time")
	}
	if q.Until, err = time.Parse(time.RFC3339Nano, v.Get("until")); err != nil {
		return q, sp, repo.Invalid("until", "not a time")
	}
	if !slices.Contains(Kinds, q.Kind) {
		return q, sp, repo.Invalid("kind", "%q is not a report", q.Kind)
	}
	return q, sp, sp.Check(q.Kind)
}
