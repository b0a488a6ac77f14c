package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"outreach/audit"
	"outreach/embedded"
)

// Group commit in the serial protocol (write.go, commitBatch): writers that
// queue while the lock is held are written as one batch. These tests hold
// the lock themselves while they queue writers one after another, so the
// batches are known before they are written.

// queued counts the writers waiting in s's commit queue.
func queued(s *Engine) int {
	s.commits.mu.Lock()
	defer s.commits.mu.Unlock()
	return len(s.commits.waiting)
}

// waitQueued waits until n writers are queued. The bound only ends a test
// that would otherwise hang: a goroutine queues in microseconds, and a
// minute holds under any load.
func waitQueued(s *Engine, n int) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if queued(s) == n {
			return nil
		}
	}
	return fmt.Errorf("%d writers queued, want %d", queued(s), n)
}

// queueWhileLocked holds the serial write lock while it starts each write in
// turn, each queued behind the one before; then it lets them go and returns
// each write's error. The writes are taken in that order.
func queueWhileLocked(t *testing.T, s *Engine, writes ...func() error) []error {
	t.Helper()
	errs := make([]error, len(writes))
	var wg sync.WaitGroup
	s.writeMu.Lock()
	for i, w := range writes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w()
		}()
		if err := waitQueued(s, i+1); err != nil {
			s.writeMu.Unlock()
			wg.Wait()
			t.Fatal(err)
		}
	}
	s.writeMu.Unlock()
	wg.Wait()
	return errs
}

// pointCounter counts the protocol points reached, from any goroutine.
type pointCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func countPoints(s *Engine) *pointCounter {
	c := &pointCounter{n: map[string]int{}}
	s.hook = func(p string) error {
		c.mu.Lock()
		c.n[p]++
		c.mu.Unlock()
		return nil
	}
	return c
}

func (c *pointCounter) get(p string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[p]
}

func createUserMutation(name string) mutation {
	id := uuid.NewString()
	return mutation{Coll: collUsers, ID: id, Action: audit.ActionCreate,
		After: bson.M{"_id": id, "name": name, "email": id + "@example.com", "created_at": now(), "updated_at": now(), "archived_at": nil}}
}

func renameMutation(t *testing.T, s *Engine, id, name string) mutation {
	t.Helper()
	before, v := userState(t, s, id)
	return mutation{Coll: collUsers, ID: id, Action: audit.ActionUpdate, Before: before, After: renamed(before, name), Version: v}
}

// userName reads a user's name, and whether the user exists.
func userName(t *testing.T, s *Engine, id string) (string, bool) {
	t.Helper()
	var raw bson.M
	err := s.coll(collUsers).FindOne(context.Background(), bson.M{"_id": id}).Decode(&raw)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	name, _ := raw["name"].(string)
	return name, true
}

