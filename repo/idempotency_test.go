package repo

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/ledger"
)

// A keyed call whose write failed with its outcome pending answers
// unavailable and releases its claim; the client's retry with the same key
// takes the claim over and asks what the first attempt wrote. On the serial
// protocol that attempt's entry lives in the process's write intent until it
// is settled, and a group's entries wait in its plan: the retry must find the
// first attempt (or hear unavailable while it cannot be told), never find
// nothing and write the change a second time.
func TestIdempotentRetryFindsAWriteWhoseOutcomeWasPending(t *testing.T) {
	s := openStore(t, modeSerial)
	ctx := testCtx()
	failing := func(points ...string) func() {
		on := true
		*s.Internals().Hook = func(p string) error {
			for _, x := range points {
				if on && p == x {
					return fmt.Errorf("%w at %s", ledger.ErrInjected, p)
				}
			}
			return nil
		}
		return func() { on = false }
	}
	// claim claims the key for a call, as tools.idempotent does, and
	// returns the context its writes run in.
	claim := func(t *testing.T, key string, want int) (*Idempotency, *Store) {
		t.Helper()
		c, outcome, err := s.ClaimIdempotency(ctx, "key-1", key, "rename_user", "hash-1")
		if err != nil || outcome != want {
			t.Fatalf("claim: outcome %d, %v; want %d", outcome, err, want)
		}
		return c, s
	}
	run := func(c *Idempotency, muts func() []mutation) error {
		a, _ := audit.ActorFrom(ctx)
		a.IdempotencyKey = c.Tag()
		_, err := s.write(audit.WithActor(ctx, a), muts()...)
		return err
	}
	retry := func(t *testing.T, key string, recover func(), wantChanges int) {
		t.Helper()
		c, _ := claim(t, key, ClaimResumed)
		// The store still fails: the retry cannot tell, and says so.
		if _, err := s.IdempotentChanges(ctx, c); ErrorCode(err) != CodeUnavailable {
			t.Fatalf("changes while the store fails: %v; want unavailable (the first attempt cannot be told yet)", err)
		}
		if err := s.FinishIdempotency(ctx, c, ""); err != nil {
			t.Fatal(err)
		}
		recover()
		c, _ = claim(t, key, ClaimResumed)
		got, err := s.IdempotentChanges(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != wantChanges {
			t.Fatalf("the retry found %d changes of the first attempt; want %d (else it writes them again)", len(got), wantChanges)
		}
	}
	t.Run("single write", func(t *testing.T) {
		id := newUser(t, s, ctx)
		key := uuid.NewString()
		c, _ := claim(t, key, ClaimNew)
		heal := failing("entry-insert", "settle-read")
		err := run(c, func() []mutation { return []mutation{renameMutation(t, s, id, "Once")} })
		if ErrorCode(err) != CodeUnavailable {
			heal()
			t.Fatalf("write: %v; want unavailable (outcome pending)", err)
		}
		if err := s.FinishIdempotency(ctx, c, ""); err != nil {
			t.Fatal(err)
		}
		retry(t, key, func() { heal(); *s.Internals().Hook = nil }, 1)
		if n := appliedEntries(t, s, bson.M{"record_id": id, "action": audit.ActionUpdate}); n != 1 {
			t.Errorf("%d applied renames, want 1", n)
		}
		checkInvariants(t, s)
	})
	t.Run("group", func(t *testing.T) {
		a, b := newUser(t, s, ctx), newUser(t, s, ctx)
		key := uuid.NewString()
		c, _ := claim(t, key, ClaimNew)
		heal := failing("step-record")
		err := run(c, func() []mutation {
			return []mutation{renameMutation(t, s, a, "Both"), renameMutation(t, s, b, "Both")}
		})
		if ErrorCode(err) != CodeUnavailable {
			heal()
			t.Fatalf("group: %v; want unavailable (outcome pending)", err)
		}
		if err := s.FinishIdempotency(ctx, c, ""); err != nil {
			t.Fatal(err)
		}
		retry(t, key, func() {
			heal()
			*s.Internals().Hook = nil
			if _, err := s.Recover(ctx, true); err != nil {
				t.Fatal(err)
			}
		}, 2)
		checkInvariants(t, s)
	})
}
