package repo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
)

// RecoveryReport counts what Recover settled.
type RecoveryReport struct {
	Applied      int `json:"applied"`
	Aborted      int `json:"aborted"`
	PlansApplied int `json:"plans_applied"`
	PlansAborted int `json:"plans_aborted"`
	// Waiting counts what is left in flight, to be settled by a later run.
	Waiting int `json:"waiting"`
}

// Recover settles writes that a crash left half-done in the ordered mode. An
// entry whose record carries it is marked applied at once (always safe). One
// whose record does not is voided once its lease has passed, or at once when
// all is true (the caller knows no other writer is running, as at the start
// of the embedded store, which only one process can open). A plan that had
// taken all its locks is rolled forward; one that had not is released.
func (s *Store) Recover(ctx context.Context, all bool) (RecoveryReport, error) {
	if s.serialWrites {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	var rep RecoveryReport
	cutoff := time.Now().Add(-s.lease)
	if all {
		cutoff = time.Now().Add(time.Hour)
	}
	var plans []plan
	cur, err := s.coll(collPlans).Find(ctx, bson.M{"state": bson.M{"$in": bson.A{planLocking, planLocked}}})
	if err != nil {
		return rep, err
	}
	if err := cur.All(ctx, &plans); err != nil {
		return rep, err
	}
	// A plan that cannot be settled now (the store failing) must not keep
	// recovery from settling the others: its error is reported at the end.
	var errs []error
	for _, p := range plans {
		if p.At.After(cutoff) {
			rep.Waiting++
			continue
		}
		if p.State == planLocked {
			if _, err := s.rollForward(ctx, p); err != nil {
				errs = append(errs, fmt.Errorf("roll plan %s forward: %w", p.ID, err))
				continue
			}
			rep.PlansApplied++
			continue
		}
		if err := s.abortPlan(ctx, p.ID); err != nil {
			errs = append(errs, fmt.Errorf("abort plan %s: %w", p.ID, err))
			continue
		}
		rep.PlansAborted++
	}
	var intents []intent
	cur, err = s.coll(collIntents).Find(ctx, bson.M{"state": audit.StatePending})
	if err != nil {
		return rep, err
	}
	if err := cur.All(ctx, &intents); err != nil {
		return rep, err
	}
	for _, in := range intents {
		if in.ID != s.intentID && in.At.After(cutoff) {
			rep.Waiting++ // another process's write, maybe still in flight
			continue
		}
		applied, err := s.settleIntent(ctx, in)
		if err != nil {
			errs = append(errs, fmt.Errorf("settle intent %s: %w", in.ID, err))
			continue
		}
		if applied {
			rep.Applied++
		} else {
			rep.Aborted++
		}
	}
	var pending []audit.Entry
	cur, err = s.coll(collChangeLog).Find(ctx, bson.M{"state": audit.StatePending})
	if err != nil {
		return rep, err
	}
	if err := cur.All(ctx, &pending); err != nil {
		return rep, err
	}
	for _, e := range pending {
		if e.PlanID != "" {
			if settled, err := s.planSettled(ctx, e.PlanID); err != nil || !settled {
				continue // the plan's own recovery owns this entry
			}
		}
		var rec bson.M
		err := s.coll(e.Collection).FindOne(ctx, bson.M{"_id": e.RecordID}).Decode(&rec)
		if err == nil && rec[fieldLastChange] == e.ID {
			if err := s.setEntryState(ctx, e.ID, audit.StateApplied); err != nil {
				return rep, err
			}
			rep.Applied++
			continue
		}
		if e.At.Before(cutoff) {
			if err := s.setEntryState(ctx, e.ID, audit.StateAborted); err != nil {
				return rep, err
			}
			rep.Aborted++
			continue
		}
		rep.Waiting++
	}
	if rep.Waiting > 0 || len(errs) > 0 {
		s.unsettled.Store(true)
	}
	if rep.Applied+rep.Aborted+rep.PlansApplied+rep.PlansAborted > 0 {
		s.log.Warn().Interface("recovery", rep).Msg("settled writes left half-done")
	}
	return rep, errors.Join(errs...)
}

func (s *Store) planSettled(ctx context.Context, id string) (bool, error) {
	var p plan
	if err := s.coll(collPlans).FindOne(ctx, bson.M{"_id": id}).Decode(&p); err != nil {
		return false, err
	}
	return p.State == planApplied || p.State == planAborted, nil
}

// RunRecovery calls Recover every interval until ctx ends.
func (s *Store) RunRecovery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// A store only this process writes has nothing in flight unless
			// one of its own writes failed half-way: skip the scan then.
			if s.exclusive && !s.unsettled.Swap(false) {
				continue
			}
			if _, err := s.Recover(ctx, false); err != nil && ctx.Err() == nil {
				s.log.Error().Err(err).Msg("recovery")
			}
		}
	}
}
