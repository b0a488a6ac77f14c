package mailauth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// KeyFileName is the mailbox key's file in the embedded store's data
// directory.
const KeyFileName = "mailbox.key"

// Key seals the refresh token. It is never in the store: a file of mode
// 0600 in the embedded store's data directory, or the operator's secret
// file on MongoDB (OUTREACH_MAILBOX_KEY_FILE).
type Key struct{ aead cipher.AEAD }

// sealPrefix names the sealing scheme of a stored token.
const sealPrefix = "v1:"

// Seal seals token for mailbox address (the address is bound to it: a
// sealed token copied to another mailbox's record does not open).
func (k *Key) Seal(address, token string) string {
	nonce := make([]byte, k.aead.NonceSize())
	_, _ = rand.Read(nonce)
	out := k.aead.Seal(nonce, nonce, []byte(token), []byte(strings.ToLower(address)))
	return sealPrefix + base64.RawStdEncoding.EncodeToString(out)
}

// Open opens a sealed token of mailbox address.
func (k *Key) Open(address, sealed string) (string, error) {
	raw, err := base64.RawStdEncoding.DecodeString(strings.TrimPrefix(sealed, sealPrefix))
	if err != nil || !strings.HasPrefix(sealed, sealPrefix) || len(raw) < k.aead.NonceSize() {
		return "", errors.New("the stored refresh token is not sealed by this service")
	}
	n := k.aead.NonceSize()
	pt, err := k.aead.Open(nil, raw[:n], raw[n:], []byte(strings.ToLower(address)))
	if err != nil {
		return "", errors.New("the stored refresh token does not open with this mailbox key: the key file was replaced; connect the mailbox again")
	}
	return string(pt), nil
}

func newKey(secret []byte) (*Key, error) {
	sum := sha256.Sum256(secret)
	b, err := aes.NewCipher(sum[:])
	if err != nil {
		return nil, err
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		return nil, err
	}
	return &Key{aead: g}, nil
}

// MinKeyBytes is the least secret a key file holds.
const MinKeyBytes = 32

// ReadKey reads the mailbox key from path, which only its owner may read
// (mode 0600 or stricter), holding at least MinKeyBytes.
func ReadKey(path string) (*Key, error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("the mailbox key file %s is missing: the refresh token cannot be opened without it (restore the file, or connect the mailbox again after making a new one: openssl rand -hex 32 > %s; chmod 600 %s)", path, path, path)
	}
	if err != nil {
		return nil, fmt.Errorf("the mailbox key file: %w", err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the mailbox key file %s is readable by others (mode %04o): chmod 600 %s", path, info.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the mailbox key file: %w", err)
	}
	secret := []byte(strings.TrimSpace(string(b)))
	if len(secret) < MinKeyBytes {
		return nil, fmt.Errorf("the mailbox key file %s holds %d bytes; it needs at least %d (openssl rand -hex 32 > %s)", path, len(secret), MinKeyBytes, path)
	}
	return newKey(secret)
}

// MakeKey creates a new key file at path (mode 0600) and reads it; an
// existing file is read instead.
func MakeKey(path string) (*Key, error) {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return ReadKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("make the mailbox key file: %w", err)
	}
	if _, err := f.WriteString(hex.EncodeToString(raw) + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("make the mailbox key file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("make the mailbox key file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return ReadKey(path)
}
