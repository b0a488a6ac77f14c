package bench

import (
	"regexp"

	"context"
	"fmt"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// peerServer is the MongoDB MCP server (npm mongodb-mcp-server) started
// read-only over its HTTP transport on the same store.
type peerServer struct {
	cmd *exec.Cmd
	url string
	log *strings.Builder
}

// startPeer starts the peer from dir's node_modules (npm ci there first).
func startPeer(ctx context.Context, dir, uri string) (*peerServer, error) {
	entry := filepath.Join(dir, "node_modules", "mongodb-mcp-server", "dist", "esm", "index.js")
	if _, err := os.Stat(entry); err != nil {
		return nil, fmt.Errorf("%s not found: run npm ci in %s", entry, dir)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("node", entry, "--transport", "http", "--httpHost", "127.0.0.1", "--httpPort", strconv.Itoa(port),
		"--readOnly", "--telemetry", "disabled", "--loggers", "stderr")
	// The connection string goes through the environment, not the command line.
	cmd.Env = append(os.Environ(), "MDB_MCP_CONNECTION_STRING="+uri, "DO_NOT_TRACK=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var log strings.Builder
	cmd.Stderr, cmd.Stdout = &limited{&log}, &limited{&log}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &peerServer{cmd: cmd, url: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), log: &log}
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, err := connect(ctx, p.url, bearer{})
		if err == nil {
			s.Close()
			return p, nil
		}
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			p.stop()
			return nil, fmt.Errorf("the peer did not answer at %s: %v; its output: %.500s", p.url, err, log.String())
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (p *peerServer) pid() int { return p.cmd.Process.Pid }

func (p *peerServer) stop() {
	// The peer's process group (node may start helpers).
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// limited keeps the first 64 KiB written to it.
type limited struct{ b *strings.Builder }

func (l *limited) Write(p []byte) (int, error) {
	if l.b.Len() < 64<<10 {
		l.b.Write(p)
	}
	return len(p), nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// rss returns the resident set size of process pid in bytes (0 if unknown).
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func load1() float64 {
	f, _ := strconv.ParseFloat(strings.Fields(loadAvg() + " 0")[0], 64)
	return f
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// The answer reads `- "preconfigured" (connected): …`.
var connectionID = regexp.MustCompile(`- "([^"]+)"`)

// peerConnection finds the id of the peer's preconfigured connection, which
// its find tool takes with every call.
func peerConnection(ctx context.Context, s *mcp.ClientSession) (map[string]any, error) {
	text, err := call(ctx, s, "list-connections", map[string]any{})
	if err != nil {
		return nil, err
	}
	m := connectionID.FindStringSubmatch(text)
	if m == nil {
		return nil, fmt.Errorf("no connectionId in the peer's list-connections answer: %.500s", text)
	}
	return map[string]any{"connectionId": m[1]}, nil
}
