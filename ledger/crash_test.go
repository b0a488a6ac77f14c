package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/embedded"
)

// openStore opens a fresh store in the given write mode: the embedded store
// (ordered mode only), or a new database on MONGODB_URI.
func openStore(t *testing.T, mode string) *Engine {
	t.Helper()
	ctx := context.Background()
	uri := os.Getenv("MONGODB_URI")
	protocol := mode
	if mode == modeSerial {
		mode = ModeOrdered
	}
	opts := Options{WriteMode: mode, Logger: zerolog.Nop()}
	if uri == "" {
		if mode == ModeTransaction {
			t.Skip("transaction mode needs a MongoDB replica set: set MONGODB_URI to one to run this test (the embedded store has no multi-document transactions)")
		}
		es, err := embedded.Start(ctx, embedded.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(es.Close)
		uri = es.URI
		opts.Exclusive = true
		opts.PrepareStore = es.IndexIDs
	}
	db := "outreach_test_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	s, err := openDB(ctx, uri, db, opts)
	if err != nil {
		if mode == ModeTransaction && strings.Contains(err.Error(), "no multi-document transactions") {
			t.Skipf("transaction mode: MONGODB_URI is not a replica set (%v)", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { closeDB(context.Background(), s) })
	if err := s.IndexesReady(ctx); err != nil {
		t.Fatal(err)
	}
	switch {
	case protocol == modeSerial && !s.serialWrites:
		// A server with atomic filtered writes runs the ordered protocol;
		// the serial one is correct on it too for one writing process, as
		// this test's fresh database has: run it there as well.
		s.serialWrites, s.caps.SerialWrites, s.exclusive = true, true, true
	case protocol == ModeOrdered && s.serialWrites:
		// The embedded store runs the serial protocol; these tests drive
		// the ordered one through it, one step at a time (its filtered
		// writes are not atomic under concurrency, but correct in sequence).
		s.serialWrites = false
	}
	return s
}

// modeSerial names the serial protocol in tests (the embedded store's); an
// empty mode takes whatever protocol the store chooses.
const modeSerial = "serial"

func testCtx() context.Context {
	return audit.WithActor(context.Background(), audit.Actor{UserID: "u-test", AgentID: "a-test", SessionID: "s-test", Tool: "test"})
}

// crashAt makes the n-th time the protocol reaches point (counting from 1) a
// crash, and reports whether it was reached.
func crashAt(s *Engine, point string, n int) *bool {
	fired := new(bool)
	count := 0
	s.hook = func(p string) error {
		if p != point {
			return nil
		}
		count++
		if count == n {
			*fired = true
			return errors.New("crash")
		}
		return nil
	}
	return fired
}

// userState reads a user's stored state without bookkeeping fields.
func userState(t *testing.T, s *Engine, id string) (bson.M, int64) {
	t.Helper()
	var raw bson.M
	if err := s.coll(collUsers).FindOne(context.Background(), bson.M{"_id": id}).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	if lb, ok := raw[fieldLockedBy]; ok {
		t.Errorf("user %s still locked by %v", id, lb)
	}
	v, _ := raw[fieldVersion].(int64)
	return Strip(raw), v
}

func renamed(st bson.M, name string) bson.M {
	out := bson.M{}
	for k, v := range st {
		out[k] = v
	}
	out["name"] = name
	return out
}

func appliedEntries(t *testing.T, s *Engine, filter bson.M) int64 {
	t.Helper()
	filter["state"] = audit.StateApplied
	n, err := s.coll(collChangeLog).CountDocuments(context.Background(), filter)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func checkInvariants(t *testing.T, s *Engine) {
	t.Helper()
	v, err := s.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range v {
		t.Errorf("invariant: %+v", x)
	}
}

var modes = []string{modeSerial, ModeOrdered, ModeTransaction}

// crashPoints are the points of each protocol, with how many times each is
// reached by the writes below (a crash is tried at every occurrence).
var crashPoints = map[string]map[string][]struct {
	point string
	times int
}{
	modeSerial: {
		"single": {{"entry", 1}, {"record", 1}, {"applied", 1}},
		"group":  {{"plan", 1}, {"step-record", 4}, {"step-entry", 4}},
	},
	ModeOrdered: {
		"single": {{"entry", 1}, {"record", 1}, {"applied", 1}},
		"group":  {{"plan", 1}, {"lock", 4}, {"locked", 1}, {"step-entry", 4}, {"step-record", 4}},
	},
	ModeTransaction: {
		"single": {{"entry", 1}, {"record", 1}},
		"group":  {{"entry", 4}, {"record", 4}},
	},
}

func TestCrashDuringOneMutation(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			s := openStore(t, mode)
			ctx := testCtx()
			for _, cp := range crashPoints[mode]["single"] {
				for _, op := range []string{"create", "update"} {
					t.Run(cp.point+"/"+op, func(t *testing.T) {
						u, err := s.CreateUser(ctx, "Ann", uuid.NewString()+"@example.com", "")
						if err != nil {
							t.Fatal(err)
						}
						fired := crashAt(s, cp.point, 1)
						var id string
						if op == "create" {
							id = uuid.NewString()
							_, err = s.write(ctx, mutation{Coll: collUsers, ID: id, Action: audit.ActionCreate,
								After: bson.M{"_id": id, "name": "Bea", "email": id + "@example.com", "created_at": now(), "updated_at": now(), "archived_at": nil}})
						} else {
							id = u.ID
							before, v := userState(t, s, id)
							_, err = s.write(ctx, mutation{Coll: collUsers, ID: id, Action: audit.ActionUpdate, Before: before, After: renamed(before, "Changed"), Version: v})
						}
						s.hook = nil
						if !*fired || !errors.Is(err, errCrashed) {
							t.Fatalf("crash point %s: fired %v, err %v", cp.point, *fired, err)
						}
						if _, err := s.Recover(ctx, true); err != nil {
							t.Fatal(err)
						}
						checkInvariants(t, s)
						entries := appliedEntries(t, s, bson.M{"record_id": id, "action": bson.M{"$ne": audit.ActionCreate}})
						if op == "create" {
							entries = appliedEntries(t, s, bson.M{"record_id": id})
						}
						var raw bson.M
						exists := s.coll(collUsers).FindOne(ctx, bson.M{"_id": id}).Decode(&raw) == nil
						applied := exists && (op == "create" || raw["name"] == "Changed")
						switch {
						case applied && entries != 1, !applied && entries != 0:
							t.Errorf("applied %v with %d applied entries", applied, entries)
						}
						// The outcome each point must give. Serial: before the
						// record write nothing happened; after it, the change
						// stands. Ordered: once its entry is in, the change is
						// decided and recovery rolls it forward.
						want := (mode == modeSerial && cp.point != "entry") || mode == ModeOrdered
						if applied != want {
							t.Errorf("applied = %v, want %v", applied, want)
						}
						// The record takes ordinary writes again.
						if exists {
							if _, err := modify(ctx, s, collUsers, id, audit.ActionUpdate, func(u *User) error { u.Name = "After"; return nil }); err != nil {
								t.Errorf("update after recovery: %v", err)
							}
						}
					})
				}
			}
			checkInvariants(t, s)
		})
	}
}

// groupMutations builds a group of four steps: over four users, or with chain
// over three users, one of them changed twice. It returns the steps, and each
// user's name before and after the group.
func groupMutations(t *testing.T, s *Engine, ctx context.Context, tag string, chain bool) ([]mutation, map[string]string, map[string]string) {
	t.Helper()
	var ids []string
	for i := 0; i < 4; i++ {
		u, err := s.CreateUser(ctx, fmt.Sprintf("u%d", i), uuid.NewString()+"@example.com", "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.ID)
	}
	old := map[string]string{}
	want := map[string]string{}
	var muts []mutation
	st := map[string]bson.M{}
	ver := map[string]int64{}
	for i, id := range ids {
		st[id], ver[id] = userState(t, s, id)
		old[id] = fmt.Sprintf("u%d", i)
	}
	order := ids
	if chain {
		order = []string{ids[0], ids[1], ids[0], ids[2]}
		delete(old, ids[3])
	}
	for i, id := range order {
		after := renamed(st[id], fmt.Sprintf("%s-%d", tag, i))
		muts = append(muts, mutation{Coll: collUsers, ID: id, Action: audit.ActionRollback, Before: st[id], After: after, Version: ver[id]})
		st[id], ver[id] = after, ver[id]+1
		want[id] = after["name"].(string)
	}
	return muts, old, want
}

func TestCrashDuringGroup(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			s := openStore(t, mode)
			ctx := testCtx()
			for _, cp := range crashPoints[mode]["group"] {
				for n := 1; n <= cp.times; n++ {
					for _, chain := range []bool{false, true} {
						if chain && cp.point == "lock" && n == 4 {
							continue // a chain locks its three records once each
						}
						t.Run(fmt.Sprintf("%s#%d/chain=%v", cp.point, n, chain), func(t *testing.T) {
							muts, old, want := groupMutations(t, s, ctx, cp.point, chain)
							fired := crashAt(s, cp.point, n)
							entries, err := s.write(ctx, muts...)
							s.hook = nil
							if !*fired || !errors.Is(err, errCrashed) {
								t.Fatalf("crash point %s #%d: fired %v, err %v", cp.point, n, *fired, err)
							}
							if _, err := s.Recover(ctx, true); err != nil {
								t.Fatal(err)
							}
							checkInvariants(t, s)
							got := map[string]bool{}
							for id := range want {
								st, _ := userState(t, s, id)
								switch st["name"] {
								case want[id]:
									got["applied"] = true
								case old[id]:
									got["absent"] = true
								default:
									t.Errorf("user %s is %v: neither before (%s) nor after (%s) the group", id, st["name"], old[id], want[id])
								}
							}
							if len(got) != 1 {
								t.Fatalf("group half applied: %v", got)
							}
							n := appliedEntries(t, s, bson.M{"plan_id": entries[0].PlanID})
							if got["applied"] && n != int64(len(muts)) || got["absent"] && n != 0 {
								t.Errorf("group %v with %d applied entries of %d", got, n, len(muts))
							}
							// Ordered: a plan that took all its locks is rolled
							// forward; one that did not is voided.
							// Serial: a plan is decided once persisted.
							wantApplied := mode == modeSerial || mode == ModeOrdered && (cp.point == "locked" || strings.HasPrefix(cp.point, "step-"))
							if got["applied"] != wantApplied {
								t.Errorf("applied = %v, want %v", got["applied"], wantApplied)
							}
						})
					}
				}
			}
		})
	}
}

