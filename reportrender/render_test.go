package reportrender_test

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ledongthuc/pdf"
	"github.com/xuri/excelize/v2"
	"golang.org/x/text/unicode/norm"

	"outreach/repo/reports"
	"outreach/reportrender"
	"outreach/reportrender/readback"
)

// hostile is text that must come out escaped and wrapped: markup, right
// to left, emoji, and a 2,000-character headline.
var (
	markup   = `<script>alert(1)</script> & "quotes" <img src=x onerror=alert(2)>`
	rtl      = "تغطية صحفية ممتازة עיתונות"
	emoji    = "Launch 🚀 day 🎉"
	longHead = strings.Repeat("Averyveryverylongword ", 90) + "END"
	formula  = "=HYPERLINK(\"http://evil\")"
)

func i64(v int64) *int64 { return &v }

// sample is a coverage report as the area computes it, with hostile text.
func sample(clips int) *reportrender.Document {
	since := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	r := &reports.CoverageReport{Scope: "campaign", CampaignID: "c1", Since: since, Until: since.AddDate(0, 1, 0).Add(-time.Millisecond),
		ByType: map[string]int{"article": 0, "interview": 0}, BySentiment: map[string]int{"positive": 0, "neutral": 0, "negative": 0, "unrated": 0},
		ByTier: map[string]int{"1": 0, "2": 0, "3": 0, "untiered": 0}, ComputedAt: since.AddDate(0, 1, 2),
		Share:     reports.ShareOfVoice{Competitors: []string{"Globex", markup}, Mentions: map[string]int{"Globex": 3, markup: 1}, Share: map[string]float64{}},
		TrendNote: "every week", Pitches: reports.ReportPitches{Pitches: 4, RecipientsSent: 9, Replied: 3, Bounced: 1, ReplyRate: 33.3}}
	r.AVE = &reports.AVE{Value: 1234.56, Currency: "EUR", RatePerThousand: 5}
	titles := []string{markup, rtl, emoji, longHead, formula}
	outlets := map[string]*reports.OutletReach{}
	weeks := map[string]int{}
	for i := 0; i < clips; i++ {
		reach := int64(1000 * (i%7 + 1))
		c := reports.Clip{ID: fmt.Sprintf("id-%05d", i), Title: titles[i%len(titles)] + fmt.Sprintf(" #%d", i), URL: fmt.Sprintf("https://news.example/a/%d?x=1&y=<2>", i),
			Outlet: []string{"The Daily " + markup, rtl, "Plain Times"}[i%3], PublishedAt: since.Add(time.Duration(i%30) * 24 * time.Hour), Type: []string{"article", "interview"}[i%2],
			Sentiment: []string{"positive", "neutral", "negative", ""}[i%4], Journalists: []string{"Ann " + emoji}}
		if i%5 != 0 {
			c.Reach = i64(reach)
			r.Reach.TotalImpressions += reach
		} else {
			r.Reach.ItemsWithoutReach++
		}
		r.Items++
		r.ByType[c.Type]++
		s := c.Sentiment
		if s == "" {
			s = "unrated"
		}
		r.BySentiment[s]++
		r.ByTier[[]string{"1", "2", "untiered"}[i%3]]++
		o := outlets[c.Outlet]
		if o == nil {
			o = &reports.OutletReach{OutletID: c.Outlet, Outlet: c.Outlet}
			outlets[c.Outlet] = o
		}
		o.Items++
		if c.Reach != nil {
			o.Impressions += *c.Reach
		}
		wk := c.PublishedAt.AddDate(0, 0, -((int(c.PublishedAt.Weekday()) + 6) % 7)).Format(time.DateOnly)
		weeks[wk]++
		r.Clips = append(r.Clips, c)
	}
	for w := since.AddDate(0, 0, -2); w.Before(r.Until); w = w.AddDate(0, 0, 7) {
		r.Trend = append(r.Trend, reports.WeekTrend{WeekStart: w.Format(time.DateOnly), Items: weeks[w.Format(time.DateOnly)]})
	}
	r.Reach.UniqueAudience = 5_000_000
	r.Share.Ours = r.Items
	for _, o := range outlets {
		r.TopOutlets = append(r.TopOutlets, *o)
	}
	return &reportrender.Document{Kind: reportrender.KindCoverage, Coverage: r, Team: "Acme PR " + emoji, ScopeName: "Acme launch " + markup}
}

