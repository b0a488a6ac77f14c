package repo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/ledger"
)

// Rollback executes what package audit plans: it reads the changes and the
// records they touch, lets audit.PlanRollback compute the new states, and
// writes them through the single write path: one mutation for one change, a
// group (all or nothing) for a session.

// RollbackOptions tune a rollback.
type RollbackOptions struct {
	// DryRun plans and reports, and writes nothing.
	DryRun bool
	// Force writes over conflicts.
	Force bool
	// Progress, when set, hears how far a rollback has got.
	Progress func(done, total int, msg string)
}

func (o RollbackOptions) progress(done, total int, msg string) {
	if o.Progress != nil {
		o.Progress(done, total, msg)
	}
}

// RollbackStep is one change of a rollback as a caller sees it.
type RollbackStep struct {
	ChangeID   string    `json:"change_id"`
	Seq        int64     `json:"seq"`
	At         time.Time `json:"at"`
	Collection string    `json:"collection"`
	RecordID   string    `json:"record_id"`
	Action     string    `json:"action"`
	Tool       string    `json:"tool"`
	// Status: would_roll_back, conflict or violation (dry run),
	// rolled_back, not_reversible, already_rolled_back.
	Status string `json:"status"`
	// Set and Unset are what the rollback writes (or would write) on the record.
	Set       bson.M           `json:"set,omitempty"`
	Unset     []string         `json:"unset,omitempty"`
	Conflicts []audit.Conflict `json:"conflicts,omitempty"`
	// Violations are the rules of the record's kind that the state the
	// rollback leaves the record in would break (see rules.go): the whole
	// rollback is refused, forced or not.
	Violations []RuleViolation `json:"violations,omitempty"`
	// Forced says the step was written over its conflicts.
	Forced bool `json:"forced,omitempty"`
	// RollbackID is the change entry the rollback wrote.
	RollbackID string `json:"rollback_id,omitempty"`
	// RolledBackBy is the earlier rollback that already undid the change.
	RolledBackBy string `json:"rolled_back_by,omitempty"`
	Reason       string `json:"reason,omitempty"`
}

// Rollback is the result of a rollback (or of its dry run).
type Rollback struct {
	SessionID string `json:"session_id,omitempty"`
	DryRun    bool   `json:"dry_run"`
	Force     bool   `json:"force"`
	// Applied says the rollback was written (never on a dry run).
	Applied bool   `json:"applied"`
	Message string `json:"message"`
	// Changes counts the changes considered; Conflicts the conflicting fields.
	Changes   int `json:"changes"`
	Conflicts int `json:"conflicts"`
	// Violations counts the broken rules; any refuses the rollback.
	Violations int `json:"violations"`
	// Steps are the changes rolled back (or to roll back), newest first.
	Steps []RollbackStep `json:"steps"`
	// NotReversible are changes that left the system: never rolled back,
	// always listed.
	NotReversible []RollbackStep `json:"not_reversible"`
	// AlreadyRolledBack are changes whose effect an earlier rollback undid.
	AlreadyRolledBack []RollbackStep `json:"already_rolled_back"`
}

// ConflictDetail is one conflicting field of a refused rollback, as the
// error's details list it.
type ConflictDetail struct {
	ChangeID   string `json:"change_id"`
	Collection string `json:"collection"`
	RecordID   string `json:"record_id"`
	audit.Conflict
}

// ViolationDetail is one broken rule of a refused rollback, as the error's
// details list it.
type ViolationDetail struct {
	ChangeID   string `json:"change_id"`
	Collection string `json:"collection"`
	RecordID   string `json:"record_id"`
	RuleViolation
}

// adminCollections are written by admin tools only: rolling back their
// changes (un-revoking a key, say) needs the admin scope as well.
var adminCollections = map[string]bool{CollUsers: true, CollKeys: true, CollOAuthGrants: true, CollOAuthClients: true, CollOAuthRequests: true, CollSignIns: true}

const rollbackAttempts = 5

