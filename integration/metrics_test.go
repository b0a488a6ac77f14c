package integration

import (
	"io"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"outreach/backup"
	"outreach/integration/testenv"
	"outreach/internal/doctest"
	"outreach/mailsync"
	metricspkg "outreach/metrics"
	"outreach/repo"
	"outreach/server"
	"outreach/tools"
)

const metricsToken = "metrics-token-for-the-test-0123456789"

// metricsEnv serves the service with metrics behind the token, an inbox
// (never reached) and a backup status configured, so that every metric is
// exported.
func metricsEnv(t *testing.T) *testenv.Env {
	t.Helper()
	return testenv.NewWith(t, testenv.Options{
		Mail:   &mailsync.Config{Addr: "127.0.0.1:1", Security: mailsync.SecurityPlain, User: "team", Password: "unused"},
		Server: server.Config{MetricsToken: metricsToken},
		Metrics: func(store *repo.Store, syncer *mailsync.Syncer) *metricspkg.Metrics {
			return metricspkg.New(metricspkg.Sources{Store: store, Mail: syncer,
				Backup: func() backup.Status { return backup.Status{LastBackupAt: time.Now().Add(-time.Hour)} }})
		},
	})
}

// scrape asks base's /metrics with token and parses the exposition.
func scrape(t *testing.T, base, token string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %d %s", resp.StatusCode, body)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// TestMetrics scrapes the service after tool calls: the calls are counted
// by tool and outcome, every metric exported is in docs/operations.md's
// table and every one there is exported, and no label holds a key or an
// address.
func TestMetrics(t *testing.T) {
	env := metricsEnv(t)
	base, key := env.Base, env.AdminKey
	c := env.Admin()
	c.Must("whoami", nil, nil)
	c.Fail("get_note", testenv.M{"id": "no-such-note"}, "invalid_argument")

	fams := scrape(t, base, metricsToken)
	count := func(name string, labels map[string]string) float64 {
		f := fams[name]
		if f == nil {
			return -1
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return float64(m.GetHistogram().GetSampleCount())
		}
		return 0
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"outreach_tool_calls_total", map[string]string{"tool": "whoami", "code": "ok"}, 1},
		{"outreach_tool_calls_total", map[string]string{"tool": "get_note", "code": "invalid_argument"}, 1},
		{"outreach_tool_call_duration_seconds", map[string]string{"tool": "whoami"}, 1},
	}
	for _, ch := range checks {
		if got := count(ch.name, ch.labels); got != ch.want {
			t.Errorf("%s%v = %v, want %v", ch.name, ch.labels, got, ch.want)
		}
	}
	if fams["outreach_write_commits_total"].GetMetric()[0].GetCounter().GetValue() < 1 {
		t.Errorf("outreach_write_commits_total counts no write after the first key was made")
	}

	var exported []string
	for name, f := range fams {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		exported = append(exported, name)
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v := l.GetValue(); strings.Contains(v, "@") || strings.Contains(v, "outreach_") || strings.Contains(v, key[:12]) {
					t.Errorf("%s: label %s=%q looks like a key or an address", name, l.GetName(), v)
				}
			}
		}
	}
	for _, group := range []string{"go_goroutines", "process_open_fds"} {
		if fams[group] == nil {
			t.Errorf("%s not exported: the runtime and process collectors are missing", group)
		}
	}
	rows, err := doctest.TableRows("../docs/operations.md", "Metrics")
	if err != nil {
		t.Fatal(err)
	}
	// On a server the service keeps no index of its own unless
	// OUTREACH_SERVER_INDEX=on: the rows the table marks "embedded store"
	// are not exported there; those marked "server index" only with it.
	onServer := os.Getenv("MONGODB_URI") != ""
	serverIndex := onServer && os.Getenv("OUTREACH_SERVER_INDEX") == "on"
	var documented []string
	for _, row := range rows {
		cells := strings.Split(row, "|")
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		embeddedOnly := len(cells) > 4 && strings.HasPrefix(strings.TrimSpace(cells[4]), "embedded store")
		serverIndexOnly := len(cells) > 4 && strings.HasPrefix(strings.TrimSpace(cells[4]), "server index")
		if strings.HasPrefix(name, "outreach_") && !(onServer && embeddedOnly && !serverIndex) && (!serverIndexOnly || serverIndex) {
			documented = append(documented, name)
		}
	}
	slices.Sort(exported)
	slices.Sort(documented)
	if diff := cmp.Diff(exported, documented); diff != "" {
		t.Errorf("metrics exported (-) and listed in docs/operations.md's Metrics table (+):\n%s", diff)
	}
}