func render(t *testing.T, d *reportrender.Document, format string) []byte {
	t.Helper()
	var b bytes.Buffer
	var err error
	switch format {
	case "html":
		err = d.HTML(&b)
	case "xlsx":
		err = d.XLSX(&b)
	case "pdf-a4":
		err = d.PDF(&b, "A4")
	case "pdf-letter":
		err = d.PDF(&b, "Letter")
	default:
		err = d.CSV(&b, format)
	}
	if err != nil {
		t.Fatalf("%s: %v", format, err)
	}
	return b.Bytes()
}

// TestCSVReadsBack parses both tables with encoding/csv and compares each
// cell with the report.
func TestCSVReadsBack(t *testing.T) {
	d := sample(40)
	b := render(t, d, "figures")
	figs := d.Figures()
	if header, _, _ := strings.Cut(string(b), "\n"); strings.TrimSpace(header) != "section,figure,key,value" {
		t.Fatalf("figures CSV header %q", header)
	}
	byKey, err := readback.CSVFigures(b)
	if err != nil || len(byKey) != len(figs) {
		t.Fatalf("figures CSV: %d figures (want %d), %v", len(byKey), len(figs), err)
	}
	c := d.Coverage
	for key, want := range map[string]string{"items": "40", "reach.total_impressions": strconv.FormatInt(c.Reach.TotalImpressions, 10),
		"reach.unique_audience": "5000000", "ave.value": "1234.56", "pitches.reply_rate_percent": "33.3", "share_of_voice.competitor_mentions.Globex": "3",
		"by_sentiment.unrated": strconv.Itoa(c.BySentiment["unrated"])} {
		if byKey[key] != want {
			t.Errorf("figure %s: CSV has %q, the report %q", key, byKey[key], want)
		}
	}
	clips, err := csv.NewReader(bytes.NewReader(render(t, d, "clips"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(clips) != 41 {
		t.Fatalf("clips CSV has %d rows, want 41", len(clips))
	}
	for i, r := range clips[1:] {
		want := c.Clips[i]
		title := want.Title
		if strings.HasPrefix(title, "=") {
			title = "'" + title
		}
		reach := ""
		if want.Reach != nil {
			reach = strconv.FormatInt(*want.Reach, 10)
		}
		if r[0] != title || r[1] != want.URL || r[2] != want.Outlet || r[3] != want.PublishedAt.Format(time.RFC3339) || r[6] != reach || r[8] != want.ID {
			t.Fatalf("clip %d: CSV row %q does not match %+v", i, r, want)
		}
	}
}

// TestXLSXReadsBack opens the workbook with excelize: a sheet per table,
// numbers typed as numbers, dates as dates, hostile text as plain text.
func TestXLSXReadsBack(t *testing.T) {
	d := sample(30)
	f, err := excelize.OpenReader(bytes.NewReader(render(t, d, "xlsx")))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := strings.Join(f.GetSheetList(), ","); got != "Figures,Clips" {
		t.Fatalf("sheets %s, want Figures,Clips", got)
	}
	rows, err := f.GetRows("Figures")
	if err != nil {
		t.Fatal(err)
	}
	for i, fig := range d.Figures() {
		r := rows[i+1]
		if r[2] != fig.Key {
			t.Fatalf("row %d: key %q, want %q", i+2, r[2], fig.Key)
		}
		cell, _ := excelize.CoordinatesToCellName(4, i+2)
		typ, err := f.GetCellType("Figures", cell)
		if err != nil {
			t.Fatal(err)
		}
		if typ != excelize.CellTypeNumber && typ != excelize.CellTypeUnset {
			t.Errorf("%s (%s): cell type %v, want a number", fig.Key, cell, typ)
		}
		v, _ := f.GetCellValue("Figures", cell, excelize.Options{RawCellValue: true})
		got, err := strconv.ParseFloat(v, 64)
		want, _ := strconv.ParseFloat(reportrenderRaw(fig.Value), 64)
		if err != nil || got != want {
			t.Errorf("%s: workbook has %q, the report %v", fig.Key, v, fig.Value)
		}
	}
	clips, _ := f.GetRows("Clips")
	if len(clips) != 31 {
		t.Fatalf("Clips sheet has %d rows, want 31", len(clips))
	}
	for i, c := range d.Coverage.Clips {
		if clips[i+1][0] != c.Title || clips[i+1][8] != c.ID {
			t.Fatalf("clip %d: %q, want %q", i, clips[i+1][0], c.Title)
		}
		if f, _ := f.GetCellFormula("Clips", fmt.Sprintf("A%d", i+2)); f != "" {
			t.Fatalf("clip %d became a formula: %q", i, f)
		}
	}
	// The date column holds a date serial with a date format, not text.
	raw, _ := f.GetCellValue("Clips", "D2", excelize.Options{RawCellValue: true})
	if _, err := strconv.ParseFloat(raw, 64); err != nil {
		t.Fatalf("published_at is stored as %q, not a date serial", raw)
	}
}

func reportrenderRaw(v any) string {
	switch x := v.(type) {
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}

// svgDoc is what the test reads of an SVG chart.
type svgDoc struct {
	XMLName xml.Name `xml:"svg"`
	Role    string   `xml:"role,attr"`
	Title   string   `xml:"title"`
	Desc    string   `xml:"desc"`
	Rects   []svgPt  `xml:"rect"`
	Circles []svgPt  `xml:"circle"`
}

type svgPt struct {
	Label string `xml:"data-label,attr"`
	Value string `xml:"data-value,attr"`
	Title string `xml:"title"`
}

// TestSVGChartsReadBack parses every chart as XML: an accessible title and
// every data point with its value, equal to the report's.
func TestSVGChartsReadBack(t *testing.T) {
	d := sample(25)
	charts := d.Charts()
	if len(charts) != 5 {
		t.Fatalf("%d charts, want 5", len(charts))
	}
	for _, c := range charts {
		var s svgDoc
		if err := xml.Unmarshal([]byte(c.SVG()), &s); err != nil {
			t.Fatalf("chart %s is not XML: %v", c.ID, err)
		}
		if s.Role != "img" || s.Title != c.Title || s.Desc == "" {
			t.Errorf("chart %s: role %q title %q desc %q", c.ID, s.Role, s.Title, s.Desc)
		}
		pts := append(s.Rects, s.Circles...)
		if len(pts) != len(c.Points) {
			t.Fatalf("chart %s: %d data points, want %d", c.ID, len(pts), len(c.Points))
		}
		for i, p := range pts {
			if p.Label != c.Points[i].Label || p.Value != reportrenderRaw(c.Points[i].Value) || !strings.HasPrefix(p.Title, p.Label+": ") {
				t.Errorf("chart %s point %d: %+v, want %+v", c.ID, i, p, c.Points[i])
			}
		}
	}
	sentiment := charts[1]
	for _, p := range sentiment.Points {
		if int(p.Value) != d.Coverage.BySentiment[p.Label] {
			t.Errorf("sentiment %s: chart %v, report %d", p.Label, p.Value, d.Coverage.BySentiment[p.Label])
		}
	}
}

// TestHTMLEscapesAndIsSelfContained: no script, no outside resource, the
// hostile text escaped, right-to-left text marked, the figures in the
// figures table.
func TestHTMLEscapesAndIsSelfContained(t *testing.T) {
	d := sample(12)
	page := string(render(t, d, "html"))
	for _, bad := range []string{"<script", "<img", "<iframe", "<link", "@import", "url("} {
		if strings.Contains(strings.ToLower(page), bad) {
			t.Errorf("the page contains %q", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", rtl, "🚀", "END", `dir="auto"`, "Acme PR", "Computed 3 Nov 2026"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	shown := readback.HTMLFigures(page)
	for _, f := range d.Figures() {
		if shown[f.Key] != reportrenderRaw(f.Value) {
			t.Errorf("figure %s: the page has %q, the report %v", f.Key, shown[f.Key], f.Value)
		}
	}
	for _, f := range d.Figures() {
		re := regexp.MustCompile(`<tr data-key="` + regexp.QuoteMeta(xmlEsc(f.Key)) + `">.*?data-value="([^"]*)"`)
		m := re.FindStringSubmatch(page)
		if m == nil || m[1] != reportrenderRaw(f.Value) {
			t.Errorf("figure %s: page has %v, want %s", f.Key, m, reportrenderRaw(f.Value))
		}
	}
	if !strings.Contains(reportrender.CSP, "default-src 'none'") || strings.Contains(reportrender.CSP, "unsafe-inline") {
		t.Errorf("CSP %q is not strict", reportrender.CSP)
	}
}

func xmlEsc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return strings.ReplaceAll(b.String(), "&#34;", "&#34;")
}

// TestEmptyReportIsHonest: no chart, the sentence said in every format.
func TestEmptyReportIsHonest(t *testing.T) {
	d := sample(0)
	if len(d.Charts()) != 0 {
		t.Fatal("an empty report has charts")
	}
	if !strings.Contains(string(render(t, d, "html")), "No coverage in this range.") {
		t.Error("the empty page does not say so")
	}
	if _, err := d.PNG("trend", 600, 300); err != reportrender.ErrNoChart {
		t.Errorf("PNG of an empty report: %v", err)
	}
	if !strings.Contains(pdfText(t, render(t, d, "pdf-a4")), "No coverage in this range.") {
		t.Error("the empty PDF does not say so")
	}
}

func pdfText(t *testing.T, b []byte) string {
	t.Helper()
	text, _, err := readback.PDFText(b)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// TestPDFReadsBack extracts the PDF's text: the team's name, page numbers,
// every figure, the long headline whole (wrapped), on A4 and Letter.
func TestPDFReadsBack(t *testing.T) {
	d := sample(60)
	for _, paper := range []string{"pdf-a4", "pdf-letter"} {
		b := render(t, d, paper)
		text, n, err := readback.PDFText(b)
		if err != nil {
			t.Fatal(err)
		}
		r, err := pdf.NewReader(bytes.NewReader(b), int64(len(b))) // the page size
		if err != nil {
			t.Fatal(err)
		}
		flat := strings.ReplaceAll(text, "\n", "")
		for _, want := range []string{"Acme PR", fmt.Sprintf("Page 1 of %d", n), fmt.Sprintf("Page %d of %d", n, n), "Coverage report", "Computed 3 Nov 2026"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: the text lacks %q", paper, want)
			}
		}
		for _, f := range d.Figures() {
			if !strings.Contains(text, f.Name) || !strings.Contains(text, f.Text()) {
				t.Errorf("%s: figure %s (%s = %s) not in the text", paper, f.Key, f.Name, f.Text())
			}
		}
		if !strings.Contains(strings.ReplaceAll(flat, " ", ""), strings.ReplaceAll(longHead, " ", "")) {
			t.Errorf("%s: the 2,000-character headline is not whole in the text", paper)
		}
		if n < 3 {
			t.Errorf("%s: %d pages for 60 clips", paper, n)
		}
		mediabox := r.Page(1).V.Key("MediaBox")
		if mediabox.IsNull() { // inherited from the page tree
			mediabox = r.Page(1).V.Key("Parent").Key("MediaBox")
		}
		w := mediabox.Index(2).Float64()
		if want := map[string]float64{"pdf-a4": 595.28, "pdf-letter": 612}[paper]; w < want-1 || w > want+1 {
			t.Errorf("%s: page width %.2f pt, want %.2f", paper, w, want)
		}
	}
}

// TestPDFRightToLeftAndEmoji reads the PDF's text back with poppler's
// pdftotext, which puts right-to-left lines back in reading order: the
// Hebrew and Arabic of a headline, an outlet's name and a chart's label
// come back as the words (the Arabic in its joined forms, which NFKC folds
// back to the letters), emoji the font lacks as the replacement character,
// the Latin around them whole, and a clip's line of fields in its order.
// (The extractor the other tests use decodes only Latin text of fpdf's
// fonts: it drops the high byte of each character.)
func TestPDFRightToLeftAndEmoji(t *testing.T) {
	exe, err := exec.LookPath("pdftotext")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("pdftotext is not installed (scripts/test.sh installs Debian's poppler-utils)")
		}
		t.Skip("pdftotext is not installed")
	}
	d := sample(10)
	file := filepath.Join(t.TempDir(), "report.pdf")
	if err := os.WriteFile(file, render(t, d, "pdf-a4"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "-enc", "UTF-8", file, "-").Output()
	if err != nil {
		t.Fatal(err)
	}
	text := norm.NFKC.String(strings.NewReplacer("\u202B", "", "\u202C", "", "\u202A", "").Replace(string(out)))
	// pdftotext joins a line's runs by its own reckoning (a neutral
	// between a right-to-left run and a number may go either way), so the
	// right-to-left text is looked for whole, and the fields after it.
	for _, want := range []string{
		"2026-10-02 · interview · neutral · reach 2,000 · Ann Launch \uFFFD day \uFFFD", // a clip's fields after its outlet's name
		"Acme PR Launch \uFFFD day \uFFFD · Coverage report",                            // the page's header
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q", want)
		}
	}
	if n := strings.Count(text, rtl); n < 4 { // two headlines, their outlets, the top outlets' label
		t.Errorf("the right-to-left text is %d times in the text, want 4 or more:\n%s", n, text)
	}
	if strings.ContainsAny(text, "🚀🎉") {
		t.Error("an emoji the font lacks reached the PDF")
	}
}

// TestPNGDecodes decodes each chart's PNG.
func TestPNGDecodes(t *testing.T) {
	d := sample(20)
	for _, id := range reportrender.ChartIDs(reportrender.KindCoverage) {
		b, err := d.PNG(id, 800, 400)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if s := img.Bounds().Size(); s.X != 800 || s.Y != 400 {
			t.Errorf("%s: %v, want 800×400", id, s)
		}
	}
	if _, err := d.PNG("nope", 800, 400); err == nil {
		t.Error("an unknown chart drew")
	}
	_ = io.Discard
}

// TestPipelineRenderings: the pipeline report's formats, with hostile
// owner names and titles: its sheets, its CSV tables, its charts' points,
// its PDF's text.
func TestPipelineRenderings(t *testing.T) {
	now := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	p := &reports.PipelineReport{Scope: "team", Since: now.AddDate(0, 0, -30), Until: now, ComputedAt: now, Opportunities: 4,
		ByStage:    map[string]int{"researching": 1, "pitched": 2, "won": 1, "lost": 0},
		ByOwner:    []reports.OwnerCount{{Owner: markup, Open: 2}, {Owner: rtl, Open: 1}},
		Conversion: reports.Conversion{Pitched: 3, Responded: 2, Placed: 1, RespondedRate: 66.7, PlacedRate: 33.3},
		Stale:      []reports.PipelineItem{{ID: "o1", Title: formula, Stage: "pitched", Owner: markup, StageSince: now.AddDate(0, 0, -20), DaysInStage: 20}},
		StaleCount: 1, Upcoming: []reports.Upcoming{{OpportunityID: "o2", Title: longHead, What: "embargo_until", At: now.AddDate(0, 0, 3), Owner: rtl}}, UpcomingCount: 1}
	d := &reportrender.Document{Kind: reportrender.KindPipeline, Pipeline: p, Team: "Acme PR", ScopeName: "The whole team"}
	var b bytes.Buffer
	if err := d.HTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Contains(page, "<script") || !strings.Contains(page, "Pipeline report") || !strings.Contains(page, rtl) || !strings.Contains(page, `id="stale"`) {
		t.Errorf("pipeline page: escaping or content wrong")
	}
	rows, err := csv.NewReader(bytes.NewReader(render(t, d, "stale"))).ReadAll()
	if err != nil || len(rows) != 2 || rows[1][0] != "'"+formula || rows[1][4] != "20" {
		t.Errorf("stale CSV: %v %q", err, rows)
	}
	rows, err = csv.NewReader(bytes.NewReader(render(t, d, "upcoming"))).ReadAll()
	if err != nil || len(rows) != 2 || rows[1][0] != longHead || rows[1][1] != "embargo_until" {
		t.Errorf("upcoming CSV: %v", err)
	}
	f, err := excelize.OpenReader(bytes.NewReader(render(t, d, "xlsx")))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.GetSheetList(), ","); got != "Figures,Stale,Upcoming" {
		t.Errorf("sheets %s", got)
	}
	f.Close()
	charts := d.Charts()
	if len(charts) != 3 || charts[2].Points[0].Value != 3 || charts[2].Points[2].Value != 1 || charts[1].Points[0].Label != markup {
		t.Errorf("pipeline charts: %+v", charts)
	}
	text := pdfText(t, render(t, d, "pdf-letter"))
	for _, want := range []string{"Pipeline report", "Stale opportunities", "20 days in stage", "66.7", "33.3", "embargo_until"} {
		if !strings.Contains(text, want) {
			t.Errorf("pipeline PDF lacks %q", want)
		}
	}
}