// RollbackChange rolls back one change.
func (s *Store) RollbackChange(ctx context.Context, id string, o RollbackOptions) (*Rollback, error) {
	if ledger.CheckID(id) != nil {
		return nil, NotFound("change", id)
	}
	for attempt := 1; ; attempt++ {
		c, err := s.Change(ctx, id)
		if err != nil {
			return nil, err
		}
		if err := mayRollBack(ctx, []audit.Entry{*c}); err != nil {
			return nil, err
		}
		c = &asUpdates([]audit.Entry{*c})[0]
		if !audit.Reversible(*c) {
			return nil, Errorf(CodeFailedPrecondition, "change %s (%s of %s %s by %s) cannot be rolled back: %s", c.ID, c.Action, s.schema.Kind(c.Collection), c.RecordID, c.Tool, irreversible(*c))
		}
		// The record first, its rollbacks second: a rollback that lands in
		// between fails our version-guarded write, or shows in the query.
		records, stored, err := s.RollbackRecords(ctx, []audit.Entry{*c})
		if err != nil {
			return nil, err
		}
		g, err := s.revertGraph(ctx, []string{id})
		if err != nil {
			return nil, err
		}
		if rs := g.reverters[id]; len(rs) > 0 {
			msg := fmt.Sprintf("change %s was already rolled back by change %s (%s, session %s)", id, rs[0].ID, rs[0].At.Format(time.RFC3339), rs[0].SessionID)
			if again := g.liveReverter(rs[0].ID); again != "" {
				msg += fmt.Sprintf("; that rollback was itself rolled back by change %s: to undo change %s again, roll back %s", again, id, again)
			}
			return nil, &Error{Code: CodeFailedPrecondition, Message: msg, Details: map[string]string{"rolled_back_by": rs[0].ID}}
		}
		p := audit.PlanRollback([]audit.Entry{*c}, records, nil, Now())
		res, err := s.runPlan(ctx, p, stored, o)
		if errors.Is(err, ErrConflict) && attempt < rollbackAttempts {
			time.Sleep(time.Duration(attempt*attempt) * 5 * time.Millisecond)
			continue
		}
		if err != nil {
			return nil, err
		}
		res.Changes = 1
		res.Message = summary(res, fmt.Sprintf("change %s", id))
		return res, nil
	}
}

// RollbackSession rolls back every change of an agent session, newest first,
// all or nothing.
func (s *Store) RollbackSession(ctx context.Context, sessionID string, o RollbackOptions) (*Rollback, error) {
	for attempt := 1; ; attempt++ {
		var changes []audit.Entry
		cur, err := s.find(ctx, CollChangeLog, bson.M{"session_id": sessionID, "state": audit.StateApplied},
			options.Find().SetSort(bson.D{{Key: "seq", Value: -1}}))
		if err != nil {
			return nil, ledger.DriverErr(err, "session", sessionID)
		}
		if err := cur.All(ctx, &changes); err != nil {
			return nil, ledger.DriverErr(err, "session", sessionID)
		}
		if len(changes) == 0 {
			return nil, &Error{Code: CodeNotFound, Field: "session_id", Message: fmt.Sprintf("session %s has no changes (get_change_log lists changes with their session_id)", sessionID)}
		}
		total := len(changes)
		o.progress(0, total, fmt.Sprintf("planning the rollback of %d changes", total))
		if err := mayRollBack(ctx, changes); err != nil {
			return nil, err
		}
		changes = asUpdates(changes)
		var reversible []audit.Entry
		ids := make([]string, len(changes))
		inSession := make(map[string]bool, len(changes))
		for i, c := range changes {
			ids[i] = c.ID
			inSession[c.ID] = true
			if audit.Reversible(c) {
				reversible = append(reversible, c)
			}
		}
		records, stored, err := s.RollbackRecords(ctx, reversible)
		if err != nil {
			return nil, err
		}
		g, err := s.revertGraph(ctx, ids)
		if err != nil {
			return nil, err
		}
		skip := map[string]audit.Skipped{}
		for _, c := range changes {
			if by := g.liveReverter(c.ID); by != "" {
				skip[c.ID] = audit.Skipped{RolledBackBy: by, Reason: "already rolled back by change " + by}
				continue
			}
			// A rollback made in the session of a change of the same session:
			// the two cancel out, and both are left alone.
			if c.Reverts != "" && inSession[c.Reverts] {
				skip[c.ID] = audit.Skipped{Reason: "rolls back change " + c.Reverts + " of the same session: the two cancel out"}
			}
		}
		o.progress(0, total, fmt.Sprintf("read %d records", len(records)))
		p := audit.PlanRollback(changes, records, skip, Now())
		res, err := s.runPlan(ctx, p, stored, o)
		if errors.Is(err, ErrConflict) && attempt < rollbackAttempts {
			time.Sleep(time.Duration(attempt*attempt) * 5 * time.Millisecond)
			continue
		}
		if err != nil {
			return nil, err
		}
		res.SessionID, res.Changes = sessionID, total
		res.Message = summary(res, "session "+sessionID)
		if len(res.Steps) == 0 && !o.DryRun {
			return nil, &Error{Code: CodeFailedPrecondition, Field: "session_id", Message: "nothing to roll back: " + res.Message, Details: res}
		}
		o.progress(total, total, res.Message)
		return res, nil
	}
}

