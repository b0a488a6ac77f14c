package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"outreach/audit"
)

// Idempotency keys make a retried mutation safe. A call made with one first
// claims the key (one document per API key and idempotency key, whose
// unique _id lets only one of two concurrent duplicates through), runs, and
// stores its result in the claim; a repeat within IdempotencyTTL gets that
// result and writes nothing. Every change entry the call writes carries the
// claim's tag, so when a call's write landed but its result was never stored
// (the process stopped in between), the retry that takes the claim over
// finds those entries and does not write again.

// IdempotencyTTL is how long a key is kept: a repeat after that is a new call.
const IdempotencyTTL = 24 * time.Hour

// IdempotencyLease is how long a running call holds its claim. A duplicate
// that arrives meanwhile waits for it; once the lease has run out (the
// holder stopped), the next retry takes the claim over.
const IdempotencyLease = 2 * time.Minute

// States of a claim.
const (
	IdemRunning  = "running"
	IdemDone     = "done"
	IdemReleased = "released" // the call failed; a retry runs it again
)

// Idempotency is one claim of an idempotency key.
type Idempotency struct {
	ID string `bson:"_id"` // the API key's id, "/", the caller's key
	// Epoch is the claim's generation: kept when a retry takes the claim
	// over, new when an expired key is used again. Change entries carry
	// ID#Epoch (Tag).
	Epoch      string    `bson:"epoch"`
	Tool       string    `bson:"tool"`
	Hash       string    `bson:"hash"` // of the tool and its arguments
	State      string    `bson:"state"`
	Owner      string    `bson:"owner"` // the call holding the claim
	LeaseUntil time.Time `bson:"lease_until"`
	Result     string    `bson:"result,omitempty"` // the result's JSON, when done
	CreatedAt  time.Time `bson:"created_at"`
	ExpiresAt  time.Time `bson:"expires_at"`
}

// Tag is what the change entries written under the claim carry.
func (c *Idempotency) Tag() string { return c.ID + "#" + c.Epoch }

// Claim outcomes.
const (
	ClaimNew      = iota // the caller holds a fresh claim: run
	ClaimResumed         // the caller took over a claim whose call failed or stopped: check its changes, then run
	ClaimDone            // a call with the same arguments finished: its result is in the claim
	ClaimRunning         // a call with the same arguments is running
	ClaimMismatch        // the key was used with another tool or other arguments
)

// ClaimIdempotency claims key (of API key keyID) for a call of tool whose
// arguments hash to hash, and returns the claim and the outcome.
func (s *Engine) ClaimIdempotency(ctx context.Context, keyID, key, tool, hash string) (*Idempotency, int, error) {
	now := time.Now().UTC()
	c := &Idempotency{ID: keyID + "/" + key, Epoch: uuid.NewString(), Tool: tool, Hash: hash, State: IdemRunning,
		Owner: uuid.NewString(), LeaseUntil: now.Add(IdempotencyLease), CreatedAt: now, ExpiresAt: now.Add(IdempotencyTTL)}
	for range 5 {
		ok, err := s.putIdempotency(ctx, nil, c)
		if err != nil {
			return nil, 0, DriverErr(err, "idempotency key", key)
		}
		if ok {
			return c, ClaimNew, nil
		}
		var cur Idempotency
		err = s.coll(collIdempotency).FindOne(ctx, bson.M{"_id": c.ID}).Decode(&cur)
		if errors.Is(err, mongo.ErrNoDocuments) {
			continue
		}
		if err != nil {
			return nil, 0, DriverErr(err, "idempotency key", key)
		}
		held := bson.M{"_id": cur.ID, "owner": cur.Owner, "state": cur.State}
		switch {
		case !now.Before(cur.ExpiresAt):
			// An expired key is a new call: a new epoch, so the entries of the
			// old one do not count.
			if ok, err = s.putIdempotency(ctx, held, c); err != nil || ok {
				return c, ClaimNew, DriverErr(err, "idempotency key", key)
			}
		case cur.Hash != hash && cur.State != IdemReleased:
			return &cur, ClaimMismatch, nil
		case cur.State == IdemDone:
			return &cur, ClaimDone, nil
		case cur.State == IdemRunning && now.Before(cur.LeaseUntil):
			return &cur, ClaimRunning, nil
		default:
			// A claim whose call failed or stopped: taken over, with its
			// epoch, so the caller finds what that call wrote. A released
			// key is free for any call (the one that released it was
			// refused): the claim takes the new tool and arguments.
			c.Epoch, c.CreatedAt, c.ExpiresAt = cur.Epoch, cur.CreatedAt, cur.ExpiresAt
			if ok, err = s.putIdempotency(ctx, held, c); err != nil || ok {
				return c, ClaimResumed, DriverErr(err, "idempotency key", key)
			}
		}
	}
	return nil, 0, ErrConflict
}

