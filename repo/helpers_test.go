package repo

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
	"outreach/ledger"
)

// Helpers of the domain's tests that write through the engine: a fresh
// store in a given write mode, the test actor, crash points, and the
// invariants every test ends on.

// openStore opens a fresh store in the given write mode: the embedded store
// (ordered mode only), or a new database on MONGODB_URI.
func openStore(t *testing.T, mode string) *Store {
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
	s, err := Open(ctx, uri, db, opts)
	if err != nil {
		if mode == ModeTransaction && strings.Contains(err.Error(), "no multi-document transactions") {
			t.Skipf("transaction mode: MONGODB_URI is not a replica set (%v)", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	if err := s.IndexesReady(ctx); err != nil {
		t.Fatal(err)
	}
	switch {
	case protocol == modeSerial && !*s.Internals().SerialWrites:
		// A server with atomic filtered writes runs the ordered protocol;
		// the serial one is correct on it too for one writing process, as
		// this test's fresh database has: run it there as well.
		*s.Internals().SerialWrites, s.Internals().Caps.SerialWrites, *s.Internals().Exclusive = true, true, true
	case protocol == ModeOrdered && *s.Internals().SerialWrites:
		// The embedded store runs the serial protocol; these tests drive
		// the ordered one through it, one step at a time (its filtered
		// writes are not atomic under concurrency, but correct in sequence).
		*s.Internals().SerialWrites = false
	}
	return s
}

func testCtx() context.Context {
	return audit.WithActor(context.Background(), audit.Actor{UserID: "u-test", AgentID: "a-test", SessionID: "s-test", Tool: "test"})
}

// crashAt makes the n-th time the protocol reaches point (counting from 1) a
// crash, and reports whether it was reached.
func crashAt(s *Store, point string, n int) *bool {
	fired := new(bool)
	count := 0
	*s.Internals().Hook = func(p string) error {
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
func userState(t *testing.T, s *Store, id string) (bson.M, int64) {
	t.Helper()
	var raw bson.M
	if err := s.coll(CollUsers).FindOne(context.Background(), bson.M{"_id": id}).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	if lb, ok := raw[fieldLockedBy]; ok {
		t.Errorf("user %s still locked by %v", id, lb)
	}
	v, _ := raw[fieldVersion].(int64)
	return ledger.Strip(raw), v
}

func renamed(st bson.M, name string) bson.M {
	out := bson.M{}
	for k, v := range st {
		out[k] = v
	}
	out["name"] = name
	return out
}

func appliedEntries(t *testing.T, s *Store, filter bson.M) int64 {
	t.Helper()
	filter["state"] = audit.StateApplied
	n, err := s.coll(CollChangeLog).CountDocuments(context.Background(), filter)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func checkInvariants(t *testing.T, s *Store) {
	t.Helper()
	v, err := s.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range v {
		t.Errorf("invariant: %+v", x)
	}
}

// groupMutations builds a group of four steps: over four users, or with chain
// over three users, one of them changed twice. It returns the steps, and each
// user's name before and after the group.
func groupMutations(t *testing.T, s *Store, ctx context.Context, tag string, chain bool) ([]mutation, map[string]string, map[string]string) {
	t.Helper()
	var ids []string
	for i := 0; i < 4; i++ {
		u, err := createUser(ctx, s, fmt.Sprintf("u%d", i), uuid.NewString()+"@example.com", "")
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
		muts = append(muts, mutation{Coll: CollUsers, ID: id, Action: audit.ActionRollback, Before: st[id], After: after, Version: ver[id]})
		st[id], ver[id] = after, ver[id]+1
		want[id] = after["name"].(string)
	}
	return muts, old, want
}

// modeSerial names the serial protocol in tests (the embedded store's); an
// empty mode takes whatever protocol the store chooses.
const modeSerial = "serial"

func renameMutation(t *testing.T, s *Store, id, name string) mutation {
	t.Helper()
	before, v := userState(t, s, id)
	return mutation{Coll: CollUsers, ID: id, Action: audit.ActionUpdate, Before: before, After: renamed(before, name), Version: v}
}

func newUser(t *testing.T, s *Store, ctx context.Context) string {
	t.Helper()
	u, err := createUser(ctx, s, "Ann", uuid.NewString()+"@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

func rename(ctx context.Context, s *Store, id, name string) error {
	_, err := Modify(ctx, s, CollUsers, id, audit.ActionUpdate, func(u *User) error { u.Name = name; return nil })
	return err
}

// openTestStore opens a store in the default write mode on a fresh
// embedded server, with a context of the system actor, and verifies the
// store's invariants when t ends.
func openTestStore(t *testing.T) (*Store, context.Context) {
	t.Helper()
	ctx := audit.WithActor(context.Background(), SystemActor("directory-test"))
	es, err := embedded.Start(ctx, embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(es.Close)
	s, err := Open(ctx, es.URI, "directory_test", Options{Logger: zerolog.Nop(), Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if v, err := s.Verify(context.Background()); err != nil || len(v) > 0 {
			t.Errorf("invariants: %v %+v", err, v)
		}
		s.Close(context.Background())
	})
	return s, ctx
}

func ptrTo[T any](v T) *T { return &v }

// createUser writes a team member as access.CreateUser does (the core's
// tests cannot import the area): the name trimmed, the email lower-cased.
func createUser(ctx context.Context, s *Store, name, email, slackUserID string) (*User, error) {
	u := &User{Name: strings.TrimSpace(name), Email: strings.ToLower(strings.TrimSpace(email)), SlackUserID: slackUserID}
	if err := Insert(ctx, s, CollUsers, u); err != nil {
		return nil, err
	}
	return u, nil
}
