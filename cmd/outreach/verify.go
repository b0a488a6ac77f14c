package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/repo"
)

// verifyReport is what `outreach verify` prints, readable or (--json) as is.
type verifyReport struct {
	OK bool `json:"ok"`
	// Checked is what was read: records per collection and the change log's entries.
	Checked    map[string]int64 `json:"checked"`
	ChangeLog  int64            `json:"change_log_entries"`
	Invariants []string         `json:"invariants"`
	Violations []verifyProblem  `json:"violations"`
	// InFlight are writes whose writer may still be running (within their
	// lease, or awaiting the next recovery sweep): not violations.
	InFlight []repo.InFlight `json:"in_flight"`
	// Store is what the capability probes found.
	Store repo.Capabilities `json:"store"`
}

// inFlightLine starts each in-flight write's line of the readable report.
const inFlightLine = "in flight (within its lease, or awaiting the next recovery sweep; finished or voided by recovery): "

type verifyProblem struct {
	repo.Violation
	Repair string `json:"repair"`
}

// verifyInvariants says what Verify checks, in the words of the invariants (docs/write-path.md).
var verifyInvariants = []string{
	"every record equals the after-state of the change entry its last_change names, and its version matches",
	"every record's history is whole: versions 1..n each have one applied entry, the first creates it, each starts where the previous ended",
	"no applied change entry stands for a record that does not exist",
	"seq increases strictly over applied entries",
	"no entry is pending past its lease and no record is locked by a plan that is not in progress",
	"the service's own indexes (embedded store, once built) hold every record as it is stored",
}

// repairs are what to do about a violation, by the start of its problem.
var repairs = []struct{ prefix, repair string }{
	{"differs from the after state", "the record was changed outside the write path (by hand, on the store's files or a MongoDB server): put it back to the after state of that change entry (get_change shows it), e.g. from a backup of the data, then run verify again; an update through the tools does not repair it, since its entry would start from the altered state"},
	{"version ", "the record was changed outside the write path: put it back to the after state of its last_change entry (get_change shows it), then run verify again"},
	{"no last_change", "the record was inserted outside the write path: remove it with the server stopped, or recreate it through its create tool and remove the copy; then run verify again"},
	{"last_change ", "the record or the change log was edited outside the service: restore both from the same backup"},
	{"history:", "the record's change entries were edited or removed outside the service: restore the change log from a backup"},
	{"applied change ", "a record was deleted outside the service (it never deletes): restore it from a backup"},
	{"seq ", "the change log was edited outside the service: restore it from a backup"},
	{"pending past its lease", "a write was interrupted: start the server (recovery runs at start and every 10 seconds), then run verify again"},
	{"locked by plan", "a rollback plan was interrupted: start the server (recovery finishes or undoes it), then run verify again"},
	{"stored, but missing from the service's index", "a record reached the store outside the write path (or the index missed a write): restart the server, which rebuilds its indexes from the store, then run verify again"},
	{"in the service's index, but not stored", "a record left the store outside the service (it never deletes): restore it from a backup, or restart the server to rebuild its indexes from the store"},
	{"the service's index holds another state", "the record was changed outside the write path, or the index missed a write: restart the server, which rebuilds its indexes from the store, then run verify again"},
	{"applied entry still holds sealed values", "an interrupted write left sealed values: start the server so recovery completes it, then run verify again"},
}

func repairOf(problem string) string {
	for _, r := range repairs {
		if strings.HasPrefix(problem, r.prefix) {
			return r.repair
		}
	}
	return "see the invariants in docs/write-path.md; restore the record from a backup if it was edited outside the service"
}

// runVerify checks the store and builds the report.
func runVerify(ctx context.Context, store *repo.Store, prog io.Writer) (*verifyReport, error) {
	p := newProgress(prog, "verify: reading every record and the change log", -1)
	res, err := store.VerifyReport(ctx)
	p.finish()
	if err != nil {
		return nil, err
	}
	vs := res.Violations
	db := store.RawCollections().Database
	r := &verifyReport{OK: len(vs) == 0, Checked: map[string]int64{}, Invariants: verifyInvariants, Violations: []verifyProblem{},
		InFlight: append([]repo.InFlight{}, res.InFlight...), Store: store.Capabilities()}
	for _, c := range repo.RecordCollections() {
		if r.Checked[c], err = db.Collection(c).CountDocuments(ctx, bson.D{}); err != nil {
			return nil, err
		}
	}
	if r.ChangeLog, err = db.Collection("change_log").CountDocuments(ctx, bson.D{}); err != nil {
		return nil, err
	}
	for _, v := range vs {
		r.Violations = append(r.Violations, verifyProblem{Violation: v, Repair: repairOf(v.Problem)})
	}
	return r, nil
}

// write prints the report.
func (r *verifyReport) write(w io.Writer, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(r)
		return
	}
	var total int64
	for _, c := range repo.RecordCollections() {
		total += r.Checked[c]
	}
	if r.OK {
		fmt.Fprintf(w, "ok: every record matches its change entry (%d records, %d change entries checked)\n", total, r.ChangeLog)
	} else {
		fmt.Fprintf(w, "FAILED: %d problems in %d records and %d change entries; each with its repair below\n", len(r.Violations), total, r.ChangeLog)
	}
	for _, f := range r.InFlight {
		b, _ := json.Marshal(f)
		fmt.Fprintf(w, "%s%s\n", inFlightLine, b)
	}
	c := r.Store
	fmt.Fprintf(w, "store: %s; write mode %s, transactions %v, atomic updates %v, serial writes %v, $unionWith %v, text search %v\n",
		c.Server, c.WriteMode, c.Transactions, c.AtomicUpdates, c.SerialWrites, c.UnionWith, c.TextSearch)
	fmt.Fprintln(w, "\nChecked (records per collection):")
	for _, c := range repo.RecordCollections() {
		fmt.Fprintf(w, "  %-16s %7d\n", c, r.Checked[c])
	}
	fmt.Fprintf(w, "  %-16s %7d entries\n\nInvariants:\n", "change_log", r.ChangeLog)
	for _, inv := range r.Invariants {
		fmt.Fprintf(w, "  - %s\n", inv)
	}
	if r.OK {
		return
	}
	fmt.Fprintf(w, "\nProblems:\n")
	for _, v := range r.Violations {
		fmt.Fprintf(w, "  %s %s: %s\n    repair: %s\n", v.Collection, v.RecordID, v.Problem, v.Repair)
	}
}
