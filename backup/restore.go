package backup

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/ledger"
)

// Target is the moment a restore stops at: a change counter, or a time
// (the changes written up to it); zero for the latest there is.
type Target struct {
	Counter int64
	Until   time.Time
}

// RestoreResult says what a restore did.
type RestoreResult struct {
	Backup   string `json:"backup"`
	Base     int64  `json:"base_counter"`
	Counter  int64  `json:"counter"`
	Replayed int    `json:"replayed_changes"`
	// Documents counts the documents restored per collection.
	Documents map[string]int64 `json:"documents"`
	// Took is how long each step took: checking the backup, writing its
	// documents, replaying the shipped changes, verifying the store.
	Took struct {
		Check, Documents, Replay, Verify time.Duration
	} `json:"took"`
}

// Plan chooses the backup a restore from source starts from: source itself
// when it is a backup, else the latest complete backup of the target
// directory source at or before the moment asked. It returns the backup's
// directory and the target directory holding the shipped changes.
func Plan(source string, t Target) (string, string, error) {
	if ok, err := exists(context.Background(), join(source, ManifestFile)); err != nil {
		return "", "", fmt.Errorf("restore source %s: %w", source, err)
	} else if ok {
		return source, parent(source), nil
	}
	list, err := List(source)
	if err != nil {
		return "", "", fmt.Errorf("restore source %s: %w", source, err)
	}
	best := ""
	for _, e := range list {
		if !e.Complete {
			continue
		}
		if t.Counter > 0 && e.Counter > t.Counter || !t.Until.IsZero() && e.FixedAt.After(t.Until) {
			continue
		}
		best = e.Dir
	}
	if best == "" {
		return "", "", fmt.Errorf("restore source %s: no complete backup at or before the moment asked", source)
	}
	return best, source, nil
}