// asUpdates returns changes as a rollback plans them: the create of a
// singleton record as an update from the record's defaults (see
// singletonBefore), so its rollback restores the defaults instead of
// archiving the record; every change of the record that held the media URL
// signing secret in older versions (its creation, and the archive that took
// the secret out of the store) as not reversible: undoing either would bring
// back a record whose secret is gone, and signing no longer reads it.
func asUpdates(changes []audit.Entry) []audit.Entry {
	out := changes
	for i, c := range changes {
		b := singletonBefore(c)
		secret := c.Collection == CollSettings && c.RecordID == signingID && c.Reversible
		if b == nil && !secret {
			continue
		}
		if &out[0] == &changes[0] {
			out = slices.Clone(changes)
		}
		if b != nil {
			out[i].Before = b
		}
		if secret {
			out[i].Reversible = false
		}
	}
	return out
}

// irreversible says why change c cannot be rolled back.
func irreversible(c audit.Entry) string {
	if c.Collection == CollSettings && c.RecordID == signingID {
		return "it changed the record that held the media URL signing secret in older versions; the secret now lives outside the store (docs/security.md: Secrets)"
	}
	return "a " + c.Action + " left the system: it cannot be undone"
}

// mayRollBack refuses a rollback touching an admin-only collection to a
// caller without the admin scope.
func mayRollBack(ctx context.Context, changes []audit.Entry) error {
	actor, _ := audit.ActorFrom(ctx)
	if slices.Contains(actor.Scopes, ScopeAdmin) {
		return nil
	}
	for _, c := range changes {
		if adminCollections[c.Collection] {
			return &Error{Code: CodePermissionDenied, Message: fmt.Sprintf("change %s is of %s, which only admin tools change: rolling it back needs a key with the admin scope", c.ID, c.Collection)}
		}
	}
	return nil
}

// revertGraph holds the rollbacks of a set of changes, and theirs, and so
// on (ledger.RevertGraph), under the names the domain's files use.
type revertGraph struct {
	ledger.RevertGraph
	reverters map[string][]audit.Entry // by reverted change id, oldest first
}

// revertGraph reads every applied rollback of ids, transitively.
func (s *Store) revertGraph(ctx context.Context, ids []string) (revertGraph, error) {
	g, err := s.RevertGraph(ctx, ids)
	return revertGraph{RevertGraph: g, reverters: g.Reverters}, err
}

// liveReverter returns the first rollback of id whose effect stands, or "".
func (g revertGraph) liveReverter(id string) string { return g.LiveReverter(id) }

