package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"outreach/repo/pipeline"
)

// signingKeyFile is the embedded store's URL-signing secret, in its data
// directory.
const signingKeyFile = "media-url.key"

// signingKey finds the secret signed media URLs are made with. It is never
// in the store (every reader of the database would see it): the operator's
// OUTREACH_MEDIA_SIGNING_KEY_FILE or OUTREACH_MEDIA_SIGNING_KEY; else, on
// the embedded store, a file in its data directory made at first start
// (mode 0600, like the directory only its owner may read). On MongoDB
// without either, nil: the store makes one for this process, and URLs it
// signs are refused by other instances, which the server warns about.
func signingKey(cfg config, serving bool, log zerolog.Logger) ([]byte, error) {
	if path := os.Getenv("OUTREACH_MEDIA_SIGNING_KEY_FILE"); path != "" {
		key, err := readSigningKey(path)
		if err != nil {
			return nil, fmt.Errorf("OUTREACH_MEDIA_SIGNING_KEY_FILE: %w", err)
		}
		return key, nil
	}
	if v := os.Getenv("OUTREACH_MEDIA_SIGNING_KEY"); v != "" {
		if len(v) < pipeline.MinSigningKey {
			return nil, fmt.Errorf("OUTREACH_MEDIA_SIGNING_KEY is %d characters; give at least %d (e.g. openssl rand -hex 32)", len(v), pipeline.MinSigningKey)
		}
		return []byte(v), nil
	}
	if cfg.uri != "" {
		if serving {
			log.Warn().Msg("media URL signing: no OUTREACH_MEDIA_SIGNING_KEY_FILE or OUTREACH_MEDIA_SIGNING_KEY, so this process signs with a key of its own: " +
				"other instances on the same database refuse its upload and download URLs, and its URLs stop working when it restarts")
		}
		return nil, nil
	}
	if cfg.data == "" {
		return nil, nil
	}
	return dataDirSigningKey(cfg.data)
}

// dataDirSigningKey reads the embedded store's signing secret, making it
// on first use.
func dataDirSigningKey(dir string) ([]byte, error) {
	path := filepath.Join(dir, signingKeyFile)
	key, err := readSigningKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	raw := make([]byte, pipeline.MinSigningKey)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return readSigningKey(path) // made meanwhile by another start
	}
	if err != nil {
		return nil, fmt.Errorf("media URL signing secret: %w", err)
	}
	text := hex.EncodeToString(raw) + "\n"
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("media URL signing secret: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("media URL signing secret: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("media URL signing secret: %w", err)
	}
	return bytes.TrimSpace([]byte(text)), nil
}

// readSigningKey reads a signing secret from a file only its owner may
// read: its content less surrounding white space, at least
// pipeline.MinSigningKey bytes.
func readSigningKey(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by others (mode %04o): chmod 600 it", path, info.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key := bytes.TrimSpace(b)
	if len(key) < pipeline.MinSigningKey {
		return nil, fmt.Errorf("%s holds %d bytes; a signing secret needs at least %d (e.g. openssl rand -hex 32 > %s)", path, len(key), pipeline.MinSigningKey, path)
	}
	return key, nil
}
