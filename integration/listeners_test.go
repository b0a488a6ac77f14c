package integration

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// socketInodes are the inodes of the sockets process pid holds open.
func socketInodes(t *testing.T, pid int) map[string]bool {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok {
			out[strings.TrimSuffix(inode, "]")] = true
		}
	}
	return out
}

// procAddr decodes an address of /proc/net/tcp{,6} or udp{,6}.
func procAddr(s string) string {
	host, port, _ := strings.Cut(s, ":")
	raw, _ := hex.DecodeString(host)
	for i := 0; i+4 <= len(raw); i += 4 { // each 32-bit word is in host (little-endian) order
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	p, _ := strconv.ParseUint(port, 16, 16)
	return net.JoinHostPort(net.IP(raw).String(), strconv.FormatUint(p, 10))
}

// networkListeners lists what process pid accepts from the network: its TCP
// sockets in the LISTEN state and every UDP socket it holds.
func networkListeners(t *testing.T, pid int) []string {
	t.Helper()
	inodes := socketInodes(t, pid)
	var out []string
	for _, table := range []string{"tcp", "tcp6", "udp", "udp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || !inodes[fields[9]] {
				continue
			}
			if strings.HasPrefix(table, "tcp") && fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			out = append(out, table+" "+procAddr(fields[1]))
		}
		f.Close()
	}
	slices.Sort(out)
	return out
}

// unixListeners lists the paths of the Unix sockets process pid listens on.
func unixListeners(t *testing.T, pid int) []string {
	t.Helper()
	inodes := socketInodes(t, pid)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/unix", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		fields := strings.Fields(line)
		// Num RefCount Protocol Flags Type St Inode [Path]; flag 0x10000: listening.
		if len(fields) < 7 || !inodes[fields[6]] {
			continue
		}
		if flags, _ := strconv.ParseUint(fields[3], 16, 32); flags&0x10000 == 0 {
			continue
		}
		path := "(unnamed)"
		if len(fields) > 7 {
			path = fields[7]
		}
		out = append(out, path)
	}
	return out
}

// checkListeners fails unless pid listens on the network at exactly want,
// and on Unix sockets only where no other user can reach them.
func checkListeners(t *testing.T, pid int, want ...string) {
	t.Helper()
	for i, w := range want {
		want[i] = "tcp " + w
	}
	slices.Sort(want)
	if got := networkListeners(t, pid); !slices.Equal(got, want) {
		t.Errorf("network listeners %v, want %v alone", got, want)
	}
	for _, path := range unixListeners(t, pid) {
		if !filepath.IsAbs(path) {
			t.Errorf("Unix socket %s: abstract or unnamed, reachable by any local user", path)
			continue
		}
		dir, err := os.Stat(filepath.Dir(path))
		if err != nil {
			t.Errorf("Unix socket %s: %v", path, err)
			continue
		}
		sock, err := os.Stat(path)
		if err != nil {
			t.Errorf("Unix socket %s: %v", path, err)
			continue
		}
		owner := dir.Sys().(*syscall.Stat_t).Uid
		if owner != uint32(os.Getuid()) || dir.Mode().Perm()&0o077 != 0 && sock.Mode().Perm()&0o077 != 0 {
			t.Errorf("Unix socket %s (mode %v) in %s (mode %v, owner %d): reachable by other users", path, sock.Mode().Perm(), filepath.Dir(path), dir.Mode().Perm(), owner)
		}
	}
}

// TestOnlyGuardedListeners lists the sockets a running `outreach serve`
// listens on: the MCP endpoint alone, and the analyst endpoint when asked
// for; the embedded store is reached over a Unix socket no other user can
// open, never over a TCP port.
func TestOnlyGuardedListeners(t *testing.T) {
	data := dataDir(t)
	srv := startServer(t, data)
	mcp := strings.TrimPrefix(srv.Base, "http://")
	checkListeners(t, srv.cmd.Process.Pid, mcp)
	if code := srv.term(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	addr := freeTCP(t)
	srv = startServer(t, data, "OUTREACH_MONGO_LISTEN="+addr)
	if os.Getenv("MONGODB_URI") != "" {
		addr = "" // no embedded store, no analyst endpoint: analysts use the server's own users
	}
	mcp = strings.TrimPrefix(srv.Base, "http://")
	if addr == "" {
		checkListeners(t, srv.cmd.Process.Pid, mcp)
	} else {
		checkListeners(t, srv.cmd.Process.Pid, mcp, addr)
	}
}
