package audit

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Rollback planning works on the generic stored states a change entry keeps
// (before and after), never on a record kind's Go type, so every kind, present
// and future, is rolled back by the same code:
//
//   - a create (no before) is undone by setting archived_at;
//   - any other change (update, archive, restore, link, unlink, rollback) by
//     setting each top-level field it changed back to its before value;
//   - a field holding an array of objects with an "id" (note links, contact
//     affiliations, email opportunity links) is undone element by element:
//     elements the change added are removed, elements it removed are put
//     back, elements it modified get their old value, and elements others
//     added or changed since are left alone.
//
// A field the rollback would overwrite although it no longer holds what the
// change wrote is a conflict. updated_at is bookkeeping: it is set to the
// rollback's time and never conflicts.

// Fields with fixed meaning in every record.
const (
	fieldID         = "_id"
	fieldUpdatedAt  = "updated_at"
	fieldArchivedAt = "archived_at"
	elementID       = "id"
)

// Conflict is a field a rollback would overwrite although it has changed
// since the change being rolled back: its current value, and the value the
// change left there (expected).
type Conflict struct {
	Field    string `json:"field"`
	Current  any    `json:"current"`
	Expected any    `json:"expected"`
}

// Reversible reports whether e can be rolled back: not an action that left
// the system (a message sent).
func Reversible(e Entry) bool { return e.Reversible && e.Action != ActionSend }