func TestGroupReturnsEntriesInSeqOrder(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			s := openStore(t, mode)
			ctx := testCtx()
			muts, _, _ := groupMutations(t, s, ctx, "ok", false)
			chained, _, _ := groupMutations(t, s, ctx, "chain", true)
			entries, err := s.write(ctx, muts...)
			if err != nil {
				t.Fatal(err)
			}
			more, err := s.write(ctx, chained...)
			entries = append(entries, more...)
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range entries {
				if e.Seq == 0 || e.At.IsZero() || e.State != audit.StateApplied {
					t.Errorf("entry %d returned without seq/at/state: %+v", i, e)
				}
				if i > 0 && e.Seq <= entries[i-1].Seq {
					t.Errorf("entry %d seq %d after %d", i, e.Seq, entries[i-1].Seq)
				}
			}
			checkInvariants(t, s)
		})
	}
}

// otherProcess is a second handle on s's database, as another process of the
// service (or its recovery timer) would hold: it shares nothing in memory
// with s.
func otherProcess(s *Engine) *Engine {
	return &Engine{client: s.client, db: s.db, caps: s.caps, lease: s.lease, log: s.log, schema: s.schema}
}

// Recovery may roll a plan forward while its writer is still at it (the
// plan outlived its lease): both must finish with the group applied once.
func TestRecoveryRacingTheWriter(t *testing.T) {
	for _, point := range []string{"locked", "step-entry", "step-record"} {
		t.Run(point, func(t *testing.T) {
			s := openStore(t, ModeOrdered)
			ctx := testCtx()
			muts, _, want := groupMutations(t, s, ctx, "race", false)
			busy := false
			s.hook = func(p string) error {
				if p != point || busy {
					return nil
				}
				busy = true
				if _, err := otherProcess(s).Recover(ctx, true); err != nil {
					t.Errorf("recover: %v", err)
				}
				return nil
			}
			entries, err := s.write(ctx, muts...)
			s.hook = nil
			if err != nil {
				t.Fatalf("writer: %v", err)
			}
			for id, name := range want {
				if st, _ := userState(t, s, id); st["name"] != name {
					t.Errorf("user %s is %v, want %s", id, st["name"], name)
				}
			}
			if n := appliedEntries(t, s, bson.M{"plan_id": entries[0].PlanID}); n != int64(len(muts)) {
				t.Errorf("%d applied entries, want %d", n, len(muts))
			}
			checkInvariants(t, s)
		})
	}
}

