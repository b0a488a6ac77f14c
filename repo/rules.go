package repo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/ledger"
)

// Rules of each record kind, checked on a proposed state of a record as a
// whole. The tools keep them by construction (each call validates its own
// arguments); a rollback writes stored states back generically, field by
// field, and so can combine values no call would have written. Before it
// writes anything, a rollback checks the state it would leave each record
// in against the rule of the record's kind (stateRules), and refuses the
// whole rollback on a violation. force never overrides a rule: it only
// writes over fields changed since.
//
// Links to archived records are allowed: archiving never removed links
// (an archived outlet's contacts still name it, and get_X shows the linked
// record as archived), so a rollback that restores history may restore such
// a link. A link to a record that does not exist is refused.

// StateRule checks state, the proposed state of record id of one kind,
// against the records around it as v shows them. It returns a *RuleViolation
// for a broken rule, and any other error when it could not check.
type StateRule func(ctx context.Context, v *RuleView, id string, state bson.M) error

// stateRules holds the rule of each kind of record a rollback may write,
// registered with RegisterRule by the file or the area of the kind (e.g.
// notes.go, repo/pitches): a rule moves with its kind's code. Users, agent
// keys and settings are changed by admin tools only and have no rule across
// fields or records.
var stateRules = map[string]StateRule{}

