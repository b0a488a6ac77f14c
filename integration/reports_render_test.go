package integration

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/xuri/excelize/v2"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/reports"
	"outreach/reportrender"
	"outreach/reportrender/readback"
	"outreach/tools"
)

// Hostile text the renderings must carry escaped and wrapped.
var (
	hostileMarkup = `<b onmouseover="x()">Acme</b> & <script>alert(1)</script>`
	hostileRTL    = "تغطية ممتازة לאקמה"
	hostileEmoji  = "Launch 🚀🎉"
	hostileLong   = strings.Repeat("Longheadline ", 75) + "END" // the tools keep titles to 1,000 characters; the renderers take 2,000 (reportrender tests)
)

// reportFixture fills a campaign with coverage, opportunities and settings
// through the tools and returns the campaign's id and one of its
// opportunities'.
func reportFixture(t *testing.T, c *testenv.Client) (string, string) {
	t.Helper()
	id := func(tool string, args M) string { return testenv.ID(t, c.Must(tool, args, nil)) }
	a := id("create_outlet", M{"name": "Alpha Daily " + hostileMarkup, "tier": 1, "audience_size": 1000000})
	b := id("create_outlet", M{"name": hostileRTL, "tier": 2, "audience_size": 500000, "type": "podcast_network"})
	k := id("create_campaign", M{"name": "Acme October " + hostileEmoji})
	j := id("create_contact", M{"first_name": "Dana", "last_name": "Writer " + hostileEmoji})
	o1 := id("create_opportunity", M{"title": "Launch story", "campaign_id": k, "outlet_id": a, "contact_ids": []string{j}})
	o2 := id("create_opportunity", M{"title": hostileMarkup, "campaign_id": k, "outlet_id": b})
	c.Must("update_opportunity_stage", M{"id": o1, "stage": "pitched"}, nil)
	c.Must("update_opportunity_stage", M{"id": o1, "stage": "responded"}, nil)
	c.Must("update_opportunity_stage", M{"id": o2, "stage": "pitched"}, nil)
	titles := []string{hostileMarkup, hostileRTL, hostileEmoji, hostileLong, "=SUM(A1:A9) Globex", "Plain story about Globex"}
	for i, title := range titles {
		args := M{"title": title, "type": []string{"article", "interview", "review"}[i%3], "opportunity_id": []string{o1, o2}[i%2],
			"published_at": fmt.Sprintf("2026-10-%02dT09:00:00Z", 3+i*4), "url": fmt.Sprintf("https://news.example/%d?a=1&b=2", i), "contact_ids": []string{j}}
		if i%3 != 2 {
			args["reach"] = 10000 * (i + 1)
		}
		if i%2 == 0 {
			args["sentiment"] = []string{"positive", "negative", "neutral"}[i%3]
		}
		id("create_coverage", args)
	}
	c.Must("update_settings", M{"competitors": []string{"Globex", "Initech"}, "ave_rate_per_thousand": 12.5, "ave_currency": "EUR", "team_name": "Acme PR Team"}, nil)
	return k, o1
}

// callRaw calls a tool and returns its whole result.
func callRaw(t *testing.T, c *testenv.Client, tool string, args M) *mcp.CallToolResult {
	t.Helper()
	res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError {
		t.Fatalf("%s(%v): %s", tool, args, res.Content[0].(*mcp.TextContent).Text)
	}
	return res
}

type rendered struct {
	Format      string         `json:"format"`
	MimeType    string         `json:"mime_type"`
	SizeBytes   int            `json:"size_bytes"`
	Delivery    string         `json:"delivery"`
	Text        string         `json:"text"`
	DownloadURL string         `json:"download_url"`
	Empty       bool           `json:"empty"`
	Note        string         `json:"note"`
	Figures     map[string]any `json:"figures"`
	ComputedAt  time.Time      `json:"computed_at"`
}

