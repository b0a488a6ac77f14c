package integration

// Helpers for the tests that run the built `outreach` binary as a separate
// process: build it once, start and stop it on a data directory, run its
// subcommands, and speak MCP to it with plain HTTP requests (so a test
// controls every request and its time limit, and holds no event stream open
// that would keep a graceful shutdown waiting).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

var (
	binOnce sync.Once
	binDir  string // removed by TestMain
	binPath string
	binErr  error
)

// binary builds cmd/outreach once per test run and returns its path.
func binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "outreach-bin-")
		if binErr != nil {
			return
		}
		binPath = binDir + "/outreach"
		out, err := exec.Command("go", "build", "-o", binPath, "outreach/cmd/outreach").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// proc is a running `outreach serve`.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout *lockedBuffer
	stderr *lockedBuffer
	done   chan struct{}
	// Base is http://host:port; URL is the /mcp endpoint.
	Base, URL string
	// FirstKey is the admin key printed on the first start, or "".
	FirstKey string
}

var (
	keyPattern     = regexp.MustCompile(`outreach_[0-9A-Za-z]{36,}`)
	servingPattern = regexp.MustCompile(`"url":"(http://[^"]+)/mcp"[^\n]*"message":"serving MCP"`)
)

// startServer starts the binary on data (on a free loopback port) and
// returns once /healthz answers 200. The process is killed when the test ends
// if it is still running.
func startServer(t *testing.T, data string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary(t), "serve", "--data", data, "--addr", "127.0.0.1:0")
	// Every toolset and no rate limits, as testenv serves (the binary's
	// defaults list a smaller set and set per-key limits).
	cmd.Env = append(append(os.Environ(), append(storeEnv(data), "OUTREACH_TOOLSETS=all", "OUTREACH_RATE_LIMIT=0", "OUTREACH_HTTP_RATE_LIMIT=0")...), env...)
	s := &proc{t: t, cmd: cmd, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.stdout, s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.done
	})
	deadline := time.Now().Add(60 * time.Second)
	for s.Base == "" {
		if m := servingPattern.FindStringSubmatch(s.stderr.String()); m != nil {
			s.Base, s.URL = m[1], m[1]+"/mcp"
			break
		}
		select {
		case <-s.done:
			t.Fatalf("server exited at start: %v\nstdout:\n%s\nstderr:\n%s", cmd.ProcessState, s.stdout, s.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not start in time\nstderr:\n%s", s.stderr)
		}
	}
	for {
		resp, err := http.Get(s.Base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz did not answer 200 in time: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.FirstKey = keyPattern.FindString(s.stdout.String())
	return s
}

// kill sends SIGKILL and waits until the process is gone.
func (s *proc) kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// term sends SIGTERM and returns the exit code once the process has exited.
func (s *proc) term(timeout time.Duration) int {
	s.t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(timeout):
		s.t.Fatalf("server still running %v after SIGTERM\nstderr:\n%s", timeout, s.stderr)
	}
	return s.cmd.ProcessState.ExitCode()
}

// runCLI runs `outreach args…` to completion and returns its stdout and stderr.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	if i := slices.Index(args, "--data"); i >= 0 && i+1 < len(args) {
		cmd.Env = append(os.Environ(), storeEnv(args[i+1])...)
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// mustCLI is runCLI for a command that must succeed.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("outreach %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// mcpConn is one MCP session over plain HTTP.
type mcpConn struct {
	url, key, session string
	hc                *http.Client
	ids               atomic.Int64
}

// rpcStatusError is an HTTP answer other than 200/202.
type rpcStatusError struct {
	Status int
	Body   string
}

func (e *rpcStatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body) }

// dial opens a session with protocol revision version.
func dial(ctx context.Context, url, key, version string) (*mcpConn, error) {
	c := &mcpConn{url: url, key: key, hc: &http.Client{Transport: &http.Transport{}}}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	params := map[string]any{"protocolVersion": version, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "outreach-proc-test", "version": "1"}}
	if err := c.rpc(ctx, "initialize", params, &init); err != nil {
		return nil, err
	}
	if init.ProtocolVersion != version {
		return nil, fmt.Errorf("initialize: protocol %q, asked for %q", init.ProtocolVersion, version)
	}
	return c, c.notify(ctx, "notifications/initialized")
}

