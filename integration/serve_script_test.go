package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeScriptStops runs the README's first command, scripts/serve.sh, as
// a person does, and stops it as a person does: Ctrl-C (SIGINT to the whole
// foreground process group) or SIGTERM to the process started. The script
// must have become the server (exec), so the signal reaches it; afterwards
// nothing of the group runs and the data directory's lock is free.
func TestServeScriptStops(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "outreach")
	for _, tc := range []struct {
		name  string
		stop  func(pid int) error
		first bool
	}{
		{"ctrl-c", func(pid int) error { return syscall.Kill(-pid, syscall.SIGINT) }, true},
		{"sigterm", func(pid int) error { return syscall.Kill(pid, syscall.SIGTERM) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := dataDir(t)
			cmd := exec.Command("../scripts/serve.sh", "--data", data, "--addr", "127.0.0.1:0")
			cmd.Env = append(append(os.Environ(), storeEnv(data)...), "OUTREACH_BIN="+bin)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own group, as a terminal's foreground job
			var stdout, stderr lockedBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
			deadline := time.After(10 * time.Minute) // a cold build takes minutes
			for !servingPattern.MatchString(stderr.String()) {
				select {
				case err := <-done:
					t.Fatalf("serve.sh exited at start: %v\n%s", err, stderr.String())
				case <-deadline:
					t.Fatalf("serve.sh did not start serving\n%s", stderr.String())
				case <-time.After(50 * time.Millisecond):
				}
			}
			if !strings.Contains(stderr.String(), "building ") {
				t.Errorf("serve.sh did not say it was building:\n%s", stderr.String())
			}
			if tc.first && !keyPattern.MatchString(stdout.String()) {
				t.Errorf("the first start printed no admin key:\n%s", stdout.String())
			}
			exe, err := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/exe")
			if err != nil || exe != bin {
				t.Fatalf("the process started is %q (%v), want the server binary %s itself (exec)", exe, err, bin)
			}

			if err := tc.stop(cmd.Process.Pid); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("the server exited with %v, want 0\n%s", err, stderr.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("still running 30s after %s\n%s", tc.name, stderr.String())
			}
			if err := syscall.Kill(-cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("a process of the group still runs after %s (kill -0: %v)", tc.name, err)
			}
			// The lock is free: a command opens the store itself (no server answers its socket).
			verify := exec.Command(bin, "verify", "--data", data)
			verify.Env = append(os.Environ(), storeEnv(data)...)
			if out, err := verify.CombinedOutput(); err != nil {
				t.Errorf("verify on the data directory after %s: %v\n%s", tc.name, err, out)
			}
		})
	}
}