// RuleViolation is a broken rule of a record kind: the rule's name and a
// message that says how to fix it.
type RuleViolation struct {
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

func (v *RuleViolation) Error() string { return v.Rule + ": " + v.Message }

func Violated(rule, format string, args ...any) *RuleViolation {
	return &RuleViolation{Rule: rule, Message: fmt.Sprintf(format, args...)}
}

// FieldViolation turns a field validation error of a kind's own check into
// a violation of rule.
func FieldViolation(rule string, err error) error {
	if e, ok := err.(*Error); ok && (e.Code == CodeInvalid || e.Code == CodeFailedPrecondition) {
		return Violated(rule, "%s; change the record with its update tool first, or roll back the later change of that field too", e.Message)
	}
	return err
}

// RuleView shows the records as a set of pending writes would leave them:
// pending states (by audit.RecordKey) win over the stored ones. With no
// pending states it is the store as it is, which is what the tools check
// against.
type RuleView struct {
	s       *Store
	pending map[string]bson.M
	// read, when set (a plan's check: every step against the same view),
	// keeps each stored record read, so that a record many steps link to
	// (the contact of a thousand notes) is read once per check.
	read map[string]bson.M
}

func (s *Store) View() *RuleView { return &RuleView{s: s} }

// Store is the store the view reads (its settings: the pitch window).
func (v *RuleView) Store() *Store { return v.s }

// Record returns the state of Record id of coll, or nil when it does not
// exist.
func (v *RuleView) Record(ctx context.Context, coll, id string) (bson.M, error) {
	if st, ok := v.pending[audit.RecordKey(coll, id)]; ok {
		return st, nil
	}
	if ledger.CheckID(id) != nil {
		return nil, nil
	}
	k := audit.RecordKey(coll, id)
	if st, ok := v.read[k]; ok {
		return st, nil
	}
	var doc bson.M
	err := v.s.coll(coll).FindOne(ctx, bson.M{"_id": id}).Decode(&doc)
	if err := ledger.DriverErr(err, kinds[coll], id); err != nil {
		if ErrorCode(err) == CodeNotFound {
			if v.read != nil {
				v.read[k] = nil
			}
			return nil, nil
		}
		return nil, err
	}
	st := ledger.Strip(doc)
	if v.read != nil {
		v.read[k] = st
	}
	return st, nil
}

// Matching returns the records of coll for which match holds, as the view
// shows them. filter narrows the stored records read and must hold for
// every record match accepts.
func (v *RuleView) Matching(ctx context.Context, coll string, filter bson.M, match func(bson.M) bool) ([]bson.M, error) {
	var docs []bson.M
	if err := v.s.findAll(ctx, coll, filter, nil, &docs); err != nil {
		return nil, err
	}
	var out []bson.M
	seen := map[string]bool{}
	for _, d := range docs {
		id := fmt.Sprint(d["_id"])
		seen[id] = true
		st := ledger.Strip(d)
		if p, ok := v.pending[audit.RecordKey(coll, id)]; ok {
			st = p
		}
		if match(st) {
			out = append(out, st)
		}
	}
	for k, st := range v.pending {
		id, ok := strings.CutPrefix(k, audit.RecordKey(coll, ""))
		if ok && !seen[id] && match(st) {
			out = append(out, st)
		}
	}
	return out, nil
}

// Stored returns the stored state of record id of coll, whatever the
// pending writes, or nil when it does not exist: what a rule compares a
// proposed state with (a change of outlet, a flag lifted).
func (v *RuleView) Stored(ctx context.Context, coll, id string) (bson.M, error) {
	return v.s.View().Record(ctx, coll, id)
}

// Linked checks that id, named by what (e.g. "outlet_id"), is a record of
// coll. An archived record counts: see the package rules above.
func (v *RuleView) Linked(ctx context.Context, coll, what, id string) error {
	if id == "" {
		return nil
	}
	st, err := v.Record(ctx, coll, id)
	if err != nil {
		return err
	}
	if st == nil {
		return Violated("link_target_exists", "%s names %s %s, which does not exist; a link must name an existing record: remove that link from the record first (its update or unlink tool), or leave this change as it is", what, kinds[coll], id)
	}
	return nil
}

func Str(st bson.M, k string) string { s, _ := st[k].(string); return s }

// DecodeState decodes a proposed state into a record of its kind.
func DecodeState[T any](id string, state bson.M) (*T, error) {
	rec := new(T)
	if err := ledger.DecodeM(state, rec); err != nil {
		return nil, fmt.Errorf("decode state of %s: %w", id, err)
	}
	return rec, nil
}

// checkRules checks the state a plan leaves each record in against the rule
// of the record's kind, with every record as the whole plan leaves it: a
// plan is written as one unit, so no call ever sees the states in between
// (a session rollback may, say, set coverage back to an older campaign one
// step before its opportunity). It returns the violations by the index of
// the step that writes the record's final state.
func (s *Store) checkRules(ctx context.Context, p audit.Plan) (map[int][]RuleViolation, error) {
	v := &RuleView{s: s, pending: map[string]bson.M{}, read: map[string]bson.M{}}
	last := map[string]int{}
	for i, st := range p.Steps {
		if st.To == nil {
			continue
		}
		k := audit.RecordKey(st.Change.Collection, st.Change.RecordID)
		v.pending[k] = st.To
		last[k] = i
	}
	out := map[int][]RuleViolation{}
	for i, st := range p.Steps {
		k := audit.RecordKey(st.Change.Collection, st.Change.RecordID)
		rule := stateRules[st.Change.Collection]
		if st.To == nil || last[k] != i || rule == nil {
			continue
		}
		err := rule(ctx, v, st.Change.RecordID, st.To)
		var vi *RuleViolation
		switch {
		case errors.As(err, &vi):
			out[i] = append(out[i], *vi)
		case err != nil:
			return nil, fmt.Errorf("check the rules of %s %s: %w", KindOf(st.Change.Collection), st.Change.RecordID, err)
		}
	}
	return out, nil
}

// GuardError is a refused guard: the rule's name, its message, and the
// argument the tools name.
type GuardError struct {
	Rule, Field, Message string
}

// ToolError is the guard as a tool's error: failed_precondition naming the
// field.
func (g *GuardError) ToolError() error {
	return &Error{Code: CodeFailedPrecondition, Field: g.Field, Message: g.Message}
}

// AsViolation is the guard as a broken rule of a rollback.
func (g *GuardError) AsViolation() error {
	return Violated(g.Rule, "%s; a rollback cannot bring back a state this guard forbids", g.Message)
}