// TestGroupCommitManyWriters: many writers at once, creating records and
// updating their own and shared ones. Batches of several writers happen,
// every acknowledged write has exactly one applied entry, and Verify finds
// each record's history whole (one applied entry per version, the log
// matching the data).
func TestGroupCommitManyWriters(t *testing.T) {
	s := openStore(t, modeSerial)
	ctx := testCtx()
	var shared []string
	for range 3 {
		shared = append(shared, newUser(t, s, ctx))
	}
	points := countPoints(s)
	var mu sync.Mutex
	var acks []ack
	var failed []error
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var own []string
			for i := range 12 {
				name := fmt.Sprintf("w%d-%d", w, i)
				var id string
				var err error
				switch {
				case i%3 == 0 || len(own) == 0:
					m := createUserMutation(name)
					id = m.ID
					if _, err = s.write(ctx, m); err == nil {
						own = append(own, id)
					}
				case i%3 == 1:
					id = own[i%len(own)]
					err = rename(ctx, s, id, name)
				default:
					id = shared[(w+i)%len(shared)]
					err = rename(ctx, s, id, name)
				}
				mu.Lock()
				if err == nil {
					acks = append(acks, ack{id, name})
				} else if !isConflict(err) { // a shared record may lose five races in a row
					failed = append(failed, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	s.hook = nil
	for _, err := range failed {
		t.Errorf("write: %v", err)
	}
	if points.get("batch") == 0 {
		t.Fatal("no batch of more than one writer was written: the writes were not grouped")
	}
	checkInvariants(t, s)
	oneEntryPerAck(t, s, bson.M{}, acks)
	t.Logf("%d writes acknowledged in %d batches of several writers and %d intents in all", len(acks), points.get("batch"), points.get("entry"))
}

// restartableStore opens a serial store on files in dir; closing it and
// opening it again is a restart of the process (its recovery runs at Open).
func restartableStore(t *testing.T, dir string) (*Engine, func()) {
	t.Helper()
	es, err := embedded.Start(context.Background(), embedded.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s, err := openDB(context.Background(), es.URI, "groupcommit_test", Options{Exclusive: true, Logger: zerolog.Nop()})
	if err != nil {
		es.Close()
		t.Fatal(err)
	}
	return s, func() { closeDB(context.Background(), s); es.Close() }
}

// TestGroupCommitCrashAtEveryStep crashes a batch of four writers (two
// creates, two updates) at each of its steps, then settles it either by a
// restart (recovery at start) or by the same process's next write. The store
// verifies clean, no intent is left pending, and each writer's change is
// either applied with its entry or not written at all: those whose records
// were written before the crash are applied, the others are not.
func TestGroupCommitCrashAtEveryStep(t *testing.T) {
	steps := []struct {
		point   string
		n       int
		applied int // how many of the four writers' changes stand
	}{
		{"batch", 1, 0},
		{"entry", 1, 0}, // the intent is written
		{"record", 1, 1}, {"record", 2, 2}, {"record", 3, 3}, {"record", 4, 4},
		{"entry-insert", 1, 4}, // before the entries' insert
		{"applied", 1, 4},      // after it
	}
	for _, st := range steps {
		for _, settle := range []string{"restart", "next-write"} {
			// No '#' in the name: it names the store's folder, and the
			// store's file URL would end there.
			t.Run(fmt.Sprintf("%s-%d/%s", st.point, st.n, settle), func(t *testing.T) {
				dir := t.TempDir()
				s, stop := restartableStore(t, dir)
				defer func() { stop() }() // the store reopened, after a restart
				ctx := testCtx()
				u1, u2 := newUser(t, s, ctx), newUser(t, s, ctx)
				muts := []mutation{createUserMutation("new-1"), renameMutation(t, s, u1, "renamed-1"),
					createUserMutation("new-2"), renameMutation(t, s, u2, "renamed-2")}
				entries := make([]audit.Entry, len(muts))
				var writes []func() error
				for i, m := range muts {
					writes = append(writes, func() error {
						es, err := s.write(ctx, m)
						entries[i] = es[0]
						return err
					})
				}
				fired := crashAt(s, st.point, st.n)
				errs := queueWhileLocked(t, s, writes...)
				s.hook = nil
				if !*fired {
					t.Fatalf("point %s #%d never reached", st.point, st.n)
				}
				for i, err := range errs {
					if !errors.Is(err, errCrashed) {
						t.Errorf("writer %d: %v, want the crash", i, err)
					}
				}
				if settle == "restart" {
					stop()
					s, stop = restartableStore(t, dir) // Open recovers
				} else if err := rename(ctx, s, newUser(t, s, ctx), "next"); err != nil {
					t.Fatalf("the next write: %v", err)
				}
				checkInvariants(t, s)
				if n, err := s.coll(collIntents).CountDocuments(ctx, bson.M{"state": audit.StatePending}); err != nil || n != 0 && settle == "restart" {
					t.Errorf("%d intents pending after the restart (%v)", n, err)
				}
				for i, m := range muts {
					name, exists := userName(t, s, m.ID)
					applied := exists && name == m.After["name"]
					if want := i < st.applied; applied != want {
						t.Errorf("writer %d (%s %s): applied %v, want %v (record: %q, exists %v)", i, m.Action, m.ID, applied, want, name, exists)
					}
					n := appliedEntries(t, s, bson.M{"_id": entries[i].ID})
					if applied && n != 1 || !applied && n != 0 {
						t.Errorf("writer %d: applied %v with %d applied entries", i, applied, n)
					}
					if !applied && m.Before != nil && name != m.Before["name"] {
						t.Errorf("writer %d: record is %q, neither before nor after", i, name)
					}
				}
			})
		}
	}
}

// An intent written by the one-entry protocol (before writes were batched)
// is still settled by recovery after an upgrade: its entry goes in if its
// record carries it, and not otherwise.
func TestGroupCommitRecoversAnIntentOfTheOneEntryForm(t *testing.T) {
	dir := t.TempDir()
	s, stop := restartableStore(t, dir)
	ctx := testCtx()
	actor, _ := audit.ActorFrom(ctx)
	landed, lost := newUser(t, s, ctx), newUser(t, s, ctx)
	var olds []audit.Entry
	for i, id := range []string{landed, lost} {
		m := renameMutation(t, s, id, fmt.Sprint("old protocol ", i))
		e := s.newEntry(actor, m, "")
		seq, err := s.nextSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		e.Seq, e.At, e.State = seq, time.Now().UTC(), audit.StateApplied
		if id == landed {
			// The old writer stopped after its record write, before the entry.
			if err := s.writeRecord(ctx, m, e.ID, "", false); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.coll(collIntents).InsertOne(ctx, bson.M{"_id": "old-process-" + fmt.Sprint(i), "state": audit.StatePending, "at": e.At, "entry": e}); err != nil {
			t.Fatal(err)
		}
		olds = append(olds, e)
	}
	stop()
	s, stop = restartableStore(t, dir) // Open recovers
	defer stop()
	checkInvariants(t, s)
	if n := appliedEntries(t, s, bson.M{"_id": olds[0].ID}); n != 1 {
		t.Errorf("the landed change has %d applied entries, want 1", n)
	}
	if n, _ := s.coll(collChangeLog).CountDocuments(ctx, bson.M{"_id": olds[1].ID}); n != 0 {
		t.Errorf("the change whose record was never written has %d entries, want none", n)
	}
	if name, _ := userName(t, s, lost); name != "Ann" {
		t.Errorf("the record of the lost change is %q, want it unchanged", name)
	}
	if n, _ := s.coll(collIntents).CountDocuments(ctx, bson.M{"state": audit.StatePending}); n != 0 {
		t.Errorf("%d intents still pending", n)
	}
}

// A writer whose caller goes away while it is queued leaves the queue with
// its context error, at once, and nothing is written for it; the others are
// written. Also when it leads the queue, waiting for the lock.
func TestGroupCommitCancelledWhileQueued(t *testing.T) {
	for _, cancelled := range []int{0, 1} { // the head of the queue (its leader), one behind it
		t.Run(fmt.Sprint("writer-", cancelled), func(t *testing.T) {
			s := openStore(t, modeSerial)
			ctx := testCtx()
			ids := []string{newUser(t, s, ctx), newUser(t, s, ctx), newUser(t, s, ctx)}
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			points := countPoints(s)
			errs := make([]error, 3)
			var wg sync.WaitGroup
			s.writeMu.Lock()
			for i, id := range ids {
				wctx := ctx
				if i == cancelled {
					wctx = cctx
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = rename(wctx, s, id, "renamed")
				}()
				if err := waitQueued(s, i+1); err != nil {
					s.writeMu.Unlock()
					cancel()
					wg.Wait()
					t.Fatal(err)
				}
			}
			cancel()
			if cancelled != 0 {
				// It leaves the queue while the lock is still held.
				if err := waitQueued(s, 2); err != nil {
					s.writeMu.Unlock()
					wg.Wait()
					t.Fatal(err)
				}
			}
			s.writeMu.Unlock()
			wg.Wait()
			s.hook = nil
			for i, err := range errs {
				if i == cancelled {
					if !errors.Is(err, context.Canceled) {
						t.Errorf("cancelled writer: %v, want context.Canceled", err)
					}
				} else if err != nil {
					t.Errorf("writer %d: %v", i, err)
				}
			}
			if name, _ := userName(t, s, ids[cancelled]); name != "Ann" {
				t.Errorf("the cancelled writer's record is %q, want it unchanged", name)
			}
			if n := appliedEntries(t, s, bson.M{"record_id": ids[cancelled], "action": audit.ActionUpdate}); n != 0 {
				t.Errorf("the cancelled writer has %d applied entries", n)
			}
			if points.get("batch") != 1 || points.get("entry") != 1 {
				t.Errorf("%d batches and %d intents, want the two others in one batch", points.get("batch"), points.get("entry"))
			}
			checkInvariants(t, s)
		})
	}
}

// Members of one batch that fail their precheck, their lock guard (a record
// held by a group) or their version guard (a stale version, found at the
// record write after the intent) get their own error, nothing is written
// for them, and the others of the batch are written.
func TestGroupCommitMemberFailuresStayTheirs(t *testing.T) {
	s := openStore(t, modeSerial)
	ctx := testCtx()
	ids := []string{newUser(t, s, ctx), newUser(t, s, ctx), newUser(t, s, ctx), newUser(t, s, ctx), newUser(t, s, ctx)}
	stale := renameMutation(t, s, ids[3], "stale")
	if err := rename(ctx, s, ids[3], "moved on"); err != nil {
		t.Fatal(err)
	}
	errPrecheck := errors.New("the precondition no longer holds")
	points := countPoints(s)
	write := func(chk precheck, m mutation) func() error {
		return func() error {
			_, err := s.writeChecked(ctx, chk, m)
			return err
		}
	}
	held := renameMutation(t, s, ids[2], "held")
	s.writeMu.Lock()
	s.locks[held.Key()] = "some-group"
	s.writeMu.Unlock()
	errs := queueWhileLocked(t, s,
		write(nil, renameMutation(t, s, ids[0], "ok-0")),
		write(func(context.Context) error { return errPrecheck }, renameMutation(t, s, ids[1], "refused")),
		write(nil, held),
		write(nil, stale),
		write(nil, renameMutation(t, s, ids[4], "ok-4")),
	)
	s.hook = nil
	s.writeMu.Lock()
	delete(s.locks, held.Key())
	s.writeMu.Unlock()
	if points.get("batch") != 1 {
		t.Fatalf("%d batches of several writers, want 1", points.get("batch"))
	}
	want := []struct {
		err  func(error) bool
		name string
	}{
		{func(err error) bool { return err == nil }, "ok-0"},
		{func(err error) bool { return errors.Is(err, errPrecheck) }, "Ann"},
		{isConflict, "Ann"},
		{isConflict, "moved on"},
		{func(err error) bool { return err == nil }, "ok-4"},
	}
	for i, w := range want {
		if !w.err(errs[i]) {
			t.Errorf("writer %d: unexpected result %v", i, errs[i])
		}
		if name, _ := userName(t, s, ids[i]); name != w.name {
			t.Errorf("writer %d: record is %q, want %q", i, name, w.name)
		}
	}
	if n := appliedEntries(t, s, bson.M{"record_id": bson.M{"$in": bson.A{ids[1], ids[2]}}, "action": audit.ActionUpdate}); n != 0 {
		t.Errorf("%d applied entries for the refused writers", n)
	}
	checkInvariants(t, s)
}

// Two writers updating one record never share a batch: the second waits for
// the next batch and there meets the first one's outcome. A raw write read
// at the same version is then a conflict (modify would retry it on the fresh
// state); if the first was refused, the second is written.
func TestGroupCommitSameRecordTwiceGoesToTheNextBatch(t *testing.T) {
	t.Run("first-lands-second-conflicts", func(t *testing.T) {
		s := openStore(t, modeSerial)
		ctx := testCtx()
		a, b := newUser(t, s, ctx), newUser(t, s, ctx)
		points := countPoints(s)
		first, second, other := renameMutation(t, s, a, "first"), renameMutation(t, s, a, "second"), renameMutation(t, s, b, "other")
		errs := queueWhileLocked(t, s,
			func() error { _, err := s.write(ctx, first); return err },
			func() error { _, err := s.write(ctx, second); return err },
			func() error { _, err := s.write(ctx, other); return err },
		)
		s.hook = nil
		if errs[0] != nil || errs[2] != nil || !isConflict(errs[1]) {
			t.Errorf("results %v; want the first and the other written, the second a conflict", errs)
		}
		// One batch of two (first, other), then the second alone.
		if points.get("batch") != 1 || points.get("entry") != 2 {
			t.Errorf("%d batches of several writers, %d intents; want 1 and 2", points.get("batch"), points.get("entry"))
		}
		if name, _ := userName(t, s, a); name != "first" {
			t.Errorf("record is %q, want first", name)
		}
		checkInvariants(t, s)
	})
	t.Run("first-refused-second-lands", func(t *testing.T) {
		s := openStore(t, modeSerial)
		ctx := testCtx()
		a := newUser(t, s, ctx)
		first, second := renameMutation(t, s, a, "first"), renameMutation(t, s, a, "second")
		refuse := func(context.Context) error { return ErrConflict }
		errs := queueWhileLocked(t, s,
			func() error { _, err := s.writeChecked(ctx, refuse, first); return err },
			func() error { _, err := s.write(ctx, second); return err },
		)
		if !isConflict(errs[0]) || errs[1] != nil {
			t.Errorf("results %v; want the first refused, the second written", errs)
		}
		if name, _ := userName(t, s, a); name != "second" {
			t.Errorf("record is %q, want second", name)
		}
		checkInvariants(t, s)
	})
	t.Run("modify-retries-both-land", func(t *testing.T) {
		s := openStore(t, modeSerial)
		ctx := testCtx()
		a := newUser(t, s, ctx)
		errs := queueWhileLocked(t, s,
			func() error { return rename(ctx, s, a, "first") },
			func() error { return rename(ctx, s, a, "second") },
		)
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("results %v", errs)
		}
		if name, _ := userName(t, s, a); name != "second" {
			t.Errorf("record is %q, want second (the retried write comes last)", name)
		}
		if n := appliedEntries(t, s, bson.M{"record_id": a, "action": audit.ActionUpdate}); n != 2 {
			t.Errorf("%d applied updates, want 2", n)
		}
		checkInvariants(t, s)
	})
}

// BenchmarkSerialWrites measures the serial protocol's throughput for
// creates and for updates of distinct records, with one writer and with
// eight at once, on a store on disk, with group commit (batch=32) and with
// one write at a time (batch=1). Compare the calls/s of one run.
func BenchmarkSerialWrites(b *testing.B) {
	defer func(n int) { maxCommitBatch = n }(maxCommitBatch)
	for _, op := range []string{"create", "update"} {
		for _, clients := range []int{1, 8} {
			for _, batch := range []int{1, 32} {
				b.Run(fmt.Sprintf("%s/clients=%d/batch=%d", op, clients, batch), func(b *testing.B) {
					maxCommitBatch = batch
					s, ctx := openTestStoreB(b)
					ids := make([]string, clients)
					for i := range ids {
						m := createUserMutation("seed")
						if _, err := s.write(ctx, m); err != nil {
							b.Fatal(err)
						}
						ids[i] = m.ID
					}
					var wg sync.WaitGroup
					b.ResetTimer()
					start := time.Now()
					for c := range clients {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := c; i < b.N; i += clients {
								var err error
								if op == "create" {
									_, err = s.write(ctx, createUserMutation("bench"))
								} else {
									_, err = modify(ctx, s, collUsers, ids[c], audit.ActionUpdate, func(u *User) error { u.Name = fmt.Sprint("bench ", i); return nil })
								}
								if err != nil {
									b.Error(err)
									return
								}
							}
						}()
					}
					wg.Wait()
					b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
				})
			}
		}
	}
}