func renderVia(t *testing.T, c *testenv.Client, args M) (rendered, *mcp.CallToolResult) {
	t.Helper()
	res := callRaw(t, c, "render_report", args)
	var r rendered
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &r); err != nil {
		t.Fatal(err)
	}
	return r, res
}

// flatten writes a JSON answer's numbers under their dotted paths.
func flattenFigures(prefix string, v any, out map[string]float64) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flattenFigures(p, e, out)
		}
	case float64:
		out[prefix] = x
	}
}

func toFloat(t *testing.T, v any) float64 {
	t.Helper()
	switch x := v.(type) {
	case float64:
		return x
	case string:
		f, err := strconv.ParseFloat(x, 64)
		if err != nil {
			t.Fatalf("figure %q is not a number", x)
		}
		return f
	}
	t.Fatalf("figure %v (%T) is not a number", v, v)
	return 0
}

// get fetches a URL without credentials.
func get(t *testing.T, u string) (*http.Response, []byte) {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, b
}

// TestRenderedReportsShowTheToolsFigures: every format of render_report,
// read back by a real reader, shows the figures get_coverage_report answers
// for the same scope and range.
func TestRenderedReportsShowTheToolsFigures(t *testing.T) {
	parallelOnEmbedded(t)
	env := testenv.New(t)
	c := env.Client(env.Key("read", "write"), "render")
	camp, opp := reportFixture(t, c)
	scope := M{"campaign_id": camp, "since": "2026-10-01", "until": "2026-10-31"}
	var tool map[string]any
	c.Must("get_coverage_report", scope, &tool)
	want := map[string]float64{}
	flattenFigures("", tool, want)
	if want["items"] != 6 || want["ave.value"] == 0 {
		t.Fatalf("fixture: report %v", tool)
	}
	with := func(extra M) M {
		m := M{"kind": "coverage"}
		for k, v := range scope {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	check := func(format string, got map[string]float64) {
		t.Helper()
		n := 0
		for key, v := range got {
			w, ok := want[key]
			if !ok {
				t.Errorf("%s: figure %s is not in get_coverage_report's answer", format, key)
				continue
			}
			if w != v {
				t.Errorf("%s: %s = %v, get_coverage_report says %v", format, key, v, w)
			}
			n++
		}
		if n < 30 {
			t.Errorf("%s: only %d figures compared", format, n)
		}
	}

	// The answer's own figures.
	r, _ := renderVia(t, c, with(M{"format": "csv", "table": "figures"}))
	figs := map[string]float64{}
	for k, v := range r.Figures {
		figs[k] = toFloat(t, v)
	}
	check("figures", figs)

	// CSV, inline, parsed with encoding/csv.
	if r.Delivery != "inline_text" {
		t.Fatalf("a small CSV came as %s", r.Delivery)
	}
	check("csv", floats(t)(readback.CSVFigures([]byte(r.Text))))
	r, _ = renderVia(t, c, with(M{"format": "csv"}))
	clips, err := csv.NewReader(strings.NewReader(r.Text)).ReadAll()
	if err != nil || len(clips) != 7 {
		t.Fatalf("clips CSV: %d rows, %v", len(clips), err)
	}
	if !strings.Contains(r.Text, "'=SUM(A1:A9) Globex") || !strings.Contains(r.Text, hostileRTL) || !strings.Contains(r.Text, "END") {
		t.Errorf("clips CSV lost or armed hostile text:\n%s", r.Text[:min(len(r.Text), 2000)])
	}

	// XLSX, by its download link, read with excelize.
	r, res := renderVia(t, c, with(M{"format": "xlsx"}))
	if r.Delivery != "link" || len(res.Content) != 2 {
		t.Fatalf("xlsx: delivery %s, %d contents", r.Delivery, len(res.Content))
	}
	link, ok := res.Content[1].(*mcp.ResourceLink)
	if !ok || link.URI != r.DownloadURL || link.MIMEType != "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" {
		t.Fatalf("xlsx: second content %#v", res.Content[1])
	}
	hr, body := get(t, r.DownloadURL)
	if hr.StatusCode != 200 || len(body) != r.SizeBytes {
		t.Fatalf("xlsx download: %d, %d bytes (the call rendered %d)", hr.StatusCode, len(body), r.SizeBytes)
	}
	xfigs, f, err := readback.XLSXFigures(body)
	check("xlsx", floats(t)(xfigs, err))
	crows, _ := f.GetRows("Clips")
	if len(crows) != 7 {
		t.Errorf("xlsx Clips sheet: %d rows, want 7", len(crows))
	}
	f.Close()

	// HTML, inline or linked, its figures table read back.
	r, _ = renderVia(t, c, with(M{"format": "html"}))
	page := r.Text
	if r.Delivery == "link" {
		_, b := get(t, r.DownloadURL)
		page = string(b)
	}
	check("html", floats(t)(readback.HTMLFigures(page), nil))
	for _, bad := range []string{"<script", "<b onmouseover"} {
		if strings.Contains(page, bad) {
			t.Errorf("html carries %q unescaped", bad)
		}
	}

	// PDF, by its link, its text extracted.
	for _, paper := range []string{"A4", "Letter"} {
		r, _ = renderVia(t, c, with(M{"format": "pdf", "paper": paper}))
		hr, body = get(t, r.DownloadURL)
		if hr.StatusCode != 200 || hr.Header.Get("Content-Type") != "application/pdf" {
			t.Fatalf("pdf download: %d %s", hr.StatusCode, hr.Header.Get("Content-Type"))
		}
		text, _, err := readback.PDFText(body)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"Acme PR Team", "Coverage report", "Page 1 of", "Campaign: Acme October"} {
			if !strings.Contains(text, s) {
				t.Errorf("pdf %s lacks %q", paper, s)
			}
		}
		for key, v := range want {
			if strings.HasSuffix(key, "_percent") || strings.Contains(key, "trend") || strings.Contains(key, "rate_per_thousand") {
				continue
			}
			if s := reportrender.FormatValue(v); !strings.Contains(text, s) {
				t.Errorf("pdf %s: figure %s (%s) not in the text", paper, key, s)
			}
		}
	}

	// PNG, as image content the chat shows.
	r, res = renderVia(t, c, with(M{"format": "png", "chart": "sentiment"}))
	if r.Delivery != "inline_image" || len(res.Content) != 2 {
		t.Fatalf("png: %s, %d contents", r.Delivery, len(res.Content))
	}
	img, ok := res.Content[1].(*mcp.ImageContent)
	if !ok || img.MIMEType != "image/png" {
		t.Fatalf("png content %#v", res.Content[1])
	}
	if im, err := png.Decode(bytes.NewReader(img.Data)); err != nil || im.Bounds().Dx() != reportrender.PNGWidth {
		t.Fatalf("png: %v", err)
	}

	// A download is the document the call answered for: a clip added after
	// the call is not in it.
	r, _ = renderVia(t, c, with(M{"format": "xlsx"}))
	c.Must("create_coverage", M{"title": "After the call", "type": "article", "published_at": "2026-10-20T10:00:00Z", "opportunity_id": opp}, nil)
	_, body = get(t, r.DownloadURL)
	if f, err = excelize.OpenReader(bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	if crows, _ := f.GetRows("Clips"); len(crows) != 7 || len(body) != r.SizeBytes {
		t.Errorf("the download after a change: %d rows, %d bytes; the call rendered 6 clips in %d bytes", len(crows)-1, len(body), r.SizeBytes)
	}
	f.Close()
}

// floats reads a reader's figures as numbers.
func floats(t *testing.T) func(map[string]string, error) map[string]float64 {
	return func(m map[string]string, err error) map[string]float64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := make(map[string]float64, len(m))
		for k, v := range m {
			out[k] = toFloat(t, v)
		}
		return out
	}
}

// TestRenderReportRefusals: bad arguments name their field; an empty range
// is an honest empty report; a download link cannot be altered.
func TestRenderReportRefusals(t *testing.T) {
	parallelOnEmbedded(t)
	env := testenv.New(t)
	c := env.Client(env.Key("read", "write"), "render-bad")
	for _, tc := range []struct {
		args  M
		code  string
		field string
	}{
		{M{"kind": "sales", "format": "html"}, repo.CodeInvalid, "kind"},
		{M{"kind": "coverage", "format": "docx"}, repo.CodeInvalid, "format"},
		{M{"kind": "coverage", "format": "pdf", "chart": "trend"}, repo.CodeInvalid, "chart"},
		{M{"kind": "coverage", "format": "pdf", "paper": "A3"}, repo.CodeInvalid, "paper"},
		{M{"kind": "coverage", "format": "png", "chart": "pie"}, repo.CodeInvalid, "chart"},
		{M{"kind": "pipeline", "format": "csv", "table": "clips"}, repo.CodeInvalid, "table"},
		{M{"kind": "coverage", "format": "html", "campaign_id": "8d3c1f4e-2b6a-4e7d-9c5b-1a2f3e4d5c6b"}, repo.CodeNotFound, "campaign_id"},
		{M{"kind": "coverage", "format": "html", "since": "2026-10-05", "until": "2026-10-01"}, repo.CodeInvalid, "until"},
		{M{"kind": "pipeline", "format": "html", "outlet_ids": []string{"8d3c1f4e-2b6a-4e7d-9c5b-1a2f3e4d5c6b"}}, repo.CodeInvalid, "outlet_ids"},
		{M{"kind": "coverage", "format": "png", "since": "2020-01-01", "until": "2020-01-31"}, repo.CodeFailedPrecondition, ""},
	} {
		e := c.Fail("render_report", tc.args, tc.code)
		if e.Field != tc.field {
			t.Errorf("%v: field %q, want %q (%s)", tc.args, e.Field, tc.field, e.Message)
		}
	}
	r, _ := renderVia(t, c, M{"kind": "coverage", "format": "html", "since": "2020-01-01", "until": "2020-01-31"})
	if !r.Empty || r.Note != "No coverage in this range." || !strings.Contains(r.Text, "No coverage in this range.") || strings.Contains(r.Text, "<svg") {
		t.Errorf("empty report: empty %v note %q", r.Empty, r.Note)
	}
	r, _ = renderVia(t, c, M{"kind": "coverage", "format": "pdf"})
	u, _ := url.Parse(r.DownloadURL)
	q := u.Query()
	q.Set("kind", "pipeline")
	u.RawQuery = q.Encode()
	if res, body := get(t, u.String()); res.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "not valid") {
		t.Errorf("an altered download link: %d %s", res.StatusCode, body)
	}
}

