package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
)

// TestWritePathUnderFaults runs many writers over few records, single
// writes and groups, with faults injected at every step of the protocol:
// crashes (the writer stops there for good), store failures, pauses past
// the lease (so recovery acts while the writer sleeps), and callers that
// cancel mid-write; recovery runs all along. Then a last recovery, and:
// the invariants hold (Verify: every record's whole history), and every
// acknowledged write is in the change log exactly once.
//
// On the embedded store it runs the serial protocol; with MONGODB_URI set,
// the ordered protocol too, with a second handle standing for a second
// process. OUTREACH_FAULT_SECONDS sets how long (default 3 seconds a mode).
func TestWritePathUnderFaults(t *testing.T) {
	run := 3 * time.Second
	if v := os.Getenv("OUTREACH_FAULT_SECONDS"); v != "" {
		d, err := time.ParseDuration(v + "s")
		if err != nil {
			t.Fatal(err)
		}
		run = d
	}
	for _, mode := range []string{modeSerial, ModeOrdered} {
		t.Run(mode, func(t *testing.T) {
			if mode == ModeOrdered && os.Getenv("MONGODB_URI") == "" {
				t.Skip("concurrent ordered writers need a server whose filtered writes are atomic (not the embedded store): set MONGODB_URI")
			}
			faultRun(t, mode, run)
		})
	}
}

type faultStats struct {
	mu                                 sync.Mutex
	crashes, failures, pauses, cancels int
	acked, refused                     int
	errs                               map[string]int
}

