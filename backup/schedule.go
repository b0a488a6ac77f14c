package backup

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/ledger"
)

// Schedule configures Run.
type Schedule struct {
	To string
	// Every is the time between backups; Retention which are kept.
	Every     time.Duration
	Retention Retention
	// ShipEvery is the time between segments, ShipChanges the number of
	// changes that ship one sooner.
	ShipEvery   time.Duration
	ShipChanges int64
	Options     Options
	// RetryMin is the first delay after a failure (5s when zero), doubled
	// at each failure after it up to 10 minutes.
	RetryMin time.Duration
	// Notify, when set, is told when the target starts failing (once a
	// streak reaches NotifyAfter failures, 3 when zero) and when it works
	// again after that: the service notifies its admins.
	Notify      func(context.Context, Alert)
	NotifyAfter int
	// Now is the clock thinning is reckoned by (time.Now when nil).
	Now func() time.Time
}

// Alert is what Notify is told.
type Alert struct {
	// Failing is true when the target fails, false when it works again.
	Failing bool
	Target  string
	// Failures is the length of the streak; Since when it began; Error
	// the last failure.
	Failures int
	Since    time.Time
	Error    string
}

// Status is what the scheduler reports.
type Status struct {
	Target         string    `json:"target"`
	LastBackup     string    `json:"last_backup,omitempty"`
	LastBackupAt   time.Time `json:"last_backup_at,omitzero"`
	BackupCounter  int64     `json:"backup_counter"`
	ShippedThrough int64     `json:"shipped_through"`
	LastShippedAt  time.Time `json:"last_shipped_at,omitzero"`
	LastError      string    `json:"last_error,omitempty"`
	LastErrorAt    time.Time `json:"last_error_at,omitzero"`
	Failures       int       `json:"consecutive_failures"`
	NextAttempt    time.Time `json:"next_attempt,omitzero"`
}

// Scheduler takes backups and ships changes on a schedule (serve
// --backup-to). Its work reads the store and writes the target only:
// a failing target is retried with backoff and never stops a write.
type Scheduler struct {
	eng *ledger.Engine
	cfg Schedule
	log zerolog.Logger
	mu  sync.Mutex
	st  Status
}

// NewScheduler returns a scheduler for eng; Run starts it.
func NewScheduler(eng *ledger.Engine, cfg Schedule, log zerolog.Logger) *Scheduler {
	if cfg.ShipEvery <= 0 {
		cfg.ShipEvery = time.Minute
	}
	if cfg.ShipChanges <= 0 {
		cfg.ShipChanges = 1000
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = 5 * time.Second
	}
	if cfg.NotifyAfter <= 0 {
		cfg.NotifyAfter = 3
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Scheduler{eng: eng, cfg: cfg, log: log, st: Status{Target: cfg.To}}
}

// Status returns the scheduler's state.
func (s *Scheduler) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// Run takes a backup when the last is older than Every (or there is none),
// ships the changes after it every ShipEvery, and thins the backups by
// Retention, until ctx ends. A failure is retried with a doubling delay;
// a streak of NotifyAfter failures is notified once, and so is the
// recovery after it.
func (s *Scheduler) Run(ctx context.Context) {
	backoff := time.Duration(0)
	var since time.Time // when the current streak of failures began
	notified := false
	for {
		err := s.step(ctx)
		s.mu.Lock()
		var alert *Alert
		if err != nil && ctx.Err() == nil {
			s.st.Failures++
			s.st.LastError, s.st.LastErrorAt = err.Error(), time.Now().UTC()
			if s.st.Failures == 1 {
				since = s.st.LastErrorAt
			}
			backoff = min(max(2*backoff, s.cfg.RetryMin), 10*time.Minute)
			s.log.Warn().Err(err).Int("failures", s.st.Failures).Dur("retry_in", backoff).Msg("backup: failed; retrying")
			if !notified && s.st.Failures >= s.cfg.NotifyAfter {
				notified = true
				alert = &Alert{Failing: true, Target: s.cfg.To, Failures: s.st.Failures, Since: since, Error: s.st.LastError}
			}
		} else if err == nil {
			if notified {
				alert = &Alert{Target: s.cfg.To, Failures: s.st.Failures, Since: since, Error: s.st.LastError}
				notified = false
			}
			s.st.Failures, backoff = 0, 0
		}
		wait := s.cfg.ShipEvery
		if backoff > 0 {
			wait = backoff
		}
		s.st.NextAttempt = time.Now().Add(wait).UTC()
		s.mu.Unlock()
		if alert != nil && s.cfg.Notify != nil {
			s.cfg.Notify(ctx, *alert)
		}
		if backoff > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		} else {
			s.waitForChanges(ctx, wait)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// pollEvery is how often the scheduler looks at the change counter between
// segments, to ship sooner once ShipChanges changes wait.
const pollEvery = 5 * time.Second

// waitForChanges waits until ShipChanges changes wait to be shipped or d
// has passed.
func (s *Scheduler) waitForChanges(ctx context.Context, d time.Duration) {
	end := time.Now().Add(d)
	for {
		left := time.Until(end)
		if left <= 0 {
			return
		}
		t := time.NewTimer(min(left, pollEvery))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		var c struct {
			Seq int64 `bson:"seq"`
		}
		if s.eng.Collection(ledger.CollCounters).FindOne(ctx, bson.M{"_id": ledger.CollChangeLog}).Decode(&c) == nil {
			if c.Seq-s.Status().ShippedThrough >= s.cfg.ShipChanges {
				return
			}
		}
	}
}

// step takes a backup if one is due, ships the changes since, and thins
// the backups kept.
func (s *Scheduler) step(ctx context.Context) error {
	list, err := List(s.cfg.To)
	if err != nil {
		return err
	}
	var last *Entry
	for i := range list {
		if list[i].Complete {
			last = &list[i]
		}
	}
	if last == nil || s.cfg.Now().Sub(last.FixedAt) >= s.cfg.Every {
		m, err := Create(ctx, s.eng, s.cfg.To, s.cfg.Options)
		if err != nil {
			return fmt.Errorf("backup to %s: %w", s.cfg.To, err)
		}
		s.log.Info().Int64("counter", m.Counter).Float64("writes_paused_ms", m.WritesPausedMS).Msg("backup taken")
		if list, err = List(s.cfg.To); err != nil {
			return err
		}
		last = &list[len(list)-1]
		if err := thin(ctx, s.cfg.To, list, s.cfg.Now(), s.cfg.Retention); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.st.LastBackup, s.st.LastBackupAt, s.st.BackupCounter = base(last.Dir), last.FixedAt, last.Counter
	s.mu.Unlock()
	if err := removeUnfinishedSegments(ctx, s.cfg.To); err != nil {
		return err
	}
	segs, err := Segments(s.cfg.To)
	if err != nil {
		return err
	}
	// The chain goes on from the last segment; the first starts at a backup.
	after := last.Counter
	if n := len(segs); n > 0 {
		after = segs[n-1].Upto
	}
	upto, seg, err := Ship(ctx, s.eng, s.cfg.To, after)
	if err != nil {
		return fmt.Errorf("shipping changes to %s: %w", s.cfg.To, err)
	}
	s.mu.Lock()
	s.st.ShippedThrough = upto
	if seg != nil {
		s.st.LastShippedAt = time.Now().UTC()
	}
	s.mu.Unlock()
	return nil
}