// Revert returns the state that undoes change c on a record whose stored
// state (without bookkeeping fields) is cur, at time now, and the conflicts.
// The state returned is what a forced rollback writes.
func Revert(c Entry, cur bson.M, now time.Time) (bson.M, []Conflict) {
	next := make(bson.M, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	var conflicts []Conflict
	if c.Before == nil {
		// A create wrote every field: any that changed since is a conflict,
		// though archiving keeps them all.
		for _, k := range keys(c.After, cur) {
			if !Equal(cur[k], c.After[k]) {
				conflicts = append(conflicts, Conflict{Field: k, Current: cur[k], Expected: c.After[k]})
			}
		}
		if cur[fieldArchivedAt] == nil {
			next[fieldArchivedAt] = bson.NewDateTimeFromTime(now)
		}
	} else {
		for _, k := range keys(c.Before, c.After) {
			if Equal(c.Before[k], c.After[k]) {
				continue
			}
			if isElements(c.Before[k]) && isElements(c.After[k]) && isElements(cur[k]) {
				_, had := c.Before[k]
				v, ok, cs := revertElements(k, c.Before[k], had, c.After[k], cur[k])
				conflicts = append(conflicts, cs...)
				if ok {
					next[k] = v
				} else {
					delete(next, k)
				}
				continue
			}
			if !Equal(cur[k], c.After[k]) {
				conflicts = append(conflicts, Conflict{Field: k, Current: cur[k], Expected: c.After[k]})
			}
			if v, ok := c.Before[k]; ok {
				next[k] = v
			} else {
				delete(next, k)
			}
		}
	}
	if _, ok := cur[fieldUpdatedAt]; ok {
		next[fieldUpdatedAt] = bson.NewDateTimeFromTime(now)
	}
	return next, conflicts
}

// keys returns the fields of the documents, sorted, without _id and
// updated_at.
func keys(docs ...bson.M) []string {
	var out []string
	for _, d := range docs {
		for k := range d {
			if k != fieldID && k != fieldUpdatedAt && !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// isElements reports whether v is absent, or an array whose elements are all
// objects with a string id.
func isElements(v any) bool {
	if v == nil {
		return true
	}
	a, ok := array(v)
	if !ok {
		return false
	}
	for _, el := range a {
		if elemID(el) == "" {
			return false
		}
	}
	return true
}

func array(v any) ([]any, bool) {
	switch x := v.(type) {
	case bson.A:
		return x, true
	case []any:
		return x, true
	}
	return nil, false
}

func elemID(el any) string {
	var id any
	switch d := el.(type) {
	case bson.M:
		id = d[elementID]
	case map[string]any:
		id = d[elementID]
	case bson.D:
		for _, e := range d {
			if e.Key == elementID {
				id = e.Value
			}
		}
	}
	s, _ := id.(string)
	return s
}

func byID(a []any) map[string]any {
	m := make(map[string]any, len(a))
	for _, el := range a {
		m[elemID(el)] = el
	}
	return m
}

// revertElements undoes, on the current array cur, what a change did to an
// array of objects with ids (before → after; had says the field was present
// before). It returns the new value, whether the field is present, and the
// conflicts.
func revertElements(field string, before any, had bool, after, cur any) (any, bool, []Conflict) {
	if Equal(cur, after) {
		return before, had, nil
	}
	b, _ := array(before)
	a, _ := array(after)
	c, _ := array(cur)
	inBefore, inAfter, inCur := byID(b), byID(a), byID(c)
	name := func(id string) string { return fmt.Sprintf("%s[%s]", field, id) }
	var conflicts []Conflict
	out := make([]any, 0, len(c)+len(b))
	present := map[string]bool{}
	for _, el := range c {
		id := elemID(el)
		old, wasBefore := inBefore[id]
		wrote, isAfter := inAfter[id]
		switch {
		case isAfter && !Equal(el, wrote) && (!wasBefore || !Equal(old, wrote)):
			// Changed by someone else since: a conflict. Forced, the change's
			// own effect is undone all the same.
			conflicts = append(conflicts, Conflict{Field: name(id), Current: el, Expected: wrote})
			if wasBefore {
				out = append(out, old)
				present[id] = true
			}
		case isAfter && !wasBefore:
			// Added by the change: removed.
		case isAfter && !Equal(old, wrote):
			// Modified by the change: its old value back.
			out = append(out, old)
			present[id] = true
		default:
			// Untouched by the change, or added by someone else since.
			out = append(out, el)
			present[id] = true
		}
	}
	// Elements the change modified that are gone since were removed by someone
	// else: a conflict; forced, they come back as they were before.
	for _, el := range a {
		id := elemID(el)
		if old, ok := inBefore[id]; ok && !Equal(old, el) && inCur[id] == nil {
			conflicts = append(conflicts, Conflict{Field: name(id), Current: nil, Expected: el})
		}
	}
	// Put back what the change removed (and what others removed of what it
	// modified), each after the element it followed before, so an undisturbed
	// array gets its exact old order back.
	for i, el := range b {
		id := elemID(el)
		if present[id] {
			continue
		}
		if _, kept := inAfter[id]; kept && Equal(inAfter[id], el) {
			continue // untouched by the change and removed by someone else since
		}
		at := 0
		for j := i - 1; j >= 0; j-- {
			if k := slices.IndexFunc(out, func(x any) bool { return elemID(x) == elemID(b[j]) }); k >= 0 {
				at = k + 1
				break
			}
		}
		out = slices.Insert(out, at, el)
		present[id] = true
	}
	if Equal(out, before) {
		return before, had, conflicts
	}
	return bson.A(out), true, conflicts
}

// Equal compares two stored values: documents whatever their key order or Go
// type, numbers whatever their integer width, dates whatever their Go type,
// and an absent value equal to null.
func Equal(a, b any) bool {
	return reflect.DeepEqual(canonical(a), canonical(b))
}

func canonical(v any) any {
	switch x := v.(type) {
	case bson.M:
		return canonicalMap(x)
	case map[string]any:
		return canonicalMap(x)
	case bson.D:
		m := make(map[string]any, len(x))
		for _, e := range x {
			m[e.Key] = e.Value
		}
		return canonicalMap(m)
	case bson.A:
		return canonicalSlice(x)
	case []any:
		return canonicalSlice(x)
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case time.Time:
		return bson.NewDateTimeFromTime(x)
	case *time.Time:
		if x == nil {
			return nil
		}
		return bson.NewDateTimeFromTime(*x)
	case bson.Null:
		return nil
	}
	return v
}

func canonicalMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, e := range m {
		if c := canonical(e); c != nil {
			out[k] = c
		}
	}
	return out
}

func canonicalSlice(a []any) any {
	// An empty array equals an absent one: stored shapes vary between [] and
	// null for "none", and neither is a change a rollback must undo.
	if len(a) == 0 {
		return nil
	}
	out := make([]any, len(a))
	for i, e := range a {
		out[i] = canonical(e)
	}
	return out
}

// Record is the stored state of a record that a rollback plans against.
type Record struct {
	// State is the stored state without bookkeeping fields; nil when the
	// record does not exist.
	State   bson.M
	Version int64
}

// RecordKey names a record in a plan's map of records.
func RecordKey(collection, id string) string { return collection + "/" + id }

// Step is one change of a rollback plan and what undoing it writes.
type Step struct {
	Change Entry
	// From is the record's state the step starts from (what the earlier
	// steps of the plan leave), at Version; To is the state it writes.
	From      bson.M
	To        bson.M
	Version   int64
	Conflicts []Conflict
}

// Changes returns what the step writes: the fields set to a new value, and
// the fields removed.
func (st Step) Changes() (bson.M, []string) {
	set := bson.M{}
	var unset []string
	for _, k := range keys(st.From, st.To) {
		v, ok := st.To[k]
		switch {
		case !ok:
			if _, was := st.From[k]; was {
				unset = append(unset, k)
			}
		case !Equal(st.From[k], v):
			set[k] = v
		}
	}
	if v, ok := st.To[fieldUpdatedAt]; ok {
		set[fieldUpdatedAt] = v
	}
	return set, unset
}

// Skipped is a change a plan leaves alone because its effect is already
// gone, and why.
type Skipped struct {
	Change Entry
	// RolledBackBy is the rollback that already undid the change, if any.
	RolledBackBy string
	Reason       string
}

// Plan is the rollback of a set of changes.
type Plan struct {
	// Steps are in the order they are written: newest change first.
	Steps []Step
	// NotReversible are changes that left the system (a message sent).
	NotReversible []Entry
	// Skipped are changes whose effect an earlier rollback already undid.
	Skipped []Skipped
}

// Conflicts counts the conflicting fields of the plan.
func (p Plan) Conflicts() int {
	n := 0
	for _, st := range p.Steps {
		n += len(st.Conflicts)
	}
	return n
}

// PlanRollback plans the rollback of changes, newest (highest seq) first.
// records holds the current state of every record the changes touch (by
// RecordKey); skip holds, by change id, the changes to leave alone because
// their effect is already gone. Several changes of one record compose: each is planned
// against the state the earlier steps leave, and with the version they
// leave, so the steps chain. A step's To is what a forced rollback writes;
// a step with conflicts is still planned through, so a dry run shows the
// whole plan. PlanRollback does no I/O.
func PlanRollback(changes []Entry, records map[string]Record, skip map[string]Skipped, now time.Time) Plan {
	sorted := slices.Clone(changes)
	slices.SortFunc(sorted, func(a, b Entry) int { return -cmpInt(a.Seq, b.Seq) })
	state := make(map[string]Record, len(records))
	for k, r := range records {
		state[k] = r
	}
	var p Plan
	for _, c := range sorted {
		if sk, ok := skip[c.ID]; ok {
			sk.Change = c
			p.Skipped = append(p.Skipped, sk)
			continue
		}
		if !Reversible(c) {
			p.NotReversible = append(p.NotReversible, c)
			continue
		}
		key := RecordKey(c.Collection, c.RecordID)
		r := state[key]
		st := Step{Change: c, From: r.State, Version: r.Version}
		if r.State == nil {
			st.Conflicts = []Conflict{{Field: fieldID, Current: nil, Expected: c.RecordID}}
		} else {
			st.To, st.Conflicts = Revert(c, r.State, now)
			state[key] = Record{State: st.To, Version: r.Version + 1}
		}
		p.Steps = append(p.Steps, st)
	}
	return p
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