// A plan voided by recovery while its writer was still locking stays void:
// the writer must not mark it locked and must release what it took.
func TestVoidedPlanStaysVoid(t *testing.T) {
	s := openStore(t, ModeOrdered)
	ctx := testCtx()
	muts, old, _ := groupMutations(t, s, ctx, "void", false)
	busy := false
	s.hook = func(p string) error {
		if p != "lock" || busy {
			return nil
		}
		busy = true
		if _, err := otherProcess(s).Recover(ctx, true); err != nil {
			t.Errorf("recover: %v", err)
		}
		return nil
	}
	_, err := s.write(ctx, muts...)
	s.hook = nil
	if ErrorCode(err) != CodeUnavailable {
		t.Fatalf("writer: %v, want unavailable", err)
	}
	for id, name := range old {
		if st, _ := userState(t, s, id); st["name"] != name {
			t.Errorf("user %s is %v, want %s", id, st["name"], name)
		}
	}
	checkInvariants(t, s)
}

func TestLockedRecordIsARetryableConflict(t *testing.T) {
	s := openStore(t, ModeOrdered)
	ctx := testCtx()
	muts, _, _ := groupMutations(t, s, ctx, "lock", false)
	crashAt(s, "locked", 1)
	if _, err := s.write(ctx, muts...); !errors.Is(err, errCrashed) {
		t.Fatal(err)
	}
	s.hook = nil
	_, err := modify(ctx, s, collUsers, muts[0].ID, audit.ActionUpdate, func(u *User) error { u.Name = "other"; return nil })
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeConflict || !e.Retryable {
		t.Fatalf("write to a locked record: %v, want a retryable conflict", err)
	}
	if _, err := s.Recover(ctx, true); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, s)
}
