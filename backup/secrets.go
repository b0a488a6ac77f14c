package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"filippo.io/age"
)

// A backup taken with secrets carries the data directory's key files (the
// media URL signing secret, the ACME account and certificates) in one file,
// encrypted with a passphrase (age's scrypt recipient): whoever holds the
// backup without the passphrase reads none of them.

// SecretsFile is the encrypted key files' name in a backup directory.
const SecretsFile = "secrets.age"

// MinPassphrase is the shortest passphrase accepted.
const MinPassphrase = 12

// Secrets says which key files a backup carries: those of the data
// directory Dir, encrypted with Passphrase.
type Secrets struct {
	Dir        string
	Passphrase string
}

// keyFiles are the data directory's secrets, relative to it: the media URL
// signing secret, the key the team mailbox's refresh token is sealed under,
// and everything under acme/.
func keyFiles(dir string) ([]string, error) {
	var out []string
	for _, name := range []string{"media-url.key", "mailbox.key"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			out = append(out, name)
		}
	}
	err := filepath.WalkDir(filepath.Join(dir, "acme"), func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	slices.Sort(out)
	return out, err
}

// sealSecrets writes the key files of s.Dir, encrypted, as SecretsFile in
// the backup directory dir; it returns the file and the names it holds.
func sealSecrets(ctx context.Context, dir string, s Secrets) (File, []string, error) {
	if len(s.Passphrase) < MinPassphrase {
		return File{}, nil, fmt.Errorf("the passphrase is %d characters; give at least %d", len(s.Passphrase), MinPassphrase)
	}
	names, err := keyFiles(s.Dir)
	if err != nil {
		return File{}, nil, err
	}
	if len(names) == 0 {
		return File{}, nil, fmt.Errorf("--with-secrets: the data directory %s holds no key file", s.Dir)
	}
	files := map[string][]byte{}
	for _, n := range names {
		if files[n], err = os.ReadFile(filepath.Join(s.Dir, filepath.FromSlash(n))); err != nil {
			return File{}, nil, err
		}
	}
	plain, err := json.Marshal(files)
	if err != nil {
		return File{}, nil, err
	}
	r, err := age.NewScryptRecipient(s.Passphrase)
	if err != nil {
		return File{}, nil, err
	}
	f, err := writeRaw(ctx, join(dir, SecretsFile), dir, func(w io.Writer) error {
		enc, err := age.Encrypt(w, r)
		if err != nil {
			return err
		}
		if _, err := enc.Write(plain); err != nil {
			return err
		}
		return enc.Close()
	})
	clear(plain)
	return f, names, err
}

// KeyFiles are a backup's key files, decrypted.
type KeyFiles map[string][]byte

// OpenSecrets decrypts the key files of the backup in dir with passphrase.
func OpenSecrets(dir, passphrase string) (KeyFiles, error) {
	path := join(dir, SecretsFile)
	sealed, err := readAll(context.Background(), path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: the backup was taken without --with-secrets", dir)
	}
	if err != nil {
		return nil, err
	}
	id, err := age.NewScryptIdentity(passphrase)
	if err != nil {
		return nil, err
	}
	r, err := age.Decrypt(bytes.NewReader(sealed), id)
	var wrong *age.NoIdentityMatchError
	if errors.As(err, &wrong) {
		return nil, fmt.Errorf("%s: wrong passphrase", path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	plain, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var files KeyFiles
	if err := json.Unmarshal(plain, &files); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for name := range files {
		if !filepath.IsLocal(filepath.FromSlash(name)) {
			return nil, fmt.Errorf("%s: names a file outside the data directory: %q", path, name)
		}
	}
	return files, nil
}

// WriteTo writes the key files into the data directory into (mode 0600,
// over files of the same names) and returns their names.
func (k KeyFiles) WriteTo(into string) ([]string, error) {
	var names []string
	for name, b := range k {
		target := filepath.Join(into, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(target, b, 0o600); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}