type sharedView struct {
	ID        string     `json:"id"`
	State     string     `json:"state"`
	Link      string     `json:"link"`
	Views     int64      `json:"views"`
	SharedAt  time.Time  `json:"shared_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

// TestShareReportLink: a share link opens the snapshot's page without a
// key, strict headers on it, its views counted; a forged, expired or
// revoked link answers 403 or 410 with a plain page; a rollback never
// reopens a revoked link.
func TestShareReportLink(t *testing.T) {
	parallelOnEmbedded(t)
	env := testenv.New(t)
	c := env.Client(env.Key("read", "write"), "share")
	camp, opp := reportFixture(t, c)
	var s sharedView
	c.Must("share_report", M{"kind": "coverage", "campaign_id": camp, "since": "2026-10-01", "until": "2026-10-31", "expires_in_days": 7}, &s)
	if s.State != "active" || !strings.HasPrefix(s.Link, env.Base+"/shared/"+s.ID+"?") || s.ExpiresAt.Sub(s.SharedAt) < 7*24*time.Hour-time.Second {
		t.Fatalf("share_report: %+v", s)
	}
	// The snapshot: a coverage item added after sharing does not show.
	c.Must("create_coverage", M{"title": "After the share", "type": "article", "published_at": "2026-10-20T10:00:00Z", "opportunity_id": opp}, nil)
	res, body := get(t, s.Link)
	if res.StatusCode != 200 {
		t.Fatalf("share page: %d %s", res.StatusCode, body)
	}
	for h, want := range map[string]string{"Content-Security-Policy": reportrender.CSP, "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"} {
		if got := res.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	page := string(body)
	if !strings.Contains(page, `data-key="items"><td>Coverage</td><td dir="auto">Coverage items</td><td class="n" data-value="6"`) {
		t.Errorf("the shared page does not show the 6 items of the snapshot")
	}
	if !strings.Contains(page, "Shared snapshot: the figures as of "+s.SharedAt.UTC().Format("2 Jan 2006 15:04 UTC")) || strings.Contains(page, "After the share") {
		t.Errorf("the page does not show its moment, or shows a later clip")
	}
	get(t, s.Link)
	var list struct {
		SharedReports []sharedView `json:"shared_reports"`
	}
	c.Must("list_shared_reports", M{}, &list)
	if len(list.SharedReports) != 1 || list.SharedReports[0].Views != 2 || list.SharedReports[0].Link != s.Link {
		t.Fatalf("list_shared_reports: %+v", list.SharedReports)
	}

	// Forged: another signature, another expiry, another id.
	id, e, sig, _ := reports.ParseShareURL(strings.TrimPrefix(s.Link, env.Base))
	for _, u := range []string{
		fmt.Sprintf("%s/shared/%s?e=%s&s=%s", env.Base, id, e, strings.Repeat("A", len(sig))),
		fmt.Sprintf("%s/shared/%s?e=%d&s=%s", env.Base, id, time.Now().Add(900*24*time.Hour).Unix(), sig),
		fmt.Sprintf("%s/shared/%s?e=%s&s=%s", env.Base, "7d1f4a8e-3c2b-4f7a-9e05-8b1c2d3e4f50", e, sig),
		fmt.Sprintf("%s/shared/%s", env.Base, id),
	} {
		res, body := get(t, u)
		if res.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "This link is not valid") || strings.Contains(string(body), "Coverage items") {
			t.Errorf("forged %s: %d %s", u, res.StatusCode, body)
		}
	}

	// Expired: a record shared in the past, its link derived as the tools do.
	ctx := audit.WithActor(context.Background(), repo.SystemActor("test"))
	old := &reports.SharedReport{Kind: "coverage", Title: "Coverage report", SharedAt: time.Now().Add(-48 * time.Hour), ExpiresAt: time.Now().Add(-time.Hour).Truncate(time.Second), Snapshot: "{}"}
	if err := repo.Insert(ctx, env.Store, repo.CollSharedReports, old); err != nil {
		t.Fatal(err)
	}
	oldLink, err := reports.Of(env.Store).ShareLink(ctx, env.Base, old)
	if err != nil {
		t.Fatal(err)
	}
	if res, body := get(t, oldLink.Reveal()); res.StatusCode != http.StatusGone || !strings.Contains(string(body), "no longer works") {
		t.Errorf("expired link: %d %s", res.StatusCode, body)
	}

	// Revoked, and a rollback of the revocation refused by the rule.
	var rv sharedView
	c.Must("revoke_shared_report", M{"id": s.ID}, &rv)
	if rv.State != "revoked" || rv.RevokedAt == nil {
		t.Fatalf("revoke: %+v", rv)
	}
	if res, _ := get(t, s.Link); res.StatusCode != http.StatusGone {
		t.Errorf("revoked link: %d", res.StatusCode)
	}
	c.Fail("revoke_shared_report", M{"id": s.ID}, repo.CodeFailedPrecondition)
	var changes struct {
		Changes []struct {
			ID     string `json:"id"`
			Action string `json:"action"`
			Tool   string `json:"tool"`
		} `json:"changes"`
	}
	c.Must("get_change_log", M{"record_id": s.ID}, &changes)
	revoke := ""
	for _, ch := range changes.Changes {
		if ch.Tool == "revoke_shared_report" {
			revoke = ch.ID
		}
	}
	if revoke == "" {
		t.Fatalf("no change entry of the revocation: %+v", changes)
	}
	if e := c.Fail("rollback_change", M{"id": revoke, "force": true}, repo.CodeFailedPrecondition); !strings.Contains(e.Message+string(e.Details), "shared_report_revoked") {
		t.Errorf("rollback of a revocation: %s %s", e.Message, e.Details)
	}
	if res, _ := get(t, s.Link); res.StatusCode != http.StatusGone {
		t.Errorf("after the refused rollback: %d", res.StatusCode)
	}
	c.Must("list_shared_reports", M{}, &list)
	if len(list.SharedReports) != 0 {
		t.Errorf("active links after revoking: %+v", list.SharedReports)
	}
	c.Must("list_shared_reports", M{"all": true}, &list)
	if len(list.SharedReports) != 2 || list.SharedReports[0].Link != "" {
		t.Errorf("all links: %+v", list.SharedReports)
	}
}

// TestSharedPageRateLimit: the pages reached without a key share a budget
// per client address; over it a share link (even a valid one) and a
// download answer 429 with Retry-After and a plain page under the strict
// headers, count no view, and a forwarded address from an untrusted peer
// does not open a new budget.
func TestSharedPageRateLimit(t *testing.T) {
	parallelOnEmbedded(t)
	// One token every 100 s: the bucket cannot refill during the test.
	env := testenv.NewWith(t, testenv.Options{Tools: []tools.Option{tools.WithRateLimits(tools.RateLimits{Pages: 0.01, PageBurst: 3})}})
	c := env.Client(env.Key("read", "write"), "share")
	camp, _ := reportFixture(t, c)
	var s sharedView
	c.Must("share_report", M{"kind": "coverage", "campaign_id": camp, "since": "2026-10-01", "until": "2026-10-31"}, &s)
	for i := range 3 {
		if res, body := get(t, s.Link); res.StatusCode != http.StatusOK {
			t.Fatalf("view %d: %d %s", i+1, res.StatusCode, body)
		}
	}
	out, _ := renderVia(t, c, M{"kind": "coverage", "campaign_id": camp, "since": "2026-10-01", "until": "2026-10-31", "format": "pdf"})
	for _, u := range []string{s.Link, out.DownloadURL, env.Base + "/shared/" + s.ID} {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.9") // not believed: the test's address is no trusted proxy
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		secs, _ := strconv.Atoi(res.Header.Get("Retry-After"))
		if res.StatusCode != http.StatusTooManyRequests || secs < 1 || secs > 100 || !strings.Contains(string(body), "Too many requests") ||
			res.Header.Get("Content-Security-Policy") != reportrender.CSP || strings.Contains(string(body), "Coverage items") {
			t.Errorf("%s over the budget: %d, Retry-After %q, %s", u, res.StatusCode, res.Header.Get("Retry-After"), body)
		}
	}
	var list struct {
		SharedReports []sharedView `json:"shared_reports"`
	}
	c.Must("list_shared_reports", M{}, &list)
	if len(list.SharedReports) != 1 || list.SharedReports[0].Views != 3 {
		t.Errorf("views counted: %+v, want 3", list.SharedReports)
	}
}

// TestPipelineReportRendered: the pipeline report's figures in its CSV and
// XLSX, the same as the answer's.
func TestPipelineReportRendered(t *testing.T) {
	parallelOnEmbedded(t)
	env := testenv.New(t)
	c := env.Client(env.Key("read", "write"), "pipeline-render")
	camp, _ := reportFixture(t, c)
	today := time.Now().UTC().Format(time.DateOnly)
	r, _ := renderVia(t, c, M{"kind": "pipeline", "format": "csv", "campaign_id": camp, "until": today})
	rows, err := csv.NewReader(strings.NewReader(r.Text)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, row := range rows[1:] {
		got[row[2]] = row[3]
	}
	for k, want := range map[string]string{"opportunities": "2", "by_stage.pitched": "1", "by_stage.responded": "1", "conversion.pitched": "2", "conversion.responded": "1", "conversion.placed": "0", "conversion.responded_percent": "50"} {
		if got[k] != want {
			t.Errorf("pipeline %s: %q, want %q", k, got[k], want)
		}
		if v := toFloat(t, r.Figures[k]); strconv.FormatFloat(v, 'f', -1, 64) != want {
			t.Errorf("pipeline figures %s: %v, want %s", k, v, want)
		}
	}
}

// TestReportApps checks the MCP Apps wiring over MCP: the two ui://
// resources listed and read with the extension's MIME type, an HTML page
// speaking the extension's messages and calling render_report, and the
// tools that open them naming them in _meta.ui.resourceUri.
func TestReportApps(t *testing.T) {
	parallelOnEmbedded(t)
	env := testenv.New(t)
	c := env.Client(env.Key("read"), "apps")
	ctx := context.Background()
	listed := map[string]*mcp.Resource{}
	for r, err := range c.Session.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed[r.URI] = r
	}
	tools := map[string]*mcp.Tool{}
	for tl, err := range c.Session.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools[tl.Name] = tl
	}
	for uri, tool := range map[string]string{"ui://outreach/coverage-report": "get_coverage_report", "ui://outreach/pipeline-board": "get_pipeline_report"} {
		r := listed[uri]
		if r == nil || r.MIMEType != "text/html;profile=mcp-app" {
			t.Fatalf("resources/list: %s is %+v", uri, r)
		}
		res, err := c.Session.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(res.Contents) != 1 {
			t.Fatalf("read %s: %v", uri, err)
		}
		page := res.Contents[0]
		if page.MIMEType != "text/html;profile=mcp-app" {
			t.Errorf("%s: MIME type %q", uri, page.MIMEType)
		}
		for _, want := range []string{"<!doctype html>", `"ui/initialize"`, `"ui/notifications/initialized"`, `"ui/notifications/tool-input"`, `"tools/call"`, `name: "render_report"`} {
			if !strings.Contains(page.Text, want) {
				t.Errorf("%s: the page lacks %s", uri, want)
			}
		}
		tl := tools[tool]
		if tl == nil {
			t.Fatalf("tools/list lacks %s", tool)
		}
		ui, _ := tl.Meta["ui"].(map[string]any)
		if ui == nil || ui["resourceUri"] != uri {
			t.Errorf("%s: _meta %v, want ui.resourceUri %s", tool, tl.Meta, uri)
		}
	}
	// What the page calls answers for the same key: render_report's HTML,
	// inline, for the pipeline board's scope.
	r, _ := renderVia(t, c, M{"kind": "pipeline", "format": "html"})
	if r.Delivery != "inline_text" || !strings.Contains(r.Text, "Pipeline report") {
		t.Errorf("the board's call: %s %d bytes", r.Delivery, r.SizeBytes)
	}
}

// TestPromptsEndInTheReport: the coverage report and the weekly pipeline
// review prompts end in the rendered report: the chart as an image message,
// and how to render the document and share it.
func TestPromptsEndInTheReport(t *testing.T) {
	parallelOnEmbedded(t)
	env := testenv.New(t)
	c := env.Client(env.Key("read", "write"), "prompt-report")
	camp, _ := reportFixture(t, c)
	for name, args := range map[string]map[string]string{
		"campaign_coverage_report": {"campaign": camp, "since": "2026-10-01", "until": "2026-10-31"},
		"weekly_pipeline_review":   {"campaign": camp},
	} {
		res, err := c.Session.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(res.Messages) != 2 {
			t.Fatalf("%s: %d messages, want the text and the chart", name, len(res.Messages))
		}
		text := res.Messages[0].Content.(*mcp.TextContent).Text
		if !strings.Contains(text, "End with the rendered report. The chart is attached below.") || !strings.Contains(text, "share_report") || !strings.Contains(text, camp) {
			t.Errorf("%s: the text does not end in the report:\n%s", name, text[max(0, len(text)-600):])
		}
		img, ok := res.Messages[1].Content.(*mcp.ImageContent)
		if !ok || img.MIMEType != "image/png" {
			t.Fatalf("%s: second message %#v", name, res.Messages[1].Content)
		}
		if _, err := png.Decode(bytes.NewReader(img.Data)); err != nil {
			t.Errorf("%s: the chart does not decode: %v", name, err)
		}
	}
}

// TestOctoberReportWithALink is the end to end: an agent asked
// "make the October report for the Acme campaign and send me a link" finds
// the campaign by name, renders the chart (image content the chat shows)
// and shares the report; the link opens without a key, in any browser, a
// page whose figures are the ones the tools answer.
func TestOctoberReportWithALink(t *testing.T) {
	parallelOnEmbedded(t)
	env := testenv.New(t)
	c := env.Client(env.Key("read", "write"), "october-report")
	camp, _ := reportFixture(t, c)
	var found struct {
		Campaigns []struct {
			ID string `json:"id"`
		} `json:"campaigns"`
	}
	c.Must("list_campaigns", M{"search": "Acme"}, &found)
	if len(found.Campaigns) != 1 || found.Campaigns[0].ID != camp {
		t.Fatalf("list_campaigns Acme: %+v", found.Campaigns)
	}
	october := M{"campaign_id": camp, "since": "2026-10-01", "until": "2026-10-31"}
	var report map[string]any
	c.Must("get_coverage_report", october, &report)
	want := map[string]float64{}
	flattenFigures("", report, want)

	// The chart in the chat.
	r, res := renderVia(t, c, M{"kind": "coverage", "format": "png", "chart": "trend", "campaign_id": camp, "since": "2026-10-01", "until": "2026-10-31"})
	img, ok := res.Content[len(res.Content)-1].(*mcp.ImageContent)
	if r.Delivery != "inline_image" || !ok || img.MIMEType != "image/png" {
		t.Fatalf("the chart: delivery %s, last content %#v", r.Delivery, res.Content[len(res.Content)-1])
	}
	if im, err := png.Decode(bytes.NewReader(img.Data)); err != nil || im.Bounds().Dx() != reportrender.PNGWidth {
		t.Fatalf("the chart does not decode: %v", err)
	}
	// The link, opened without a key.
	var s sharedView
	c.Must("share_report", M{"kind": "coverage", "campaign_id": camp, "since": "2026-10-01", "until": "2026-10-31"}, &s)
	hr, body := get(t, s.Link)
	if hr.StatusCode != http.StatusOK || !strings.HasPrefix(hr.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("the link: %d %s", hr.StatusCode, hr.Header.Get("Content-Type"))
	}
	shown := floats(t)(readback.HTMLFigures(string(body)), nil)
	compared := 0
	for k, w := range want {
		v, ok := shown[k]
		if !ok {
			continue
		}
		compared++
		if math.Abs(v-w) > 1e-9 {
			t.Errorf("the page shows %s = %v, get_coverage_report %v", k, v, w)
		}
		if cv := toFloat(t, r.Figures[k]); math.Abs(cv-w) > 1e-9 {
			t.Errorf("the chart's call answered %s = %v, get_coverage_report %v", k, cv, w)
		}
	}
	t.Logf("%d figures of the page compared with the tools'", compared)
	if compared < 20 || shown["items"] != 6 {
		t.Errorf("the page's figures: %d compared (items %v)", compared, shown["items"])
	}
	if !strings.Contains(string(body), "Campaign: Acme October") {
		t.Errorf("the page does not name the campaign")
	}
}