// FinishIdempotency stores the result of the claim's call (state done), or
// releases the claim after a failed call (result ""), so a retry runs it
// again. A claim taken over meanwhile is left to its new holder.
func (s *Engine) FinishIdempotency(ctx context.Context, c *Idempotency, result string) error {
	next := *c
	next.State, next.Result = IdemDone, result
	if result == "" {
		next.State = IdemReleased
	}
	_, err := s.putIdempotency(ctx, bson.M{"_id": c.ID, "owner": c.Owner, "state": IdemRunning}, &next)
	return err
}

// errEarlierPending answers a retry whose earlier call's outcome cannot be
// told yet.
var errEarlierPending = &Error{Code: CodeUnavailable, Retryable: true, Field: "_meta.idempotency_key",
	Message: "an earlier call with this idempotency key is still being settled (the store failed while it was written); retry in a moment"}

// IdempotentChanges returns the change entries (applied or still pending)
// written under the claim's tag. A write of the serial protocol keeps its
// entry in the process's write intent until it is settled, and a group's
// entries wait in its plan: the process's intent is settled first (a
// failure there, or an unfinished plan holding an entry of the claim, is
// a retryable unavailable), so a retry always finds an earlier attempt.
func (s *Engine) IdempotentChanges(ctx context.Context, c *Idempotency) ([]audit.Entry, error) {
	if s.serialWrites {
		s.writeMu.Lock()
		err := s.settleOwnIntent(ctx)
		s.writeMu.Unlock()
		if err != nil {
			return nil, errEarlierPending
		}
	}
	if pending, err := s.planHolds(ctx, c.Tag()); err != nil || pending {
		if err != nil {
			return nil, DriverErr(err, "change log", "")
		}
		return nil, errEarlierPending
	}
	cur, err := s.find(ctx, collChangeLog, bson.M{"idempotency_key": c.Tag(), "state": bson.M{"$ne": audit.StateAborted}})
	if err != nil {
		return nil, DriverErr(err, "change log", "")
	}
	var out []audit.Entry
	if err := cur.All(ctx, &out); err != nil {
		return nil, DriverErr(err, "change log", "")
	}
	return out, nil
}

// ScrubIdempotencyResults passes the result stored with every idempotency
// claim through scrub and stores what it returns in place of a result it
// changed (claims are operational data: no change entry). It returns how
// many results changed.
func (s *Engine) ScrubIdempotencyResults(ctx context.Context, scrub func(result string) string) (int, error) {
	cur, err := s.coll(collIdempotency).Find(ctx, bson.M{})
	if err != nil {
		return 0, fmt.Errorf("idempotency keys: %w", err)
	}
	defer cur.Close(ctx)
	n := 0
	for cur.Next(ctx) {
		var c Idempotency
		if err := cur.Decode(&c); err != nil {
			return n, fmt.Errorf("idempotency keys: %w", err)
		}
		scrubbed := scrub(c.Result)
		if scrubbed == c.Result {
			continue
		}
		next := c
		next.Result = scrubbed
		if _, err := s.putIdempotency(ctx, bson.M{"_id": c.ID, "owner": c.Owner, "state": c.State}, &next); err != nil {
			return n, fmt.Errorf("idempotency keys: %w", err)
		}
		n++
	}
	if err := cur.Err(); err != nil {
		return n, fmt.Errorf("idempotency keys: %w", err)
	}
	return n, nil
}

// planHolds reports whether a group not yet settled (a plan locking or
// locked) holds a change written under the idempotency tag.
func (s *Engine) planHolds(ctx context.Context, tag string) (bool, error) {
	var plans []plan
	cur, err := s.coll(collPlans).Find(ctx, bson.M{"state": bson.M{"$in": bson.A{planLocking, planLocked}}})
	if err != nil {
		return false, err
	}
	if err := cur.All(ctx, &plans); err != nil {
		return false, err
	}
	for _, p := range plans {
		if err := s.loadSteps(ctx, &p); err != nil {
			return false, err
		}
		for _, st := range p.Steps {
			if st.Entry.IdempotencyKey == tag {
				return true, nil
			}
		}
	}
	return false, nil
}
