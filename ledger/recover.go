package ledger

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

// Recover settles writes that a crash or a failing store left half-done.
// Nothing is ever voided on a timer: a pending entry whose lease has passed
// is finished by the same land step its writer runs (its record written if
// still at the entry's base version, the entry applied when its record
// carries it, aborted only when the record moved past that version without
// it). A plan that took all its locks is rolled forward; one that had not is
// released. A read that fails settles nothing: it is counted as waiting.
// all says no other process writes the store (the embedded store at start):
// then nothing in the store is in flight but this process's own work.
func (s *Engine) Recover(ctx context.Context, all bool) (RecoveryReport, error) {
	// What recovery rolls forward may be a key's change: forget verified keys.
	defer s.schema.dropCaches()
	// On a store other processes write, the periodic pass is routine (it
	// mostly finds nothing): only a pass that may hold up this process's
	// own writes counts as recovering.
	if all || s.exclusive {
		s.recovering.Add(1)
		defer s.recovering.Add(-1)
	}
	if err := s.at("recover"); err != nil {
		return RecoveryReport{}, err
	}
	var rep RecoveryReport
	defer func() { s.recovered.Add(int64(rep.Applied + rep.Aborted + rep.PlansApplied + rep.PlansAborted)) }()
	cutoff := time.Now().Add(-s.lease)
	if all {
		cutoff = time.Now().Add(time.Hour)
	}
	s.sweptBefore.Store(cutoff.UnixNano()) // for Verify: older pending writes were due now
	var errs []error
	// A plan or entry that cannot be settled now (the store failing) must
	// not keep recovery from settling the others: its error is reported at
	// the end.
	var plans []plan
	cur, err := s.coll(collPlans).Find(ctx, bson.M{"state": bson.M{"$in": bson.A{planLocking, planLocked}}})
	if err != nil {
		return rep, err
	}
	if err := cur.All(ctx, &plans); err != nil {
		return rep, err
	}
	for _, p := range plans {
		mine := s.serialWrites && (all || s.exclusive)
		if s.isRunning(p.ID) || (!mine && p.Heartbeat.After(cutoff)) || (!mine && p.At.After(cutoff)) {
			rep.Waiting++
			continue
		}
		if err := s.loadSteps(ctx, &p); err != nil {
			errs = append(errs, fmt.Errorf("plan %s: %w", p.ID, err))
			continue
		}
		if p.State == planLocked {
			var err error
			if p.Serial {
				_, err = s.rollForwardSerial(ctx, p, true)
			} else {
				_, err = s.rollForward(ctx, p)
			}
			if err != nil {
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
	if s.serialWrites {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	var intents []intent
	cur, err = s.coll(collIntents).Find(ctx, bson.M{"state": audit.StatePending})
	if err != nil {
		return rep, errors.Join(append(errs, err)...)
	}
	if err := cur.All(ctx, &intents); err != nil {
		return rep, errors.Join(append(errs, err)...)
	}
	if err := unpackIntents(intents); err != nil {
		return rep, errors.Join(append(errs, err)...)
	}
	for _, in := range intents {
		// This process's own intent is settled when it holds none in
		// memory: the stored state of a finished write is not marked done
		// (see writeSerial), the next write overwrites it.
		if in.ID == s.intentID && s.ownIntent == nil {
			continue
		}
		// Another process's intent is left to its process until its lease
		// passes, unless no other process can be writing.
		if in.ID != s.intentID && !all && !s.exclusive && in.At.After(cutoff) {
			rep.Waiting++
			continue
		}
		// A batch's entries are settled each by its own record, as one's is.
		carried, added, err := s.settleIntent(ctx, in)
		if err != nil {
			errs = append(errs, fmt.Errorf("settle intent %s: %w", in.ID, err))
			rep.Waiting++
			continue
		}
		if in.ID == s.intentID {
			s.ownIntent, s.intentStored = nil, false
		}
		// An intent whose entries are all in already is a write that
		// finished (its process stopped before marking it done): nothing
		// was half-done.
		rep.Applied += added
		rep.Aborted += len(in.changes()) - len(carried)
	}
	pending, err := s.pendingEntries(ctx)
	if err != nil {
		return rep, errors.Join(append(errs, err)...)
	}
	for _, e := range pending {
		if e.PlanID != "" {
			if settled, err := s.planSettled(ctx, e.PlanID); err != nil || !settled {
				continue // the plan's own recovery owns this entry
			}
		}
		if e.At.After(cutoff) {
			rep.Waiting++ // its writer may still be at it
			continue
		}
		state, err := s.land(ctx, e, mutation{})
		if err != nil {
			if !isConflict(err) {
				errs = append(errs, fmt.Errorf("settle change %s: %w", e.ID, err))
			}
			rep.Waiting++
			continue
		}
		if state == audit.StateApplied {
			rep.Applied++
		} else {
			rep.Aborted++
		}
	}
	if rep.Waiting > 0 || len(errs) > 0 {
		s.unsettled.Store(true)
	}
	if rep.Applied+rep.Aborted+rep.PlansApplied+rep.PlansAborted > 0 {
		s.log.Warn().Interface("recovery", rep).Msg("settled writes left half-done")
	}
	return rep, errors.Join(errs...)
}

func (s *Engine) isRunning(planID string) bool {
	if !s.serialWrites {
		return false
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.running[planID]
}

func (s *Engine) planSettled(ctx context.Context, id string) (bool, error) {
	var p plan
	if err := s.coll(collPlans).FindOne(ctx, bson.M{"_id": id}).Decode(&p); err != nil {
		return false, err
	}
	return p.State == planApplied || p.State == planAborted, nil
}

// RunRecovery calls Recover every interval until ctx ends.
func (s *Engine) RunRecovery(ctx context.Context, interval time.Duration) {
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