func (c *mcpConn) post(ctx context.Context, msg map[string]any) (*http.Response, error) {
	body, _ := json.Marshal(msg)
	req, err := http.NewRequestWithContext(ctx, "POST", c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.key)
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	return c.hc.Do(req)
}

func (c *mcpConn) notify(ctx context.Context, method string) error {
	resp, err := c.post(ctx, map[string]any{"jsonrpc": "2.0", "method": method})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		b, _ := io.ReadAll(resp.Body)
		return &rpcStatusError{resp.StatusCode, string(b)}
	}
	return nil
}

// rpc sends a request and decodes its result, from a JSON body or from the
// event stream the server answers with.
func (c *mcpConn) rpc(ctx context.Context, method string, params any, out any) error {
	id := c.ids.Add(1)
	resp, err := c.post(ctx, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return &rpcStatusError{resp.StatusCode, strings.TrimSpace(string(b))}
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		c.session = sid
	}
	var msg struct {
		ID     int64           `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	found := false
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			if err := json.Unmarshal([]byte(data), &msg); err == nil && msg.ID == id {
				found = true
				break
			}
		}
		if err := sc.Err(); err != nil {
			return err
		}
	} else {
		found = json.NewDecoder(resp.Body).Decode(&msg) == nil
	}
	if !found {
		return fmt.Errorf("%s: no response to request %d", method, id)
	}
	if msg.Error != nil {
		return fmt.Errorf("%s: JSON-RPC error %d: %s", method, msg.Error.Code, msg.Error.Message)
	}
	return json.Unmarshal(msg.Result, out)
}

// toolError is a tool's error result.
type toolError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *toolError) Error() string { return e.Code + ": " + e.Message }

// call calls a tool and decodes its JSON text result into out. A tool error
// comes back as a *toolError; a transport fault as any other error.
func (c *mcpConn) call(ctx context.Context, tool string, args any, out any) error {
	if args == nil {
		args = map[string]any{}
	}
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := c.rpc(ctx, "tools/call", map[string]any{"name": tool, "arguments": args}, &res); err != nil {
		return err
	}
	if len(res.Content) != 1 || res.Content[0].Type != "text" {
		return fmt.Errorf("%s: result content %+v, want one text item", tool, res.Content)
	}
	text := []byte(res.Content[0].Text)
	if res.IsError {
		var body struct{ Error toolError }
		if err := json.Unmarshal(text, &body); err != nil {
			return fmt.Errorf("%s: error result %s", tool, text)
		}
		return &body.Error
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(text, out)
}

// must is call for a call that must succeed.
func (c *mcpConn) must(t *testing.T, tool string, args any, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.call(ctx, tool, args, out); err != nil {
		t.Fatalf("%s(%v): %v", tool, args, err)
	}
}

// mustDial is dial on 2025-03-26 for a session that must open.
func mustDial(t *testing.T, url, key string) *mcpConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := dial(ctx, url, key, "2025-03-26")
	if err != nil {
		t.Fatalf("open an MCP session: %v", err)
	}
	return c
}

// initStatus is the HTTP status of an initialize sent with key.
func initStatus(t *testing.T, url, key string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := dial(ctx, url, key, "2025-03-26")
	var se *rpcStatusError
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &se):
		return se.Status
	}
	t.Fatalf("initialize: %v", err)
	return 0
}

// dataDir is a fresh data directory with a short path: the store's Unix
// socket lives in it, and socket paths are limited to about 100 bytes.
func dataDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "outreach-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// storeEnv names the database of the store on data: one per data directory,
// so that on MONGODB_URI too each test starts on an empty store (with the
// embedded store the directory alone would do).
func storeEnv(data string) []string {
	return []string{"OUTREACH_DB=" + strings.ReplaceAll(filepath.Base(data), "-", "_")}
}
