package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestSigningKeyFile: the embedded store's signing secret is made once, mode
// 0600, and read back the same; a file others may read, or one too short,
// is refused, and an operator's file wins.
func TestSigningKeyFile(t *testing.T) {
	dir := t.TempDir()
	cfg := config{data: dir}
	first, err := signingKey(cfg, true, zerolog.Nop())
	if err != nil || len(first) < 32 {
		t.Fatalf("first: %q %v", first, err)
	}
	path := filepath.Join(dir, signingKeyFile)
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v", path, info, err)
	}
	again, err := signingKey(cfg, true, zerolog.Nop())
	if err != nil || !bytes.Equal(first, again) {
		t.Fatalf("again: %q %v; want %q", again, err, first)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := signingKey(cfg, true, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a world-readable file: %v", err)
	}
	short := filepath.Join(t.TempDir(), "short.key")
	os.WriteFile(short, []byte("too short\n"), 0o600)
	t.Setenv("OUTREACH_MEDIA_SIGNING_KEY_FILE", short)
	if _, err := signingKey(cfg, true, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("a short secret: %v", err)
	}
	own := filepath.Join(t.TempDir(), "own.key")
	os.WriteFile(own, []byte(strings.Repeat("k", 40)+"\n"), 0o600)
	t.Setenv("OUTREACH_MEDIA_SIGNING_KEY_FILE", own)
	if got, err := signingKey(config{uri: "mongodb://x"}, true, zerolog.Nop()); err != nil || string(got) != strings.Repeat("k", 40) {
		t.Errorf("the operator's file: %q %v", got, err)
	}
	t.Setenv("OUTREACH_MEDIA_SIGNING_KEY_FILE", "")
	var logged bytes.Buffer
	if got, err := signingKey(config{uri: "mongodb://x"}, true, zerolog.New(&logged)); err != nil || got != nil || !strings.Contains(logged.String(), "refuse") {
		t.Errorf("MongoDB without a secret: %q %v, log %s", got, err, logged.String())
	}
}
