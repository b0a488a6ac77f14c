package backup

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Where backups go: a directory, or an S3 bucket and prefix (s3.go). Every
// file of a backup or a segment is named by a location: a path, or
// s3://bucket/key. A directory's files are written under a temporary name
// and renamed once synced; an object store has no rename, but an object
// appears whole or not at all, so on both the manifest (and a segment's
// description) written last is what makes a backup (a segment) complete.

// target is one kind of place backups are written to.
type target interface {
	// create writes loc with what fill writes and returns its size and
	// SHA-256; a failed create leaves nothing at loc.
	create(ctx context.Context, loc string, fill func(io.Writer) error) (int64, string, error)
	// open reads loc; an error wraps fs.ErrNotExist when there is none.
	open(ctx context.Context, loc string) (io.ReadCloser, error)
	// list names what is under loc: the files and folders directly under
	// it, or with all every file below it, as slash paths relative to loc,
	// sorted; none when loc does not exist.
	list(ctx context.Context, loc string, all bool) ([]string, error)
	// remove removes the file loc; removeAll everything under loc.
	remove(ctx context.Context, loc string) error
	removeAll(ctx context.Context, loc string) error
}

// IsS3 reports whether loc names an S3 bucket (s3://bucket/prefix).
func IsS3(loc string) bool { return strings.HasPrefix(loc, s3Scheme) }

// targetFor is the target holding loc.
func targetFor(loc string) (target, error) {
	if IsS3(loc) {
		return s3For(loc)
	}
	return dirTarget{}, nil
}

// join is loc with the slash-separated elements added.
func join(loc string, elem ...string) string {
	if IsS3(loc) {
		rest := path.Join(append([]string{strings.TrimPrefix(loc, s3Scheme)}, elem...)...)
		return s3Scheme + rest
	}
	for i := range elem {
		elem[i] = filepath.FromSlash(elem[i])
	}
	return filepath.Join(append([]string{loc}, elem...)...)
}

// parent and base split loc at its last element.
func parent(loc string) string {
	if IsS3(loc) {
		return s3Scheme + path.Dir(strings.TrimSuffix(strings.TrimPrefix(loc, s3Scheme), "/"))
	}
	return filepath.Dir(loc)
}

func base(loc string) string {
	if IsS3(loc) {
		return path.Base(strings.TrimPrefix(loc, s3Scheme))
	}
	return filepath.Base(loc)
}

// rel is loc relative to under, with slashes.
func rel(under, loc string) string {
	if IsS3(loc) {
		return strings.TrimPrefix(strings.TrimPrefix(loc, strings.TrimSuffix(under, "/")), "/")
	}
	r, _ := filepath.Rel(under, loc)
	return filepath.ToSlash(r)
}

// readAll reads the whole of loc.
func readAll(ctx context.Context, loc string) ([]byte, error) {
	t, err := targetFor(loc)
	if err != nil {
		return nil, err
	}
	r, err := t.open(ctx, loc)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", loc, err)
	}
	return b, nil
}

// exists reports whether the file loc exists.
func exists(ctx context.Context, loc string) (bool, error) {
	t, err := targetFor(loc)
	if err != nil {
		return false, err
	}
	r, err := t.open(ctx, loc)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	r.Close()
	return true, nil
}

// listAt is targetFor(loc).list(loc).
func listAt(ctx context.Context, loc string, all bool) ([]string, error) {
	t, err := targetFor(loc)
	if err != nil {
		return nil, err
	}
	return t.list(ctx, loc, all)
}

func removeAt(ctx context.Context, loc string) error {
	t, err := targetFor(loc)
	if err != nil {
		return err
	}
	return t.remove(ctx, loc)
}

func removeAllAt(ctx context.Context, loc string) error {
	t, err := targetFor(loc)
	if err != nil {
		return err
	}
	return t.removeAll(ctx, loc)
}

// dirTarget is a directory of the local filesystem.
type dirTarget struct{}

func (dirTarget) create(_ context.Context, loc string, fill func(io.Writer) error) (int64, string, error) {
	if err := os.MkdirAll(filepath.Dir(loc), 0o700); err != nil {
		return 0, "", err
	}
	tmp := loc + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, "", err
	}
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	err = fill(cw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, loc)
	}
	if err != nil {
		os.Remove(tmp)
		return 0, "", err
	}
	return cw.n, hexSum(h), nil
}

func (dirTarget) open(_ context.Context, loc string) (io.ReadCloser, error) { return os.Open(loc) }

func (dirTarget) list(_ context.Context, loc string, all bool) ([]string, error) {
	var out []string
	if !all {
		des, err := os.ReadDir(loc)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		for _, de := range des {
			out = append(out, de.Name())
		}
		return out, err
	}
	err := filepath.WalkDir(loc, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) && p == loc {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() {
			return err
		}
		out = append(out, rel(loc, p))
		return nil
	})
	slices.Sort(out)
	return out, err
}

func (dirTarget) remove(_ context.Context, loc string) error {
	if err := os.Remove(loc); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (dirTarget) removeAll(_ context.Context, loc string) error { return os.RemoveAll(loc) }