// Restore restores the backup at source (a backup, or a target holding
// backups and shipped changes) into the empty store of eng, up to the
// moment t: the backup's documents, then the shipped changes after its
// counter up to t, each applied as its after state; then the service's
// indexes are rebuilt and the store verified. Until it is verified the
// store carries a marker that Open refuses.
func Restore(ctx context.Context, eng *ledger.Engine, source string, t Target) (*RestoreResult, error) {
	// A restore writes and reads whole collections: a bound of its own.
	ctx, cancel := context.WithTimeout(ctx, ledger.WholeReadBound)
	defer cancel()
	dir, chainDir, err := Plan(source, t)
	if err != nil {
		return nil, err
	}
	started := time.Now()
	m, err := Check(dir)
	if err != nil {
		return nil, err
	}
	checked := time.Since(started)
	if m.StoreFormat > ledger.StoreFormat {
		return nil, fmt.Errorf("%s: store format %d is newer than this binary knows (%d): restore with Outreach %s or later", dir, m.StoreFormat, ledger.StoreFormat, m.ServiceVersion)
	}
	if t.Counter > 0 && t.Counter < m.Counter {
		return nil, fmt.Errorf("--counter %d is before the backup's counter %d: restore from an earlier backup", t.Counter, m.Counter)
	}
	var replay []Segment
	segs, err := Segments(chainDir)
	if err != nil {
		return nil, err
	}
	reached := m.Counter
	for _, s := range segs {
		if s.Upto <= m.Counter {
			continue
		}
		if s.After > reached {
			return nil, fmt.Errorf("%s: starts after counter %d, but the backup %s and the segments before reach %d only: the changes between are missing",
				s.Path, s.After, base(dir), reached)
		}
		replay = append(replay, s)
		reached = s.Upto
	}
	if t.Counter > reached {
		return nil, fmt.Errorf("--counter %d: the backup and the changes shipped after it reach counter %d only", t.Counter, reached)
	}
	res := &RestoreResult{Backup: dir, Base: m.Counter, Documents: map[string]int64{}}
	res.Took.Check = checked
	step := time.Now()
	if err := eng.BeginRestore(ctx, dir, m.Counter); err != nil {
		return nil, err
	}
	for _, c := range m.Collections {
		path := join(dir, dataPath(m.Database, c.Name))
		var batch []bson.Raw
		size := 0
		flush := func() error {
			err := eng.RestoreDocs(ctx, c.Name, batch)
			batch, size = batch[:0], 0
			return err
		}
		err := readDocs(path, func(raw bson.Raw) error {
			batch = append(batch, raw)
			size += len(raw)
			res.Documents[c.Name]++
			if len(batch) >= 500 || size >= 4<<20 {
				return flush()
			}
			return nil
		})
		if err == nil {
			err = flush()
		}
		if err != nil {
			return res, fmt.Errorf("restoring %s: %w", c.Name, err)
		}
	}
	res.Took.Documents, step = time.Since(step), time.Now()
	counter := m.Counter
	for _, s := range replay {
		if err := restoreFiles(ctx, eng, s); err != nil {
			return res, err
		}
		done := false
		err := checkSegmentEntries(s, func(e audit.Entry) error {
			if done || e.Seq <= m.Counter {
				return nil
			}
			if t.Counter > 0 && e.Seq > t.Counter || !t.Until.IsZero() && e.At.After(t.Until) {
				done = true
				return nil
			}
			if err := eng.ReplayChange(ctx, e); err != nil {
				return err
			}
			res.Replayed++
			counter = e.Seq
			return nil
		})
		if err != nil {
			return res, err
		}
		if done {
			break
		}
		if t.Until.IsZero() && t.Counter == 0 {
			counter = s.Upto
		}
	}
	if t.Counter > 0 {
		counter = t.Counter
	}
	res.Counter = counter
	if err := eng.SetRestoredCounter(ctx, counter); err != nil {
		return res, err
	}
	res.Took.Replay, step = time.Since(step), time.Now()
	v, err := eng.VerifyReport(ctx)
	if err != nil {
		return res, fmt.Errorf("verify after the restore: %w", err)
	}
	if len(v.Violations) > 0 {
		return res, fmt.Errorf("verify after the restore: %d violations, the first: %s/%s: %s (the store stays marked incomplete)",
			len(v.Violations), v.Violations[0].Collection, v.Violations[0].RecordID, v.Violations[0].Problem)
	}
	res.Took.Verify = time.Since(step)
	if err := eng.CompleteRestore(ctx, counter); err != nil {
		return res, err
	}
	return res, nil
}

// restoreFiles restores the media files shipped with segment s that the
// store does not hold yet (segments may overlap in the files they carry).
func restoreFiles(ctx context.Context, eng *ledger.Engine, s Segment) error {
	if s.FilesPath == "" {
		return nil
	}
	var files, chunks []bson.Raw
	fresh := map[string]bool{}
	err := readDocs(s.FilesPath, func(raw bson.Raw) error {
		if raw.Lookup("files_id").Type != 0 { // a chunk
			if fresh[raw.Lookup("files_id").String()] {
				chunks = append(chunks, raw)
			}
			return eng.RestoreDocs(ctx, ledger.CollChunks, flushIf(&chunks, 64))
		}
		id := raw.Lookup("_id")
		n, err := eng.Collection(ledger.CollFiles).CountDocuments(ctx, bson.M{"_id": id})
		if err != nil {
			return err
		}
		if n == 0 {
			fresh[id.String()] = true
			files = append(files, raw)
		}
		return nil
	})
	if err == nil {
		err = eng.RestoreDocs(ctx, ledger.CollChunks, chunks)
	}
	if err == nil {
		err = eng.RestoreDocs(ctx, ledger.CollFiles, files)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", s.FilesPath, err)
	}
	return nil
}

// flushIf returns the documents of *batch and empties it once it holds n,
// else nothing.
func flushIf(batch *[]bson.Raw, n int) []bson.Raw {
	if len(*batch) < n {
		return nil
	}
	out := *batch
	*batch = nil
	return out
}
