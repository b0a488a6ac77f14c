package integration

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"outreach/integration/testenv"
)

// hostPage is the test host's page: the app's sandboxed frame (scripts
// only, an opaque origin, as hosts frame MCP Apps) and the bundled host.
const hostPage = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>MCP Apps test host</title></head>
<body><iframe id="app" sandbox="allow-scripts" title="app" style="width:1000px;height:1400px;border:0"></iframe>
<script type="module" src="/host.js"></script></body></html>`

// requireAppHost bundles integration/e2e/apphost.mjs (the ext-apps SDK's
// AppBridge, the official client) for the browser with esbuild, or skips
// (fails in CI) when the npm packages are not installed.
func requireAppHost(t *testing.T) []byte {
	t.Helper()
	dir := requireNodeClients(t)
	esbuild := filepath.Join(dir, "node_modules", ".bin", "esbuild")
	_, errApps := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "ext-apps", "package.json"))
	if _, err := os.Stat(esbuild); err != nil || errApps != nil {
		msg := "the ext-apps SDK or esbuild is not installed in integration/e2e; run ./scripts/test.sh, or `npm ci` there"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	out := filepath.Join(t.TempDir(), "host.js")
	cmd := exec.Command(esbuild, "apphost.mjs", "--bundle", "--format=esm", "--platform=browser", "--log-level=error", "--outfile="+out)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("esbuild: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReportAppInSDKHost loads the coverage report's MCP App through the
// ext-apps SDK's own host side in headless Chromium: a page connects to the
// server with the official client, reads the ui:// resource that
// get_coverage_report names, calls the tool, and hosts the app in a
// sandboxed frame with AppBridge, which answers the app's ui/initialize
// and forwards its tools/call (render_report) to the server. The app then
// shows the report's charts, and every figure it shows is the one
// get_coverage_report answers.
func TestReportAppInSDKHost(t *testing.T) {
	exe := chromium(t)
	bundle := requireAppHost(t)
	parallelOnEmbedded(t)
	env := testenv.New(t)
	key := env.Key("read", "write")
	c := env.Client(key, "apps-host")
	camp, _ := reportFixture(t, c)
	args := M{"campaign_id": camp, "since": "2026-10-01", "until": "2026-10-31"}
	var report map[string]any
	c.Must("get_coverage_report", args, &report)
	want := map[string]float64{}
	flattenFigures("", report, want)

	// The host's own origin serves its page and bundle and passes /mcp on
	// to the service, as a host's backend would.
	target, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.Out.URL.Scheme, r.Out.URL.Host, r.Out.URL.Path = target.Scheme, target.Host, target.Path
		r.Out.Host = target.Host
		r.Out.Header.Del("Origin") // the host's backend calls the service, not the page
		r.Out.Header.Del("Sec-Fetch-Site")
	}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(hostPage))
	})
	mux.HandleFunc("GET /host.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		_, _ = w.Write(bundle)
	})
	mux.Handle("/mcp", proxy)
	host := httptest.NewServer(mux)
	defer host.Close()
	a, _ := json.Marshal(args)
	hostURL := host.URL + "/#" + url.Values{"key": {key}, "tool": {"get_coverage_report"}, "args": {string(a)}}.Encode()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		// The sandboxed frame in the page's own process, so the test can read it.
		chromedp.Flag("disable-features", "IsolateSandboxedIframes"), chromedp.Flag("disable-site-isolation-trials", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1100, 1500))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(bctx, 90*time.Second)
	defer cancelT()
	var exceptions []string
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{})
		return err
	})); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			exceptions = append(exceptions, e.ExceptionDetails.Text+" "+e.ExceptionDetails.Exception.Description)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.NavigateResponse(hostURL)); err != nil {
		t.Fatal(err)
	}

	type hostState struct {
		Steps    []string       `json:"steps"`
		Error    string         `json:"error"`
		MimeType string         `json:"mimeType"`
		Size     map[string]any `json:"size"`
	}
	// The app's frame: its figures rows and charts, read in a world of the
	// test's own inside the frame (the app's page is left as it is).
	type shown struct {
		Status  string            `json:"status"`
		Charts  int               `json:"charts"`
		Figures map[string]string `json:"figures"`
	}
	const read = `(() => {
		const figures = {};
		for (const tr of document.querySelectorAll("tr[data-key]")) {
			const n = tr.querySelector("td.n");
			if (n) figures[tr.dataset.key] = n.dataset.value;
		}
		const s = document.getElementById("status");
		return {status: s ? s.textContent : "", charts: document.querySelectorAll("svg.chart").length, figures};
	})()`
	var st hostState
	var got shown
	deadline := time.Now().Add(60 * time.Second)
	for {
		var err error
		st, err = chromedp.Run(ctx, chromedp.Evaluate[hostState](`window.hostState || {}`))
		if err != nil {
			t.Fatal(err)
		}
		if st.Error != "" {
			t.Fatalf("the host failed: %s (steps %q)", st.Error, st.Steps)
		}
		if slices.Contains(st.Steps, "app initialized") {
			tree, err := chromedp.Call(ctx, cdppage.GetFrameTree, cdp.Empty{})
			if err != nil {
				t.Fatal(err)
			}
			if len(tree.FrameTree.ChildFrames) == 1 {
				world, err := chromedp.Call(ctx, cdppage.CreateIsolatedWorld, cdppage.CreateIsolatedWorldParams{FrameID: tree.FrameTree.ChildFrames[0].Frame.ID, WorldName: "test"})
				if err != nil {
					t.Fatal(err)
				}
				yes := true
				res, err := chromedp.Call(ctx, runtime.Evaluate, runtime.EvaluateParams{Expression: read, ContextID: world.ExecutionContextID, ReturnByValue: &yes})
				if err != nil {
					t.Fatal(err)
				}
				if res.ExceptionDetails != nil {
					t.Fatalf("reading the app's frame: %s", res.ExceptionDetails.Text)
				}
				if err := json.Unmarshal(res.Result.Value, &got); err != nil {
					t.Fatal(err)
				}
				if got.Charts > 0 && len(got.Figures) > 0 {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the app showed no report in 60 s: host %+v, app %+v, exceptions %q", st, got, exceptions)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st.MimeType != "text/html;profile=mcp-app" || !slices.Contains(st.Steps, "tool result sent") {
		t.Errorf("host: %+v", st)
	}
	if got.Charts != 5 {
		t.Errorf("the app shows %d charts, want 5", got.Charts)
	}
	compared := 0
	for k, v := range got.Figures {
		w, ok := want[k]
		if !ok {
			continue
		}
		compared++
		if f, err := strconv.ParseFloat(v, 64); err != nil || math.Abs(f-w) > 1e-9 {
			t.Errorf("the app shows %s = %s, get_coverage_report %v", k, v, w)
		}
	}
	if compared < 10 || got.Figures["items"] != "6" {
		t.Errorf("the app's figures: %d compared with get_coverage_report's (items %q): %v", compared, got.Figures["items"], got.Figures)
	}
	t.Logf("the app shows %d charts and %d figures, %d of them compared with get_coverage_report's", got.Charts, len(got.Figures), compared)
	if len(exceptions) > 0 {
		t.Errorf("exceptions in the page: %q", exceptions)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		p := filepath.Join(artefactDir(t), "mcp-app-coverage-report.png")
		if err := os.WriteFile(p, shot, 0o644); err == nil {
			t.Logf("screenshot: %s", p)
		}
	}
}
