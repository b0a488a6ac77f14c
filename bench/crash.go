package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// crashChanges is how many changes the bench writes after the last
// checkpoint before it stops the service as a crash would: below what the
// service lets accumulate before it writes a checkpoint while running (1,000
// seq numbers, or a minute), so the start after it follows that many
// change entries from the checkpoint.
const crashChanges = 900

// crash stops the service and its store as a killed process would leave
// them: no clean stop, so no checkpoint is written and the last write
// intent stays as it stands; the embedded store's files are closed as the
// process's end would close them.
func (t *target) crash(ctx context.Context) {
	if t.svc != nil {
		t.svc.Close()
		t.svc = nil
	}
	if t.store != nil {
		t.store.Abandon(ctx)
		t.store = nil
	}
	if t.es != nil {
		t.es.Close()
		t.es = nil
	}
}

// measureCrash writes crashChanges notes (as many as were seeded, when
// fewer) through the write path (8 writers), crashes the service, starts
// it again and times that start (embedded store only: elsewhere the
// service keeps no indexes).
func measureCrash(ctx context.Context, t *target, notes int, rep *Report, progress func(string, ...any)) error {
	if t.dir == "" {
		return nil
	}
	n := min(crashChanges, notes)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n && errs[w] == nil; i += 8 {
				_, errs[w] = t.store.Fixture(ctx, "notes", map[string]any{"type": "phone_call", "title": fmt.Sprintf("Written before the crash %d", i),
					"content": "A change after the last checkpoint.", "occurred_at": time.Now().UTC(), "links": []map[string]any{}})
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("writes before the crash: %w", err)
		}
	}
	t.crash(ctx)
	start := time.Now()
	if err := t.open(ctx); err != nil {
		return fmt.Errorf("start after a crash: %w", err)
	}
	rep.CrashTime = time.Since(start) - t.indexTime
	rep.CrashIndexTime = t.indexTime
	rep.CrashChanges = n
	progress("started after a crash (%d changes after the last checkpoint) in %v; its own indexes were ready %v later\n",
		n, rep.CrashTime.Round(time.Millisecond), rep.CrashIndexTime.Round(time.Millisecond))
	return nil
}
