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
		}
	}
	if rep != (RecoveryReport{}) {
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
			if _, err := s.Recover(ctx, false); err != nil && ctx.Err() == nil {
				s.log.Error().Err(err).Msg("recovery")
			}
		}
	}
}
