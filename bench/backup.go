package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"outreach/audit"
	"outreach/backup"
	"outreach/repo"
	"outreach/repo/directory"
)

// BackupRun is what a growth size measures of backups: a backup of the
// seeded store while it serves, how long writers waited while its counter
// was fixed, and a restore of it into an empty store (then verified).
type BackupRun struct {
	Backup, Paused, Restore time.Duration
	// RestoreVerify is the part of Restore its verify took.
	RestoreVerify time.Duration
	// StartOpen and StartIndex are the first start after the restore
	// (embedded store; zero elsewhere): opening the store and starting the
	// service, then the service's own indexes ready.
	StartOpen, StartIndex time.Duration
	Documents             int64
	// WriteOff and WriteOn are a write's p50 (create an outlet, on the
	// store) with change shipping off and on (a segment every 20 ms into
	// the backup's target, far more often than serve's every minute).
	WriteOff, WriteOn time.Duration
}

// measureBackup backs up the target's store into a scratch directory and
// restores it into an empty store of the same kind.
func measureBackup(ctx context.Context, t *target, servingEnds func() error) (*BackupRun, error) {
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
	if run.WriteOff, run.WriteOn, err = measureShipping(ctx, t, to, m.Counter); err != nil {
		return nil, err
	}
	// The restore is a process of its own in production (outreach
	// restore): here it runs beside the service and its indexes.
	if err := servingEnds(); err != nil {
		return nil, err
	}
	db := t.db + "_restored"
	opts := repo.Options{Logger: zerolog.Nop(), WriteMode: t.opts.WriteMode}
	if t.uri != "" {
		start = time.Now()
		store, err := repo.Open(ctx, t.uri, db, opts)
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
	// The embedded store: restored as `outreach restore` does (with the
	// index checkpoint it writes once complete), then stopped as a crash
	// would (no clean stop writes one) and started again: the first start
	// after a restore.
	dir, err := os.MkdirTemp("", "outreach-bench-restore-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	opts.Exclusive = true
	rt := &target{dir: dir, db: db, opts: opts}
	defer rt.close()
	start = time.Now()
	if err := rt.open(ctx); err != nil {
		return nil, err
	}
	res, err := backup.Restore(ctx, rt.store.Engine, to, backup.Target{})
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	run.Restore, run.RestoreVerify = time.Since(start), res.Took.Verify
	rt.crash(ctx)
	start = time.Now()
	if err := rt.open(ctx); err != nil {
		return nil, fmt.Errorf("start after the restore: %w", err)
	}
	run.StartOpen, run.StartIndex = time.Since(start)-rt.indexTime, rt.indexTime
	return run, nil
}

// measureShipping times writes alternately with change shipping off and
// on (rounds of each, so that drift in the machine's load falls on both),
// and returns both medians.
func measureShipping(ctx context.Context, t *target, to string, after int64) (off, on time.Duration, err error) {
	wctx := audit.WithActor(ctx, repo.SystemActor("bench"))
	write := func(samples *[]time.Duration, n int) error {
		for range n {
			start := time.Now()
			if _, err := directory.Of(t.store).CreateOutlet(wctx, directory.OutletFields{Name: ptr(fmt.Sprint("shipping bench ", len(*samples)))}); err != nil {
				return err
			}
			*samples = append(*samples, time.Since(start))
		}
		return nil
	}
	var offs, ons []time.Duration
	for range 5 {
		if err := write(&offs, 40); err != nil {
			return 0, 0, err
		}
		sctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			var err error
			for sctx.Err() == nil && err == nil {
				after, _, err = backup.Ship(sctx, t.store.Engine, to, after)
				if errors.Is(err, backup.ErrPending) {
					err = nil // a write in flight: the next round ships it
				}
				time.Sleep(20 * time.Millisecond)
			}
			if sctx.Err() != nil {
				err = nil
			}
			done <- err
		}()
		werr := write(&ons, 40)
		stop()
		if err := <-done; err != nil {
			return 0, 0, fmt.Errorf("shipping: %w", err)
		}
		if werr != nil {
			return 0, 0, werr
		}
	}
	return median(offs), median(ons), nil
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

func ptr[T any](v T) *T { return &v }

// The backup targets: at the largest size (the is 100,000 notes).
const (
	backupGoal      = 60 * time.Second
	pauseGoal       = 200 * time.Millisecond
	restoreRatioMax = 2.0
	// shippingCostMax is what change shipping may add to a write's p50.
	shippingCostMax = 0.05
)

// backupChecks are the backup targets at size at.
func backupChecks(at string, b *BackupRun) []Check {
	if b == nil {
		return nil
	}
	ratio := b.Restore.Seconds() / max(b.Backup.Seconds(), 1e-9)
	cost := b.WriteOn.Seconds()/max(b.WriteOff.Seconds(), 1e-9) - 1
	return []Check{
		{at, fmt.Sprintf("a backup while serving ≤ 60 s (s; %d documents)", b.Documents), b.Backup.Seconds(), backupGoal.Seconds(), b.Backup <= backupGoal},
		{at, "writes paused while the backup's counter is fixed ≤ 200 ms (ms)", float64(b.Paused) / float64(time.Millisecond), float64(pauseGoal / time.Millisecond), b.Paused <= pauseGoal},
		{at, fmt.Sprintf("change shipping adds ≤ 5 %% to a write's p50 (ratio; on %v, off %v)", b.WriteOn.Round(time.Microsecond), b.WriteOff.Round(time.Microsecond)),
			cost, shippingCostMax, cost <= shippingCostMax},
		{at, fmt.Sprintf("a restore with its verify ≤ 2× the backup (ratio; %v ÷ %v)", b.Restore.Round(time.Millisecond), b.Backup.Round(time.Millisecond)), ratio, restoreRatioMax, ratio <= restoreRatioMax},
		// Absolute bounds beside the two ratios.
		{at, "a restore with its verify ≤ 120 s (s)", b.Restore.Seconds(), (2 * backupGoal).Seconds(), b.Restore <= 2*backupGoal},
		{at, "a write's p50 with change shipping ≤ 100 ms (ms)", float64(b.WriteOn) / float64(time.Millisecond), float64(readGoal / time.Millisecond), b.WriteOn <= readGoal},
	}
}
