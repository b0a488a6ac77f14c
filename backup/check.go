package backup

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Check verifies the backup in dir: the manifest, every file's size and
// SHA-256, that no file is missing or added, and that every collection's
// file decodes as BSON documents to the manifest's count. An error names
// the file and what is wrong with it.
func Check(dir string) (*Manifest, error) {
	m, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	listed := map[string]File{}
	for _, f := range m.Files {
		listed[f.Path] = f
	}
	names, err := listAt(context.Background(), dir, true)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if _, ok := listed[name]; !ok && name != ManifestFile {
			return nil, fmt.Errorf("%s: not in the manifest (a file added, or left by a copy that did not finish)", join(dir, name))
		}
	}
	for _, f := range m.Files {
		if err := checkFile(join(dir, f.Path), f); err != nil {
			return nil, err
		}
	}
	for _, c := range m.Collections {
		path := join(dir, dataPath(m.Database, c.Name))
		if _, ok := listed[dataPath(m.Database, c.Name)]; !ok {
			return nil, fmt.Errorf("%s: the manifest lists collection %s but not its file", join(dir, ManifestFile), c.Name)
		}
		n := int64(0)
		if err := readDocs(path, func(bson.Raw) error { n++; return nil }); err != nil {
			return nil, err
		}
		if n != c.Count {
			return nil, fmt.Errorf("%s: %d documents, the manifest says %d", path, n, c.Count)
		}
	}
	return m, nil
}

// checkFile compares a file's size and SHA-256 with the manifest's.
func checkFile(path string, want File) error {
	f, err := openAt(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: missing (the manifest lists it)", path)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if n != want.Bytes {
		return fmt.Errorf("%s: %d bytes, the manifest says %d (truncated or appended to)", path, n, want.Bytes)
	}
	if got := hexSum(h); got != want.SHA256 {
		return fmt.Errorf("%s: SHA-256 %s, the manifest says %s (altered, or swapped with another file)", path, got, want.SHA256)
	}
	return nil
}

// openAt opens path on its target.
func openAt(path string) (io.ReadCloser, error) {
	t, err := targetFor(path)
	if err != nil {
		return nil, err
	}
	return t.open(context.Background(), path)
}

// readDocs calls fn with each BSON document of a .bson.gz file, in order.
func readDocs(path string, fn func(bson.Raw) error) error {
	f, err := openAt(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return fmt.Errorf("%s: not gzip: %w", path, err)
	}
	if err := readBSON(zr, fn); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// readBSON reads consecutive BSON documents (mongodump's .bson) from r.
func readBSON(r io.Reader, fn func(bson.Raw) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	for i := 0; ; i++ {
		var head [4]byte
		if _, err := io.ReadFull(br, head[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("document %d: %w", i+1, err)
		}
		size := int(binary.LittleEndian.Uint32(head[:]))
		if size < 5 || size > 48<<20 {
			return fmt.Errorf("document %d: length %d is not a BSON document's", i+1, size)
		}
		doc := make([]byte, size)
		copy(doc, head[:])
		if _, err := io.ReadFull(br, doc[4:]); err != nil {
			return fmt.Errorf("document %d: %w (truncated)", i+1, err)
		}
		raw := bson.Raw(doc)
		if err := raw.Validate(); err != nil {
			return fmt.Errorf("document %d: %w", i+1, err)
		}
		if err := fn(raw); err != nil {
			return err
		}
	}
}

// CheckAll verifies every backup in the target directory to and its chain
// of shipped changes; it returns one line per backup and segment checked.
func CheckAll(to string) ([]string, error) {
	if ok, err := exists(context.Background(), join(to, ManifestFile)); err != nil {
		return nil, err
	} else if ok {
		m, err := Check(to)
		if err != nil {
			return nil, err
		}
		return []string{fmt.Sprintf("%s: ok, counter %d, %d collections", to, m.Counter, len(m.Collections))}, nil
	}
	if backupNameRE.MatchString(base(to)) {
		_, err := readManifest(to)
		return nil, err
	}
	list, err := List(to)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list {
		if !e.Complete {
			out = append(out, fmt.Sprintf("%s: unfinished (%s): not a backup; the next backup removes it", e.Dir, e.Problem))
			continue
		}
		m, err := Check(e.Dir)
		if err != nil {
			return out, err
		}
		out = append(out, fmt.Sprintf("%s: ok, counter %d, %d collections", e.Dir, m.Counter, len(m.Collections)))
	}
	segs, err := Segments(to)
	if err != nil {
		return out, err
	}
	for _, s := range segs {
		out = append(out, fmt.Sprintf("%s: ok, changes after %d up to %d (%d entries)", s.Path, s.After, s.Upto, s.Count))
	}
	if len(list) == 0 && len(segs) == 0 {
		return nil, fmt.Errorf("%s: no backup here", to)
	}
	if len(segs) > 0 {
		// The chain must start at a backup: from it, the segments replay.
		ok := false
		for _, e := range list {
			ok = ok || e.Complete && e.Counter >= segs[0].After && e.Counter <= segs[len(segs)-1].Upto
		}
		if !ok {
			return out, fmt.Errorf("%s: the shipped changes start after counter %d, and no backup here is at a counter from there on: the changes before it are missing",
				segs[0].Path, segs[0].After)
		}
	}
	return out, nil
}
