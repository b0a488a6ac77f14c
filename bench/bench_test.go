package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunMeasuresEveryTarget runs a tiny benchmark (a few notes, short
// cells) and checks its shape: every selected operation measured on the
// service and the raw store at each client count, without errors, and the
// table and the targets rendered. Speed itself is never asserted.
func TestRunMeasuresEveryTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a store and seeds it")
	}
	rep, err := Run(context.Background(), Config{Notes: 20, Cell: 50 * time.Millisecond, Clients: []int{1, 2},
		Only: []string{"get_note", "list_notes", "create_note", "update_note"}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, row := range rep.Rows {
		names = append(names, row.Name)
		for _, n := range []int{1, 2} {
			s, r := row.Service[n], row.Raw[n]
			if s.Calls < n || s.Errors > 0 || r.Calls < n || r.Errors > 0 {
				t.Errorf("%s at %d clients: service %+v, raw %+v", row.Name, n, s, r)
			}
		}
	}
	want := "get_note,list_notes (by contact),list_notes (search),create_note,update_note"
	if got := strings.Join(names, ","); got != want {
		t.Errorf("operations %s; want %s", got, want)
	}
	md := rep.Markdown()
	for _, s := range []string{"| get_note | 1 |", "| create_note ✎ | 2 |", "floor: trivial tool", "Targets:", "load average"} {
		if !strings.Contains(md, s) {
			t.Errorf("the table lacks %q:\n%s", s, md)
		}
	}
	if len(rep.Checks()) != 5*2+2 { // p50 and throughput per operation, more-than-one-client per write
		t.Errorf("%d checks; want 12", len(rep.Checks()))
	}
}
