// Package backup copies the store while it serves, checks copies, and
// restores one into an empty store; it also ships the change entries
// written after the last copy (segments.go).
//
// A backup is a directory in mongodump's layout (one database directory
// holding <collection>.bson.gz, the documents as consecutive BSON, and
// <collection>.metadata.json.gz, the collection's indexes), so MongoDB's
// own tools and any BSON reader can open it, plus manifest.json: the
// service and store format versions, the change counter the copy stands
// at, the count of every collection and the SHA-256 of every file. Every
// file is written under a temporary name and renamed; the manifest is
// written last, so a directory without one is not a backup.
//
// The copy is consistent at one change counter (ledger.Engine.FixPoint):
// writers wait only while the counter is fixed, and each record changed
// after it is copied as the change log says it stood then. The store is
// read through the engine's read surface and a restore writes through the
// engine's restore writes: the package calls no driver write.
package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// FormatName names the layout in every manifest.
const FormatName = "outreach-backup"

// FormatVersion is the version of the layout this binary writes and reads.
const FormatVersion = 1

// ManifestFile is the manifest's name in a backup directory.
const ManifestFile = "manifest.json"

// Manifest describes one backup.
type Manifest struct {
	Format         string    `json:"format"`
	FormatVersion  int       `json:"format_version"`
	ServiceVersion string    `json:"service_version"`
	StoreFormat    int       `json:"store_format"`
	Database       string    `json:"database"`
	Counter        int64     `json:"counter"`
	FixedAt        time.Time `json:"fixed_at"`
	FinishedAt     time.Time `json:"finished_at"`
	// WritesPausedMS is how long writers waited while the counter was fixed.
	WritesPausedMS float64      `json:"writes_paused_ms"`
	Collections    []Collection `json:"collections"`
	Files          []File       `json:"files"`
	// LeftOut says what the backup does not hold and why; RestoreNeeds what
	// a restore must be given besides it.
	LeftOut      []string `json:"left_out"`
	RestoreNeeds []string `json:"restore_needs"`
	// Secrets names the key files secrets.age holds, encrypted (taken
	// with --with-secrets).
	Secrets []string `json:"secrets,omitempty"`
}

// Collection is one collection of a backup: its documents' file and count.
type Collection struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// File is one file of a backup, by its path under the backup directory.
type File struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// dataPath and metaPath are a collection's files under the backup directory.
func dataPath(db, coll string) string { return db + "/" + coll + ".bson.gz" }
func metaPath(db, coll string) string { return db + "/" + coll + ".metadata.json.gz" }

// backupName is a backup directory's name: when its counter was fixed, and
// the counter, so that names sort by time.
func backupName(at time.Time, counter int64) string {
	return fmt.Sprintf("backup-%s-%012d", at.UTC().Format("20060102T150405.000Z"), counter)
}

// DirIn is the backup's directory under the target to it was written to.
func (m *Manifest) DirIn(to string) string { return join(to, backupName(m.FixedAt, m.Counter)) }

var backupNameRE = regexp.MustCompile(`^backup-\d{8}T\d{6}\.\d{3}Z-(\d{12,})$`)

// readManifest reads dir's manifest and checks that this binary reads its
// format.
func readManifest(dir string) (*Manifest, error) {
	raw, err := readAll(context.Background(), join(dir, ManifestFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: no %s: not a backup, or one that did not finish", dir, ManifestFile)
	}
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", join(dir, ManifestFile), err)
	}
	if m.Format != FormatName {
		return nil, fmt.Errorf("%s: format %q, want %q", join(dir, ManifestFile), m.Format, FormatName)
	}
	if m.FormatVersion > FormatVersion {
		return nil, fmt.Errorf("%s: backup format %d is newer than this binary reads (%d): restore it with the Outreach version that wrote it (%s) or later",
			join(dir, ManifestFile), m.FormatVersion, FormatVersion, m.ServiceVersion)
	}
	return &m, nil
}

// Entry is a backup found in a target directory.
type Entry struct {
	Dir      string    `json:"dir"`
	Counter  int64     `json:"counter"`
	FixedAt  time.Time `json:"fixed_at"`
	Complete bool      `json:"complete"`
	Problem  string    `json:"problem,omitempty"`
	Manifest *Manifest `json:"-"`
}

// List returns the backups in the target to (a directory, or an S3 bucket
// and prefix), oldest first: the complete ones, and the directories a
// stopped backup left (Complete false).
func List(to string) ([]Entry, error) {
	names, err := listAt(context.Background(), to, false)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, name := range names {
		sub := backupNameRE.FindStringSubmatch(name)
		if sub == nil {
			continue
		}
		dir := join(to, name)
		e := Entry{Dir: dir}
		e.Counter, _ = strconv.ParseInt(sub[1], 10, 64)
		m, err := readManifest(dir)
		if err != nil {
			e.Problem = err.Error()
		} else {
			e.Complete, e.Manifest, e.Counter, e.FixedAt = true, m, m.Counter, m.FixedAt
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if a.Counter != b.Counter {
			return int(max(-1, min(1, a.Counter-b.Counter)))
		}
		return a.FixedAt.Compare(b.FixedAt)
	})
	return out, nil
}
