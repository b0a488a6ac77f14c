package audit

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"
)

var (
	t0  = bson.NewDateTimeFromTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1  = bson.NewDateTimeFromTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
	now = time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	nt  = bson.NewDateTimeFromTime(now)
)

func link(id, to string) bson.M { return bson.M{"id": id, "contact_id": to} }

// doc builds a record state with the Meta fields every record has.
func doc(kv ...any) bson.M {
	d := bson.M{"_id": "r1", "created_at": t0, "updated_at": t0, "archived_at": nil}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "<absent>" {
			delete(d, kv[i].(string))
			continue
		}
		d[kv[i].(string)] = kv[i+1]
	}
	return d
}

func TestRevert(t *testing.T) {
	tests := []struct {
		name          string
		before, after bson.M
		cur           bson.M
		want          bson.M
		conflicts     []string
	}{
		{name: "create is archived",
			after: doc("name", "A"), cur: doc("name", "A"),
			want: doc("name", "A", "archived_at", nt, "updated_at", nt)},
		{name: "create changed since conflicts on every changed field",
			after: doc("name", "A"), cur: doc("name", "B", "tier", int32(2)),
			want: doc("name", "B", "tier", int32(2), "archived_at", nt, "updated_at", nt), conflicts: []string{"name", "tier"}},
		{name: "create already archived keeps its archived_at",
			after: doc("name", "A"), cur: doc("name", "A", "archived_at", t1),
			want: doc("name", "A", "archived_at", t1, "updated_at", nt), conflicts: []string{"archived_at"}},
		{name: "update sets changed fields back, others untouched",
			before: doc("name", "A", "tier", int32(1)), after: doc("name", "B", "tier", int32(1), "updated_at", t1),
			cur:  doc("name", "B", "tier", int32(1), "bio", "x", "updated_at", t1),
			want: doc("name", "A", "tier", int32(1), "bio", "x", "updated_at", nt)},
		{name: "update removes a field it added",
			before: doc("name", "A"), after: doc("name", "A", "email", "a@x"),
			cur: doc("name", "A", "email", "a@x"), want: doc("name", "A", "updated_at", nt)},
		{name: "update changed since conflicts",
			before: doc("name", "A"), after: doc("name", "B"), cur: doc("name", "C"),
			want: doc("name", "A", "updated_at", nt), conflicts: []string{"name"}},
		{name: "updated_at alone never conflicts",
			before: doc("name", "A"), after: doc("name", "B", "updated_at", t1), cur: doc("name", "B", "updated_at", t0),
			want: doc("name", "A", "updated_at", nt)},
		{name: "archive is restored",
			before: doc(), after: doc("archived_at", t1), cur: doc("archived_at", t1),
			want: doc("updated_at", nt)},
		{name: "restore is archived again at its old time",
			before: doc("archived_at", t1), after: doc(), cur: doc(),
			want: doc("archived_at", t1, "updated_at", nt)},
		{name: "restored since: archive rollback conflicts",
			before: doc(), after: doc("archived_at", t1), cur: doc(),
			want: doc("updated_at", nt), conflicts: []string{"archived_at"}},
		{name: "link removed, links added by others kept",
			before: doc("links", bson.A{link("l1", "c1")}), after: doc("links", bson.A{link("l1", "c1"), link("l2", "c2")}),
			cur:  doc("links", bson.A{link("l1", "c1"), link("l2", "c2"), link("l3", "c3")}),
			want: doc("links", bson.A{link("l1", "c1"), link("l3", "c3")}, "updated_at", nt)},
		{name: "unlink put back in its place",
			before: doc("links", bson.A{link("l1", "c1"), link("l2", "c2"), link("l3", "c3")}),
			after:  doc("links", bson.A{link("l1", "c1"), link("l3", "c3")}),
			cur:    doc("links", bson.A{link("l1", "c1"), link("l3", "c3"), link("l4", "c4")}),
			want:   doc("links", bson.A{link("l1", "c1"), link("l2", "c2"), link("l3", "c3"), link("l4", "c4")}, "updated_at", nt)},
		{name: "unlink of the first element",
			before: doc("links", bson.A{link("l1", "c1"), link("l2", "c2")}), after: doc("links", bson.A{link("l2", "c2")}),
			cur:  doc("links", bson.A{link("l2", "c2")}),
			want: doc("links", bson.A{link("l1", "c1"), link("l2", "c2")}, "updated_at", nt)},
		{name: "link added and already removed by someone else",
			before: doc("links", bson.A{link("l1", "c1")}), after: doc("links", bson.A{link("l1", "c1"), link("l2", "c2")}),
			cur:  doc("links", bson.A{link("l1", "c1"), link("l3", "c3")}),
			want: doc("links", bson.A{link("l1", "c1"), link("l3", "c3")}, "updated_at", nt)},
		{name: "element modified by the change and since: conflict",
			before: doc("aff", bson.A{bson.M{"id": "a1", "primary": true}}),
			after:  doc("aff", bson.A{bson.M{"id": "a1", "primary": false}, bson.M{"id": "a2", "primary": true}}),
			cur:    doc("aff", bson.A{bson.M{"id": "a1", "primary": false, "role": "x"}, bson.M{"id": "a2", "primary": true}}),
			want:   doc("aff", bson.A{bson.M{"id": "a1", "primary": true}}, "updated_at", nt), conflicts: []string{"aff[a1]"}},
		{name: "element modified by the change only",
			before: doc("aff", bson.A{bson.M{"id": "a1", "primary": true}, bson.M{"id": "a3", "primary": false}}),
			after:  doc("aff", bson.A{bson.M{"id": "a1", "primary": false}, bson.M{"id": "a3", "primary": false}, bson.M{"id": "a2", "primary": true}}),
			cur:    doc("aff", bson.A{bson.M{"id": "a1", "primary": false}, bson.M{"id": "a3", "primary": false, "role": "y"}, bson.M{"id": "a2", "primary": true}}),
			want:   doc("aff", bson.A{bson.M{"id": "a1", "primary": true}, bson.M{"id": "a3", "primary": false, "role": "y"}}, "updated_at", nt)},
		{name: "element added by the change and changed since: conflict",
			before: doc("links", bson.A{}), after: doc("links", bson.A{link("l1", "c1")}),
			cur:  doc("links", bson.A{link("l1", "c9")}),
			want: doc("links", bson.A{}, "updated_at", nt), conflicts: []string{"links[l1]"}},
		{name: "first link of an absent array",
			before: doc(), after: doc("links", bson.A{link("l1", "c1")}), cur: doc("links", bson.A{link("l1", "c1")}),
			want: doc("updated_at", nt)},
		{name: "scalar arrays are whole values",
			before: doc("topics", bson.A{"a"}), after: doc("topics", bson.A{"a", "b"}), cur: doc("topics", bson.A{"a", "b", "c"}),
			want: doc("topics", bson.A{"a"}, "updated_at", nt), conflicts: []string{"topics"}},
		{name: "int widths and empty arrays compare equal",
			before: doc("tier", int32(1), "tags", bson.A{}), after: doc("tier", int64(2), "tags", nil), cur: doc("tier", int32(2), "tags", "<absent>"),
			want: doc("tier", int32(1), "tags", "<absent>", "updated_at", nt)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, conflicts := Revert(Entry{Before: tt.before, After: tt.after}, tt.cur, now)
			var fields []string
			for _, c := range conflicts {
				fields = append(fields, c.Field)
			}
			if diff := cmp.Diff(tt.conflicts, fields); diff != "" {
				t.Errorf("conflicts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
		})
	}
}

// Undoing an undo gives back the state the undo replaced.
func TestRevertOfARevert(t *testing.T) {
	states := []bson.M{
		doc("name", "A", "links", bson.A{link("l1", "c1")}),
		doc("name", "B", "links", bson.A{link("l1", "c1"), link("l2", "c2")}, "updated_at", t1),
	}
	change := Entry{Before: states[0], After: states[1]}
	undone, cs := Revert(change, states[1], now)
	if len(cs) > 0 {
		t.Fatal(cs)
	}
	redone, cs := Revert(Entry{Before: states[1], After: undone}, undone, now.Add(time.Hour))
	if len(cs) > 0 {
		t.Fatal(cs)
	}
	want := doc("name", "B", "links", bson.A{link("l1", "c1"), link("l2", "c2")}, "updated_at", bson.NewDateTimeFromTime(now.Add(time.Hour)))
	if diff := cmp.Diff(want, redone); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestPlanRollbackComposesChangesOfOneRecord(t *testing.T) {
	s0 := doc("name", "A")
	s1 := doc("name", "B", "updated_at", t1)
	s2 := doc("name", "B", "updated_at", t1, "archived_at", t1)
	other := doc("name", "X")
	changes := []Entry{
		{ID: "c1", Seq: 1, Collection: "outlets", RecordID: "r1", Action: ActionUpdate, Before: s0, After: s1, Reversible: true},
		{ID: "c3", Seq: 3, Collection: "outlets", RecordID: "r1", Action: ActionArchive, Before: s1, After: s2, Reversible: true},
		{ID: "c2", Seq: 2, Collection: "outlets", RecordID: "r2", Action: ActionSend, Before: other, After: other},
		{ID: "c4", Seq: 4, Collection: "outlets", RecordID: "r2", Action: ActionUpdate, Before: other, After: other, Reversible: true},
	}
	records := map[string]Record{
		RecordKey("outlets", "r1"): {State: s2, Version: 7},
		RecordKey("outlets", "r2"): {State: other, Version: 3},
	}
	p := PlanRollback(changes, records, map[string]Skipped{"c4": {RolledBackBy: "rb"}}, now)
	var order []string
	for _, st := range p.Steps {
		order = append(order, st.Change.ID)
	}
	if diff := cmp.Diff([]string{"c3", "c1"}, order); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if p.Conflicts() != 0 || len(p.NotReversible) != 1 || len(p.Skipped) != 1 || p.Skipped[0].RolledBackBy != "rb" || p.Skipped[0].Change.ID != "c4" {
		t.Fatalf("plan %+v", p)
	}
	if p.Steps[0].Version != 7 || p.Steps[1].Version != 8 {
		t.Errorf("versions %d, %d; want 7, 8 (chained)", p.Steps[0].Version, p.Steps[1].Version)
	}
	if diff := cmp.Diff(doc("name", "A", "updated_at", nt), p.Steps[1].To); diff != "" {
		t.Errorf("final state (-want +got):\n%s", diff)
	}
	set, unset := p.Steps[0].Changes()
	if diff := cmp.Diff(bson.M{"archived_at": nil, "updated_at": nt}, set); diff != "" || unset != nil {
		t.Errorf("changes of step 1 (-want +got):\n%s %v", diff, unset)
	}
}