// TestMetricsRefusals: a scrape without the right token is 401, a path
// other than /metrics 404 (however long or odd), another method 405; a
// burst of them leaves no goroutine or file descriptor behind.
func TestMetricsRefusals(t *testing.T) {
	base := metricsEnv(t).Base
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	cases := []struct {
		name, method, path, auth string
		want                     int
	}{
		{"no token", "GET", "/metrics", "", http.StatusUnauthorized},
		{"wrong token", "GET", "/metrics", "Bearer " + strings.Repeat("x", len(metricsToken)), http.StatusUnauthorized},
		{"token as basic", "GET", "/metrics", "Basic " + metricsToken, http.StatusUnauthorized},
		{"token prefix", "GET", "/metrics", "Bearer " + metricsToken[:10], http.StatusUnauthorized},
		{"sub path", "GET", "/metrics/x", "Bearer " + metricsToken, http.StatusNotFound},
		{"huge path", "GET", "/metrics" + strings.Repeat("/a", 16<<10), "Bearer " + metricsToken, http.StatusNotFound},
		{"dots", "GET", "/metrics/%2e%2e/%00", "Bearer " + metricsToken, http.StatusNotFound},
		{"post", "POST", "/metrics", "Bearer " + metricsToken, http.StatusMethodNotAllowed},
	}
	burst := func(check bool) {
		for _, c := range cases {
			req, err := http.NewRequest(c.method, base+c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if check && resp.StatusCode != c.want {
				t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
			}
		}
	}
	burst(true) // warms up what stays (the server's listener, pools)
	goroutines, fds := runtime.NumGoroutine(), openFDs(t)
	for range 20 {
		burst(false)
	}
	hc.CloseIdleConnections()
	settled(t, "goroutines", goroutines, runtime.NumGoroutine)
	settled(t, "file descriptors", fds, func() int { return openFDs(t) })
}

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd here")
	}
	return len(es)
}

// settled waits until count() is back to at most before (connections end
// asynchronously); a deadline only keeps a leak from hanging the suite.
func settled(t *testing.T, what string, before int, count func() int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := count()
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: %d after the burst, %d before", what, n, before)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMetricsListen runs the binary with --metrics-listen: the metrics are
// on their own listener (the process and runtime collectors there too) and
// /metrics on the MCP listener is 404, there being no token.
func TestMetricsListen(t *testing.T) {
	s := startServer(t, t.TempDir(), "OUTREACH_METRICS_LISTEN=127.0.0.1:0")
	m := regexp.MustCompile(`"url":"(http://[^"]+)/metrics"[^\n]*"message":"serving metrics"`).FindStringSubmatch(s.stderr.String())
	if m == nil {
		t.Fatalf("no metrics listener in the log:\n%s", s.stderr)
	}
	fams := scrape(t, m[1], "")
	for _, name := range []string{"outreach_store_up", "outreach_write_commits_total", "process_open_fds", "go_goroutines"} {
		if fams[name] == nil {
			t.Errorf("%s not exported on --metrics-listen", name)
		}
	}
	if fams["outreach_email_sync_lag_seconds"] != nil || fams["outreach_backup_age_seconds"] != nil {
		t.Error("inbox or backup metrics exported without an inbox or backups configured")
	}
	resp, err := http.Get(s.Base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics on the MCP listener without a token: %d, want 404", resp.StatusCode)
	}
}

// TestMetricsRateLimitRefusals: a key over its tool-call budget and over
// its HTTP budget is counted, by layer. The budgets refill once in about
// 15 minutes, so nothing here depends on timing.
func TestMetricsRateLimitRefusals(t *testing.T) {
	env := testenv.NewWith(t, testenv.Options{
		Tools:  []tools.Option{tools.WithRateLimits(tools.RateLimits{Calls: 0.001, CallBurst: 1, Requests: 0.001, RequestBurst: 8})},
		Server: server.Config{MetricsToken: metricsToken},
		Metrics: func(store *repo.Store, _ *mailsync.Syncer) *metricspkg.Metrics {
			return metricspkg.New(metricspkg.Sources{Store: store})
		},
	})
	c := env.Admin()
	c.Must("whoami", nil, nil)
	c.Fail("whoami", nil, "rate_limited")
	refused := false
	for range 10 {
		req, _ := http.NewRequest("POST", env.URL, strings.NewReader(initialize))
		req.Header.Set("Authorization", "Bearer "+env.AdminKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if refused = resp.StatusCode == http.StatusTooManyRequests; refused {
			break
		}
	}
	if !refused {
		t.Fatal("no 429 after 10 requests over a budget of 8")
	}
	fams := scrape(t, env.Base, metricsToken)
	got := map[string]float64{}
	for _, m := range fams["outreach_rate_limit_refusals_total"].GetMetric() {
		got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	if diff := cmp.Diff(got, map[string]float64{"http": 1, "tool": 1}); diff != "" {
		t.Errorf("outreach_rate_limit_refusals_total by layer (-got +want):\n%s", diff)
	}
}
