package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/reports"
	"outreach/reportrender"
)

// artefactDir is where browser tests keep their screenshots: the
// directory OUTREACH_TEST_ARTEFACTS names, or one under the system's
// temporary directory; the test logs the path.
func artefactDir(t *testing.T) string {
	dir := os.Getenv("OUTREACH_TEST_ARTEFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "outreach-test-artefacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestReportPagesInChromium opens a rendered report page (the download
// link of render_report) and a share link in a real headless Chromium:
// no console message, no request outside the page itself, nothing blocked
// by its Content-Security-Policy, every chart drawn with a box of its own,
// and a screenshot of each kept as a test artefact.
func TestReportPagesInChromium(t *testing.T) {
	exe := chromium(t)
	parallelOnEmbedded(t)
	env := testenv.New(t)
	c := env.Client(env.Key("read", "write"), "browser-report")
	camp, _ := reportFixture(t, c)
	var s sharedView
	c.Must("share_report", M{"kind": "coverage", "campaign_id": camp, "since": "2026-10-01", "until": "2026-10-31"}, &s)
	// The pipeline page by a download link, signed as render_report signs
	// the links of renderings too large to answer inline.
	ctx := audit.WithActor(context.Background(), repo.SystemActor("test"))
	q := reports.ReportQuery{Kind: "pipeline", CampaignID: camp, Since: time.Now().AddDate(0, 0, -30), Until: time.Now()}
	link, err := reports.Of(env.Store).SignRenderURL(ctx, env.Base, reportrender.Params(q, reportrender.Spec{Format: "html"}), time.Now().Add(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	pipelinePage := link.Reveal()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	dir := artefactDir(t)
	for _, tc := range []struct {
		name, url string
		charts    int
		status    int
	}{
		{"shared-coverage-report", s.Link, 5, 200},
		{"pipeline-report", pipelinePage, 3, 200},
		{"revoked-or-forged-link", s.Link[:len(s.Link)-4] + "AAAA", 0, 403},
	} {
		bctx, cancel := chromedp.NewContext(actx)
		ctx, cancelT := context.WithTimeout(bctx, 60*time.Second)
		var mu sync.Mutex
		var problems, requests []string
		err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
				return err
			}
			if _, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{}); err != nil {
				return err
			}
			_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
			return err
		}))
		if err == nil {
			err = chromedp.Listen(ctx, func(ev any) {
				mu.Lock()
				defer mu.Unlock()
				switch e := ev.(type) {
				case *runtime.EventConsoleAPICalled:
					problems = append(problems, "console."+string(e.Type))
				case *runtime.EventExceptionThrown:
					problems = append(problems, "exception: "+e.ExceptionDetails.Text)
				case *log.EventEntryAdded:
					problems = append(problems, "log "+string(e.Entry.Source)+" "+string(e.Entry.Level)+": "+e.Entry.Text)
				case *network.EventRequestWillBeSent:
					requests = append(requests, e.Request.URL)
				case *network.EventLoadingFailed:
					problems = append(problems, "load failed: "+e.ErrorText+" "+string(e.BlockedReason))
				}
			})
		}
		var resp *network.Response
		var boxes []map[string]float64
		var nodes []*chromedp.Node
		var shot []byte
		if err == nil {
			resp, err = chromedp.Run(ctx, chromedp.NavigateResponse(tc.url))
		}
		if err == nil {
			err = chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS("body")), chromedp.Sleep(300*time.Millisecond)) // late console messages, CSP reports
		}
		if err == nil {
			boxes, err = chromedp.Run(ctx, chromedp.Evaluate[[]map[string]float64](`[...document.querySelectorAll("svg.chart")].map(e => { const r = e.getBoundingClientRect(); return {w: r.width, h: r.height, points: e.querySelectorAll("[data-value]").length}; })`))
		}
		if err == nil {
			nodes, err = chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll("h1")))
		}
		if err == nil {
			shot, err = chromedp.Run(ctx, chromedp.FullScreenshot(80))
		}
		cancelT()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		status := 0
		if resp != nil {
			status = int(resp.Status)
		}
		mu.Lock()
		if status != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, status, tc.status)
		}
		if tc.status != 200 && len(problems) == 1 && strings.Contains(problems[0], "status of 403") {
			problems = nil // the browser's own note of the refusal
		}
		if len(problems) > 0 {
			t.Errorf("%s: the browser reported %q", tc.name, problems)
		}
		if len(requests) != 1 || requests[0] != tc.url {
			t.Errorf("%s: requests %q, want the page alone", tc.name, requests)
		}
		mu.Unlock()
		if len(boxes) != tc.charts {
			t.Errorf("%s: %d charts drawn, want %d", tc.name, len(boxes), tc.charts)
		}
		for i, b := range boxes {
			if b["w"] < 200 || b["h"] < 20 || b["points"] < 1 {
				t.Errorf("%s: chart %d box %v", tc.name, i, b)
			}
		}
		if len(nodes) != 1 {
			t.Errorf("%s: %d headings", tc.name, len(nodes))
		}
		p := filepath.Join(dir, tc.name+".jpg")
		if err := os.WriteFile(p, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: screenshot %s", tc.name, p)
	}
}
