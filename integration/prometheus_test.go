package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// requirePrometheus finds Prometheus (Debian's package, 2.42); without it
// the test skips, and fails under CI=true (the test command installs it).
func requirePrometheus(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("prometheus is not installed (scripts/test.sh installs Debian's prometheus)")
	}
	t.Skip("prometheus is not installed")
	return ""
}

// startPrometheus runs Prometheus with config (its scrape configuration)
// on a free loopback port, its storage in a temporary directory, and
// returns its base URL once it answers.
func startPrometheus(t *testing.T, exe, config string) string {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeTCP(t)
	cmd := exec.Command(exe, "--config.file="+conf, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	cmd.Dir = dir
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out)
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		select {
		case <-done:
			t.Fatalf("prometheus exited at start: %v\n%s", cmd.ProcessState, out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus did not get ready in time\n%s", out)
		}
	}
}

// promQuery asks Prometheus' HTTP API for an instant query and returns
// the value of each series of the vector, by its job label.
func promQuery(t *testing.T, base, query string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?" + url.Values{"query": {query}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Error  string
		Data   struct {
			ResultType string
			Result     []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	if r.Status != "success" || r.Data.ResultType != "vector" {
		t.Fatalf("%s: %s %s (%s)", query, r.Status, r.Error, r.Data.ResultType)
	}
	got := map[string]float64{}
	for _, s := range r.Data.Result {
		v, _ := s.Value[1].(string)
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("%s: value %v", query, s.Value)
		}
		got[s.Metric["job"]] = f
	}
	return got
}

// promTargetErrors is the last scrape error of each active target, by job.
func promTargetErrors(t *testing.T, base string) map[string]string {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/targets?state=active")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			ActiveTargets []struct {
				Labels    map[string]string
				LastError string
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tg := range r.Data.ActiveTargets {
		got[tg.Labels["job"]] = tg.LastError
	}
	return got
}

// TestPrometheus scrapes the service with the real Prometheus, as an
// operator would: one service serves its metrics on a listener of its own
// (--metrics-listen), another on its MCP address behind
// OUTREACH_METRICS_TOKEN, which Prometheus sends as a bearer token. Both
// targets are up and the tool calls made on each are counted in
// Prometheus; a third job sending a wrong token is down, the service
// having answered 401.
func TestPrometheus(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		// Two processes on one server would share its keys; what is
		// scraped does not depend on the store, and the embedded pass runs it.
		t.Skip("runs on the embedded store: two services, each with its first key")
	}
	exe := requirePrometheus(t)
	parallelOnEmbedded(t)

	own := startServer(t, t.TempDir(), "OUTREACH_METRICS_LISTEN=127.0.0.1:0")
	m := regexp.MustCompile(`"url":"http://([^"]+)/metrics"[^\n]*"message":"serving metrics"`).FindStringSubmatch(own.stderr.String())
	if m == nil {
		t.Fatalf("no metrics listener in the log:\n%s", own.stderr)
	}
	ownMetrics := m[1]
	withToken := startServer(t, t.TempDir(), "OUTREACH_METRICS_TOKEN="+metricsToken)
	for _, s := range []*proc{own, withToken} {
		c := mustDial(t, s.URL, s.FirstKey)
		c.must(t, "whoami", nil, nil)
		c.must(t, "whoami", nil, nil)
	}

	mainAddr := strings.TrimPrefix(withToken.Base, "http://")
	config := fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: outreach-listener
    static_configs: [{targets: [%q]}]
  - job_name: outreach-token
    authorization: {type: Bearer, credentials: %q}
    static_configs: [{targets: [%q]}]
  - job_name: outreach-wrong-token
    authorization: {type: Bearer, credentials: %q}
    static_configs: [{targets: [%q]}]
`, ownMetrics, metricsToken, mainAddr, strings.Repeat("x", len(metricsToken)), mainAddr)
	prom := startPrometheus(t, exe, config)

	want := map[string]float64{"outreach-listener": 1, "outreach-token": 1, "outreach-wrong-token": 0}
	wantCalls := map[string]float64{"outreach-listener": 2, "outreach-token": 2}
	const calls = `sum by (job) (outreach_tool_calls_total{tool="whoami",code="ok"})`
	// The deadline only keeps a failure from hanging the suite: scrapes
	// come every second once Prometheus is ready.
	deadline := time.Now().Add(60 * time.Second)
	for {
		up, counted := promQuery(t, prom, "up"), promQuery(t, prom, calls)
		errs := promTargetErrors(t, prom)
		upOK := len(up) == len(want)
		for job, v := range want {
			if got, ok := up[job]; !ok || got != v {
				upOK = false
			}
		}
		callsOK := len(counted) == len(wantCalls)
		for job, v := range wantCalls {
			if counted[job] != v {
				callsOK = false
			}
		}
		refused := strings.Contains(errs["outreach-wrong-token"], "401")
		if upOK && callsOK && refused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus did not see the targets as expected:\nup = %v, want %v\n%s = %v, want %v\nlast scrape errors: %q",
				up, want, calls, counted, wantCalls, errs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Each target is a separate up series: a scrape of each job, by its job
	// label, so the query by job is the whole answer.
	for _, job := range []string{"outreach-listener", "outreach-token"} {
		if q := promQuery(t, prom, fmt.Sprintf(`up{job=%q}`, job)); q[job] != 1 {
			t.Errorf(`up{job=%q} = %v, want 1`, job, q)
		}
	}
	if q := promQuery(t, prom, `up{job="outreach-wrong-token"}`); q["outreach-wrong-token"] != 0 || len(q) != 1 {
		t.Errorf(`up{job="outreach-wrong-token"} = %v, want 0`, q)
	}
}
