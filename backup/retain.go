package backup

import (
	"context"
	"time"
)

// Retention says which backups a schedule keeps: the newest Keep, and
// besides them the newest of each of the last KeepDaily days and of each
// of the last KeepWeekly weeks (UTC days, ISO weeks, the current one
// included), as PocketBase and most backup tools thin. Zero in all three
// keeps every backup.
type Retention struct {
	Keep       int
	KeepDaily  int
	KeepWeekly int
}

// retained marks which of the complete backups list (oldest first) r
// keeps at now. The newest is always kept: the shipped changes go on
// from it.
func retained(list []Entry, now time.Time, r Retention) []bool {
	keep := make([]bool, len(list))
	if len(list) == 0 {
		return keep
	}
	if r.Keep <= 0 && r.KeepDaily <= 0 && r.KeepWeekly <= 0 {
		for i := range keep {
			keep[i] = true
		}
		return keep
	}
	for i := max(0, len(list)-r.Keep); i < len(list); i++ {
		keep[i] = true
	}
	keep[len(list)-1] = true
	now = now.UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	// period numbers a backup's day (or week) counting back from now's: 0
	// is today (this week).
	byPeriod := func(n int, period func(time.Time) int) {
		seen := map[int]bool{}
		for i := len(list) - 1; i >= 0; i-- { // newest first: the first seen of a period is its newest
			p := period(list[i].FixedAt.UTC())
			if p < 0 || p >= n || seen[p] {
				continue
			}
			seen[p] = true
			keep[i] = true
		}
	}
	byPeriod(r.KeepDaily, func(at time.Time) int {
		day := time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
		return int(today.Sub(day).Hours()) / 24
	})
	monday := today.AddDate(0, 0, -(int(today.Weekday())+6)%7)
	byPeriod(r.KeepWeekly, func(at time.Time) int {
		day := time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
		d := int(monday.Sub(day).Hours()) / 24 // days before this week's Monday
		if d <= 0 {
			return 0
		}
		return (d + 6) / 7
	})
	return keep
}

// thin removes the complete backups r does not keep at now, and the
// segments wholly before the oldest backup kept.
func thin(ctx context.Context, to string, list []Entry, now time.Time, r Retention) error {
	var complete []Entry
	for _, e := range list {
		if e.Complete {
			complete = append(complete, e)
		}
	}
	keep := retained(complete, now, r)
	oldest := int64(-1)
	for i, e := range complete {
		if keep[i] {
			if oldest < 0 {
				oldest = e.Counter
			}
			continue
		}
		if err := removeAllAt(ctx, e.Dir); err != nil {
			return err
		}
	}
	if oldest < 0 {
		return nil
	}
	segs, err := Segments(to)
	if err != nil {
		return err
	}
	for _, sg := range segs {
		if sg.Upto <= oldest {
			// The description first: a segment without one is not one.
			if err := removeAt(ctx, join(to, ChangesDir, segmentName(sg.After, sg.Upto)+".json")); err != nil {
				return err
			}
			removeAt(ctx, sg.Path)
			if sg.FilesPath != "" {
				removeAt(ctx, sg.FilesPath)
			}
		}
	}
	return nil
}