func faultRun(t *testing.T, mode string, run time.Duration) {
	s := openStore(t, mode)
	const lease = 300 * time.Millisecond
	s.lease = lease
	handles := []*Engine{s}
	if mode == ModeOrdered {
		p2 := otherProcess(s)
		p2.lease = lease
		handles = append(handles, p2)
	}
	ctx := testCtx()
	var ids []string
	for i := 0; i < 4; i++ {
		ids = append(ids, newUser(t, s, ctx))
	}
	var rngMu sync.Mutex
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	roll := func() float64 {
		rngMu.Lock()
		defer rngMu.Unlock()
		return rng.Float64()
	}
	st := &faultStats{errs: map[string]int{}}
	var faulting sync.Map // goroutines are told apart by their contexts; the hook is shared
	hook := func(point string) error {
		if _, ok := faulting.Load("off"); ok {
			return nil
		}
		switch r := roll(); {
		case r < 0.02:
			st.mu.Lock()
			st.crashes++
			st.mu.Unlock()
			return errors.New("crash")
		case r < 0.05:
			st.mu.Lock()
			st.failures++
			st.mu.Unlock()
			return fmt.Errorf("%w at %s", errInjected, point)
		case r < 0.06:
			st.mu.Lock()
			st.pauses++
			st.mu.Unlock()
			time.Sleep(lease + lease/2)
		}
		return nil
	}
	for _, h := range handles {
		h.hook = hook
	}
	var acksMu sync.Mutex
	var acks []ack
	// The run lasts its time and, on a loaded machine, until it has also
	// seen a crash and a few acknowledged writes (within a hard bound), so
	// that a slow run still proves something instead of failing.
	deadline, hardDeadline := time.Now().Add(run), time.Now().Add(run+60*time.Second)
	going := func() bool {
		now := time.Now()
		if now.Before(deadline) {
			return true
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		return now.Before(hardDeadline) && (st.crashes < 3 || st.acked < 10)
	}
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := handles[w%len(handles)]
			actor := audit.Actor{UserID: "u-test", AgentID: "a-test", SessionID: "s-test", Tool: "fault"}
			for i := 0; going(); i++ {
				wctx := audit.WithActor(context.Background(), actor)
				var cancel context.CancelFunc = func() {}
				if roll() < 0.1 {
					st.mu.Lock()
					st.cancels++
					st.mu.Unlock()
					wctx, cancel = context.WithTimeout(wctx, time.Duration(roll()*float64(5*time.Millisecond)))
				}
				a, b := ids[int(roll()*float64(len(ids)))], ids[int(roll()*float64(len(ids)))]
				na, nb := fmt.Sprintf("w%d-%d-a", w, i), fmt.Sprintf("w%d-%d-b", w, i)
				var err error
				var mine []ack
				if i%5 == 4 && a != b {
					// A group: both records renamed as one unit.
					err = h.WriteGroup(wctx, func() ([]mutation, error) {
						var muts []mutation
						for _, x := range []ack{{a, na}, {b, nb}} {
							_, m, err := prepare(wctx, h, collUsers, x.id, audit.ActionUpdate, func(u *User) error { u.Name = x.name; return nil })
							if err != nil {
								return nil, err
							}
							muts = append(muts, *m)
						}
						return muts, nil
					})
					mine = []ack{{a, na}, {b, nb}}
				} else {
					err = rename(wctx, h, a, na)
					mine = []ack{{a, na}}
				}
				cancel()
				st.mu.Lock()
				if err == nil {
					st.acked++
					acksMu.Lock()
					acks = append(acks, mine...)
					acksMu.Unlock()
				} else {
					st.refused++
					st.errs[errClass(err)]++
				}
				st.mu.Unlock()
			}
		}()
	}
	stopRecovery := make(chan struct{})
	recovered := make(chan struct{})
	go func() {
		defer close(recovered)
		for {
			select {
			case <-stopRecovery:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for _, h := range handles {
				h.Recover(context.Background(), false) // errors are injected: a later run settles
			}
		}
	}()
	wg.Wait()
	close(stopRecovery)
	<-recovered
	faulting.Store("off", true)
	for _, h := range handles {
		h.hook = nil
	}
	time.Sleep(lease + 50*time.Millisecond) // every pending entry is past its lease
	for round := 0; ; round++ {
		rep, err := s.Recover(context.Background(), false)
		if err == nil && rep.Waiting == 0 {
			break
		}
		if round == 20 {
			t.Fatalf("recovery does not settle: %+v %v", rep, err)
		}
		time.Sleep(lease)
	}
	checkInvariants(t, s)
	oneEntryPerAck(t, s, bson.M{"record_id": bson.M{"$in": ids}}, acks)
	t.Logf("%s, %v: %d writes acknowledged, %d refused %v; injected %d crashes, %d store failures, %d pauses past the lease, %d cancellations",
		mode, run, st.acked, st.refused, st.errs, st.crashes, st.failures, st.pauses, st.cancels)
	if st.acked == 0 || st.crashes == 0 {
		t.Errorf("the run proved little: %d writes acknowledged, %d crashes", st.acked, st.crashes)
	}
}

func errClass(err error) string {
	switch {
	case errors.Is(err, errCrashed):
		return "crash"
	case errors.Is(err, errInjected):
		return "store"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	}
	return ErrorCode(err)
}

// ack is an acknowledged rename: the record and the name it was given.
type ack struct{ id, name string }

// oneEntryPerAck checks that every acknowledged write has exactly one
// applied entry, reading the log once (on the embedded store every query is
// a scan); filter narrows the entries read.
func oneEntryPerAck(t *testing.T, s *Engine, filter bson.M, acks []ack) {
	t.Helper()
	filter["state"] = audit.StateApplied
	cur, err := s.coll(collChangeLog).Find(context.Background(), filter,
		options.Find().SetProjection(bson.M{"record_id": 1, "after.name": 1}))
	if err != nil {
		t.Fatal(err)
	}
	var logged []audit.Entry
	if err := cur.All(context.Background(), &logged); err != nil {
		t.Fatal(err)
	}
	count := map[ack]int{}
	for _, e := range logged {
		name, _ := e.After["name"].(string)
		count[ack{e.RecordID, name}]++
	}
	for _, a := range acks {
		if n := count[a]; n != 1 {
			t.Errorf("acknowledged write %s of %s has %d applied entries, want 1", a.name, a.id, n)
		}
	}
}
