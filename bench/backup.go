package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"

	"outreach/backup"
	"outreach/embedded"
	"outreach/repo"
)

// BackupRun is what a growth size measures of backups: a backup of the
// seeded store while it serves, how long writers waited while its counter
// was fixed, and a restore of it into an empty store (then verified).
type BackupRun struct {
	Backup, Paused, Restore time.Duration
	// RestoreVerify is the part of Restore its verify took.
	RestoreVerify time.Duration
	Documents     int64
}

// measureBackup backs up the target's store into a scratch directory and
// restores it into an empty store of the same kind.
func measureBackup(ctx context.Context, t *target) (*BackupRun, error) {
	to, err := os.MkdirTemp("", "outreach-bench-backup-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(to)
	start := time.Now()
	m, err := backup.Create(ctx, t.store.Engine, to, backup.Options{ServiceVersion: "bench"})
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	run := &BackupRun{Backup: time.Since(start), Paused: time.Duration(m.WritesPausedMS * float64(time.Millisecond))}
	for _, c := range m.Collections {
		run.Documents += c.Count
	}
	uri, db := t.uri, t.db+"_restored"
	opts := repo.Options{Logger: zerolog.Nop(), WriteMode: t.opts.WriteMode}
	if uri == "" {
		dir, err := os.MkdirTemp("", "outreach-bench-restore-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		es, err := embedded.Start(ctx, embedded.Options{Dir: dir})
		if err != nil {
			return nil, err
		}
		defer es.Close()
		uri, opts.Exclusive, opts.PrepareStore = es.URI, true, es.IndexIDs
	}
	start = time.Now()
	store, err := repo.Open(ctx, uri, db, opts)
	if err != nil {
		return nil, err
	}
	defer store.Close(context.Background())
	res, err := backup.Restore(ctx, store.Engine, to, backup.Target{})
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	run.Restore, run.RestoreVerify = time.Since(start), res.Took.Verify
	return run, nil
}

// The backup targets: at the largest size (the is 100,000 notes).
const (
	backupGoal      = 60 * time.Second
	pauseGoal       = 200 * time.Millisecond
	restoreRatioMax = 2.0
)

// backupChecks are the backup targets at size at.
func backupChecks(at string, b *BackupRun) []Check {
	if b == nil {
		return nil
	}
	ratio := b.Restore.Seconds() / max(b.Backup.Seconds(), 1e-9)
	return []Check{
		{at, fmt.Sprintf("a backup while serving ≤ 60 s (s; %d documents)", b.Documents), b.Backup.Seconds(), backupGoal.Seconds(), b.Backup <= backupGoal},
		{at, "writes paused while the backup's counter is fixed ≤ 200 ms (ms)", float64(b.Paused) / float64(time.Millisecond), float64(pauseGoal / time.Millisecond), b.Paused <= pauseGoal},
		{at, fmt.Sprintf("a restore with its verify ≤ 2× the backup (ratio; %v ÷ %v)", b.Restore.Round(time.Millisecond), b.Backup.Round(time.Millisecond)), ratio, restoreRatioMax, ratio <= restoreRatioMax},
	}
}
