package repo

import (
	"sync"
	"testing"

	"outreach/audit"
)

// TestConcurrentUpdatesLoseNoWrite runs many concurrent read-modify-writes
// of one record: each that reports success must be in the final state, and
// the change log must hold one entry per success with distinct seq numbers.
// (FerretDB's update is a read then a write without a lock; the write path
// must still make the version guard hold.)
func TestConcurrentUpdatesLoseNoWrite(t *testing.T) {
	s, ctx := openTestStore(t) // its cleanup runs Verify
	u, err := createUser(ctx, s, "n", "n@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 4, 8
	var (
		wg sync.WaitGroup
		mu sync.Mutex
		ok int
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				_, err := Modify(ctx, s, CollUsers, u.ID, audit.ActionUpdate, func(u *User) error {
					u.Name += string(rune('a' + w))
					return nil
				})
				if err != nil && !isConflict(err) {
					t.Errorf("modify: %v", err)
					return
				}
				if err == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	got, err := Find[*User](ctx, s, CollUsers, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Name)-1 != ok {
		t.Errorf("%d updates succeeded, the record holds %d of them", ok, len(got.Name)-1)
	}
	p, err := s.ChangeLog(ctx, ChangeFilter{RecordID: u.ID}, 200, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != int64(ok+1) {
		t.Errorf("%d change entries, want %d (create + %d updates)", p.Total, ok+1, ok)
	}
	t.Logf("%d of %d updates succeeded", ok, workers*each)
}