// runPlan reports a plan, and unless it is a dry run, writes it as one unit:
// nothing when a step conflicts and the rollback is not forced.
func (s *Store) runPlan(ctx context.Context, p audit.Plan, stored map[string]bson.M, o RollbackOptions) (*Rollback, error) {
	res := &Rollback{DryRun: o.DryRun, Force: o.Force, Conflicts: p.Conflicts(),
		Steps: []RollbackStep{}, NotReversible: []RollbackStep{}, AlreadyRolledBack: []RollbackStep{}}
	violations, err := s.checkRules(ctx, p)
	if err != nil {
		return nil, err
	}
	var details []ConflictDetail
	var broken []ViolationDetail
	for i, st := range p.Steps {
		rs := stepOf(st.Change)
		rs.Set, rs.Unset = st.Changes()
		rs.Conflicts = st.Conflicts
		rs.Violations = violations[i]
		rs.Status = "would_roll_back"
		if len(st.Conflicts) > 0 {
			rs.Status = "conflict"
		}
		if len(rs.Violations) > 0 {
			rs.Status = "violation"
		}
		for _, v := range rs.Violations {
			broken = append(broken, ViolationDetail{ChangeID: st.Change.ID, Collection: st.Change.Collection, RecordID: st.Change.RecordID, RuleViolation: v})
		}
		for _, c := range st.Conflicts {
			details = append(details, ConflictDetail{ChangeID: st.Change.ID, Collection: st.Change.Collection, RecordID: st.Change.RecordID, Conflict: c})
		}
		res.Steps = append(res.Steps, rs)
	}
	res.Violations = len(broken)
	for _, c := range p.NotReversible {
		rs := stepOf(c)
		rs.Status, rs.Reason = "not_reversible", irreversible(c)
		res.NotReversible = append(res.NotReversible, rs)
	}
	for _, sk := range p.Skipped {
		rs := stepOf(sk.Change)
		rs.Status, rs.RolledBackBy, rs.Reason = "already_rolled_back", sk.RolledBackBy, sk.Reason
		res.AlreadyRolledBack = append(res.AlreadyRolledBack, rs)
	}
	if o.DryRun || len(p.Steps) == 0 {
		return res, nil
	}
	for _, st := range p.Steps {
		if st.To == nil {
			return nil, Errorf(CodeFailedPrecondition, "%s %s of change %s no longer exists; it cannot be rolled back", s.schema.Kind(st.Change.Collection), st.Change.RecordID, st.Change.ID)
		}
	}
	// A rule holds whatever force says: force only writes over fields
	// changed since.
	if len(broken) > 0 {
		d := map[string]any{"violations": broken}
		if len(details) > 0 {
			d["conflicts"] = details
		}
		b := broken[0]
		return nil, &Error{Code: CodeFailedPrecondition,
			Message: fmt.Sprintf("the rollback would break %d rule(s) of the records it writes; nothing was written, and force does not override rules. Rolling back change %s (%s %s) breaks %s: %s", len(broken), b.ChangeID, s.schema.Kind(b.Collection), b.RecordID, b.Rule, b.Message),
			Details: d}
	}
	if len(details) > 0 && !o.Force {
		return nil, &Error{Code: CodeConflict,
			Message: fmt.Sprintf("%d field(s) changed since the change(s) being rolled back; nothing was written. Review them with dry_run: true, or pass force: true to overwrite them", len(details)),
			Details: map[string]any{"conflicts": details}}
	}
	total := len(p.Steps) + len(p.NotReversible) + len(p.Skipped)
	o.progress(total-len(p.Steps), total, fmt.Sprintf("writing %d rollback changes as one unit", len(p.Steps)))
	entries, err := s.ApplyRollback(ctx, p, stored, func(muts []mutation) ([]mutation, error) { return reactions.rollbackEvents(ctx, s, muts) })
	if err != nil {
		return nil, err
	}
	res.Applied = true
	for i := range res.Steps {
		res.Steps[i].Status = "rolled_back"
		res.Steps[i].RollbackID = entries[i].ID
		res.Steps[i].Forced = len(res.Steps[i].Conflicts) > 0
	}
	return res, nil
}

func stepOf(c audit.Entry) RollbackStep {
	return RollbackStep{ChangeID: c.ID, Seq: c.Seq, At: c.At, Collection: c.Collection, RecordID: c.RecordID, Action: c.Action, Tool: c.Tool}
}

// summary says in one sentence what a rollback did or would do.
func summary(res *Rollback, what string) string {
	var parts []string
	n := len(res.Steps)
	switch {
	case res.DryRun && n > 0:
		parts = append(parts, fmt.Sprintf("dry run of %s: %d change(s) would be rolled back in one unit", what, n))
	case res.DryRun:
		parts = append(parts, fmt.Sprintf("dry run of %s: no change to roll back", what))
	case n > 0:
		parts = append(parts, fmt.Sprintf("rolled back %d change(s) of %s in one unit", n, what))
	default:
		parts = append(parts, fmt.Sprintf("%s has no change left to roll back", what))
	}
	if res.Conflicts > 0 {
		if res.DryRun && !res.Force {
			parts = append(parts, fmt.Sprintf("%d conflicting field(s): the rollback would write nothing unless forced", res.Conflicts))
		} else {
			parts = append(parts, fmt.Sprintf("%d conflicting field(s) overwritten (force)", res.Conflicts))
		}
	}
	if res.Violations > 0 {
		parts = append(parts, fmt.Sprintf("%d broken rule(s) listed in the steps' violations: the rollback would write nothing, even forced, until they are fixed", res.Violations))
	}
	if k := len(res.AlreadyRolledBack); k > 0 {
		parts = append(parts, fmt.Sprintf("%d change(s) already rolled back", k))
	}
	if k := len(res.NotReversible); k > 0 {
		parts = append(parts, fmt.Sprintf("%d change(s) not reversible (they left the system; listed in not_reversible)", k))
	}
	if res.DryRun {
		parts = append(parts, "nothing was written")
	}
	return strings.Join(parts, "; ") + "."
}
