package ledger

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
)

// A rollback on the engine's side: the records a plan is made from
// (RollbackRecords), the rollbacks already made of a set of changes
// (RevertGraph), and the plan applied as one unit (ApplyRollback). What may
// be rolled back, the rules a rollback must keep and the events it raises
// are the domain's.

// RollbackRecords reads the records the changes touch: their states for
// planning (redacted as change entries are) and as stored. A record locked
// by a group in progress is a retryable conflict.
func (s *Engine) RollbackRecords(ctx context.Context, changes []audit.Entry) (map[string]audit.Record, map[string]bson.M, error) {
	byColl := map[string][]string{}
	seen := map[string]bool{}
	for _, c := range changes {
		k := audit.RecordKey(c.Collection, c.RecordID)
		if !seen[k] {
			seen[k] = true
			byColl[c.Collection] = append(byColl[c.Collection], c.RecordID)
		}
	}
	records := make(map[string]audit.Record, len(seen))
	stored := make(map[string]bson.M, len(seen))
	for coll, ids := range byColl {
		for start := 0; start < len(ids); start += 200 {
			batch := ids[start:min(start+200, len(ids))]
			cur, err := s.find(ctx, coll, bson.M{"_id": bson.M{"$in": batch}})
			if err != nil {
				return nil, nil, DriverErr(err, s.schema.Kind(coll), "rollback")
			}
			var docs []bson.M
			if err := cur.All(ctx, &docs); err != nil {
				return nil, nil, DriverErr(err, s.schema.Kind(coll), "rollback")
			}
			if err := s.at("rollback-read"); err != nil {
				return nil, nil, err
			}
			for _, d := range docs {
				id := fmt.Sprint(d["_id"])
				lb, ok := d[fieldLockedBy]
				if !ok {
					lb, ok = s.lockedInMemory(coll, id)
				}
				if ok {
					return nil, nil, &Error{Code: CodeConflict, Retryable: true,
						Message: fmt.Sprintf("%s %s is being changed by a group of changes in progress (%v); try again in a moment", s.schema.Kind(coll), id, lb)}
				}
				v, _ := d[fieldVersion].(int64)
				k := audit.RecordKey(coll, id)
				stored[k] = Strip(d)
				records[k] = audit.Record{State: s.redact(coll, stored[k]), Version: v}
			}
		}
	}
	return records, stored, nil
}

// RevertGraph holds the rollbacks of a set of changes, and theirs, and so on.
type RevertGraph struct {
	Reverters map[string][]audit.Entry // by reverted change id, oldest first
}

// RevertGraph reads every applied rollback of ids, transitively. A rollback
// of one of them still in flight is a retryable conflict.
func (s *Engine) RevertGraph(ctx context.Context, ids []string) (RevertGraph, error) {
	g := RevertGraph{Reverters: map[string][]audit.Entry{}}
	for frontier := ids; len(frontier) > 0; {
		var next []string
		for start := 0; start < len(frontier); start += 200 {
			batch := frontier[start:min(start+200, len(frontier))]
			cur, err := s.find(ctx, collChangeLog,
				bson.M{"reverts": bson.M{"$in": batch}, "state": bson.M{"$in": bson.A{audit.StatePending, audit.StateApplied}}},
				options.Find().SetSort(bson.D{{Key: "seq", Value: 1}}))
			if err != nil {
				return g, DriverErr(err, "change", "rollback")
			}
			var rs []audit.Entry
			if err := cur.All(ctx, &rs); err != nil {
				return g, DriverErr(err, "change", "rollback")
			}
			for _, r := range rs {
				if r.State == audit.StatePending {
					return g, &Error{Code: CodeConflict, Retryable: true,
						Message: fmt.Sprintf("a rollback of change %s is in progress; try again in a moment", r.Reverts)}
				}
				g.Reverters[r.Reverts] = append(g.Reverters[r.Reverts], r)
				next = append(next, r.ID)
			}
		}
		frontier = next
	}
	return g, nil
}

// LiveReverter returns the first rollback of id whose effect stands (it was
// not itself rolled back), or "".
func (g RevertGraph) LiveReverter(id string) string {
	for _, r := range g.Reverters[id] {
		if g.LiveReverter(r.ID) == "" {
			return r.ID
		}
	}
	return ""
}

// ApplyRollback writes the steps of plan p as one unit of rollback changes,
// each from the record's state as stored (stored, by audit.RecordKey) to the
// state the plan restores; the fields the schema redacts keep their stored
// values. events, when set, returns the outbox's mutations for the rollback,
// written in the same unit. The unit is refused with ErrConflict when one of
// the changes was rolled back after p was planned (checked where no other
// write can come between). It returns the entries, the steps' first.
func (s *Engine) ApplyRollback(ctx context.Context, p audit.Plan, stored map[string]bson.M, events func([]Mutation) ([]Mutation, error)) ([]audit.Entry, error) {
	muts := make([]Mutation, len(p.Steps))
	states := make(map[string]bson.M, len(stored))
	for k, v := range stored {
		states[k] = v
	}
	for i, st := range p.Steps {
		k := audit.RecordKey(st.Change.Collection, st.Change.RecordID)
		after := make(bson.M, len(st.To))
		for f, v := range st.To {
			after[f] = v
		}
		// Redacted fields were planned over as placeholders; a rollback
		// never changes them, so they keep their stored values.
		for _, f := range s.schema.Redacted[st.Change.Collection] {
			if v, ok := states[k][f]; ok {
				after[f] = v
			}
		}
		muts[i] = Mutation{Coll: st.Change.Collection, ID: st.Change.RecordID, Action: audit.ActionRollback,
			Before: states[k], After: after, Version: st.Version, Reverts: st.Change.ID}
		states[k] = after
	}
	// Re-checked where no other write can slip in: a rollback of the same
	// change that landed after this plan read the change log.
	reverted := make([]string, len(p.Steps))
	for i, st := range p.Steps {
		reverted[i] = st.Change.ID
	}
	notRolledBackYet := func(ctx context.Context) error {
		g, err := s.RevertGraph(ctx, reverted)
		if err != nil {
			return err
		}
		for _, id := range reverted {
			if g.LiveReverter(id) != "" {
				return ErrConflict // planned again, it reports the rollback that won
			}
		}
		return nil
	}
	var evs []Mutation
	if events != nil {
		var err error
		if evs, err = events(muts); err != nil {
			return nil, err
		}
	}
	return s.writeChecked(ctx, notRolledBackYet, append(muts, evs...)...)
}
