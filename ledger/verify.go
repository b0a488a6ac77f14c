package ledger

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"outreach/audit"
)

// Violation is one broken invariant.
type Violation struct {
	Collection string `json:"collection"`
	RecordID   string `json:"record_id"`
	Problem    string `json:"problem"`
}

// InFlight is a write whose writer may still be running: its change entry (or,
// in the serial protocol, its write intent) is pending and within its lease,
// or past it but newer than the last recovery sweep's cutoff (the next sweep
// settles it: AwaitingRecovery). It is not a violation: its writer finishes
// it, or recovery finishes or voids it once the lease has passed. Visible
// says whether its record already carries it (a reader can see the change
// before its entry is applied).
type InFlight struct {
	Collection       string    `json:"collection"`
	RecordID         string    `json:"record_id"`
	ChangeID         string    `json:"change_id"`
	Since            time.Time `json:"since"`
	Visible          bool      `json:"visible"`
	AwaitingRecovery bool      `json:"awaiting_recovery,omitempty"`
}

// due reports whether a write pending since at should have been settled:
// past its lease and, on a store other processes may share, older than the
// cutoff of the last recovery sweep (an entry whose lease ran out after that
// sweep is the next sweep's). On a store only this process writes, recovery
// at start settles everything, and anything past its lease is due.
func (s *Engine) due(at time.Time) bool {
	if time.Since(at) <= s.lease {
		return false
	}
	return s.exclusive || at.UnixNano() < s.sweptBefore.Load()
}

// VerifyResult is what Verify found: broken invariants, and the writes in
// flight, told apart.
type VerifyResult struct {
	Violations []Violation `json:"violations"`
	InFlight   []InFlight  `json:"in_flight"`
}

// WholeReadBound bounds a read of whole collections (verify, a backup's
// copy, a restore): hours, where one operation of the service is bounded
// to 30 s. A caller's earlier deadline still holds.
const WholeReadBound = 12 * time.Hour

// Verify returns the broken invariants (see VerifyReport).
func (s *Engine) Verify(ctx context.Context) ([]Violation, error) {
	r, err := s.VerifyReport(ctx)
	if err != nil {
		return nil, err
	}
	return r.Violations, nil
}

// VerifyReport checks the invariants of the write path over the whole store. For
// every record, its whole history: versions 1..n each have exactly one
// applied entry, the first creates it, each entry's before is the previous
// one's after, and the last is the entry its last_change names, whose after
// equals the record. Beside that: seq is unique and increasing over applied
// entries; no applied entry stands for a record that does not exist; no
// record is locked by a plan that is not in progress; no entry is pending
// past its lease. A record whose last change is still within its lease is
// a write in flight, not a violation: it is reported apart, as is a record
// whose last_change is the entry of a pending write intent within its lease
// (the serial protocol writes the record before inserting its entry). The
// tests and `outreach verify` share it.
//
// It reads each collection once (the embedded store answers any query by a
// scan, so per-record look-ups would make it quadratic).
//
// Its reads get a bound of their own (WholeReadBound): the store client's
// bound of one operation, which bounds a cursor's whole life too, would
// cut the change log's read short at 100,000 notes.
func (s *Engine) VerifyReport(ctx context.Context) (VerifyResult, error) {
	ctx, cancel := context.WithTimeout(ctx, WholeReadBound)
	defer cancel()
	var res VerifyResult
	if s.serialWrites {
		// No write of this process is between its steps while we read.
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	var out []Violation
	entryByID := map[string]*verifyEntry{}
	// The entries of pending write intents within their lease (serial
	// protocol): the record may carry one before change_log has it.
	intentEntry := map[string]*audit.Entry{}
	cur, err := s.coll(collIntents).Find(ctx, bson.M{"state": audit.StatePending})
	if err != nil {
		return res, err
	}
	var intents []intent
	if err := cur.All(ctx, &intents); err != nil {
		return res, err
	}
	if err := unpackIntents(intents); err != nil {
		return res, err
	}
	for _, in := range intents {
		if !s.due(in.At) {
			for _, e := range in.changes() {
				intentEntry[e.ID] = &e
			}
		}
	}
	visible := map[string]bool{}           // entry id -> its record carries it
	history := map[string][]*verifyEntry{} // coll/id -> applied entries
	// Unsorted, then sorted here by seq: the embedded store would decode
	// every entry a second time to sort them (verify holds them anyway, as
	// stored bytes).
	cur, err = s.coll(collChangeLog).Find(ctx, bson.M{})
	if err != nil {
		return res, err
	}
	var entries []verifyEntry
	for cur.Next(ctx) {
		e, err := readVerifyEntry(cur.Current)
		if err != nil {
			cur.Close(ctx)
			return res, err
		}
		entries = append(entries, e)
	}
	if err := cur.Err(); err != nil {
		cur.Close(ctx)
		return res, err
	}
	cur.Close(ctx)
	slices.SortStableFunc(entries, func(a, b verifyEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	for i := range entries {
		e := &entries[i]
		entryByID[e.ID] = e
		if e.State == audit.StateApplied {
			k := e.Collection + "/" + e.RecordID
			history[k] = append(history[k], e)
		}
	}
	planState := map[string]string{}
	cur, err = s.coll(collPlans).Find(ctx, bson.M{}, options.Find().SetProjection(bson.M{"state": 1}))
	if err != nil {
		return res, err
	}
	var plans []plan
	if err := cur.All(ctx, &plans); err != nil {
		return res, err
	}
	for _, p := range plans {
		planState[p.ID] = p.State
	}
	seen := map[string]bool{}
	for _, coll := range s.schema.Records {
		cur, err := s.coll(coll).Find(ctx, bson.M{})
		if err != nil {
			return res, err
		}
		// One record at a time: the store's records decoded at once were,
		// with the change log's states, most of a restore's memory.
		for cur.Next(ctx) {
			var rec bson.M
			if err := cur.Decode(&rec); err != nil {
				cur.Close(ctx)
				return res, err
			}
			id := fmt.Sprint(rec["_id"])
			seen[coll+"/"+id] = true
			bad := func(format string, args ...any) {
				out = append(out, Violation{coll, id, fmt.Sprintf(format, args...)})
			}
			if lb, ok := rec[fieldLockedBy].(string); ok {
				if st := planState[lb]; st != planLocking && st != planLocked {
					bad("locked by plan %s that is not in progress", lb)
				}
			}
			lc, _ := rec[fieldLastChange].(string)
			if lc == "" {
				bad("no last_change")
				continue
			}
			e, ok := entryByID[lc]
			if !ok {
				if ie := intentEntry[lc]; ie != nil && ie.Collection == coll && ie.RecordID == id {
					res.InFlight = append(res.InFlight, InFlight{coll, id, lc, ie.At, true, time.Since(ie.At) > s.lease})
					continue // the serial protocol's write in flight: its intent holds the entry
				}
				bad("last_change %s is not in change_log", lc)
				continue
			}
			if e.State == audit.StatePending && !s.due(e.At) {
				visible[lc] = true
				continue // a write in flight: recovery settles it if its writer stops
			}
			if e.State != audit.StateApplied {
				bad("last_change %s is %s", lc, e.State)
				continue
			}
			if e.RecordID != id || e.Collection != coll {
				bad("last_change %s is of %s/%s", lc, e.Collection, e.RecordID)
			}
			v, _ := AsInt(rec[fieldVersion])
			if v != e.VersionAfter {
				bad("version %v, entry says %d", rec[fieldVersion], e.VersionAfter)
			}
			if !SameState(s.redact(coll, Strip(rec)), e.afterState()) {
				bad("differs from the after state of %s", lc)
			}
			if problem := chainProblem(history[coll+"/"+id], v, lc); problem != "" {
				bad("history: %s", problem)
			}
		}
		err = cur.Err()
		cur.Close(ctx)
		if err != nil {
			return res, err
		}
	}
	for k, h := range history {
		if !seen[k] {
			out = append(out, Violation{h[0].Collection, h[0].RecordID, fmt.Sprintf("applied change %s of a record that does not exist", h[0].ID)})
		}
	}
	var last int64
	for _, e := range entries {
		if e.State == audit.StateAborted {
			continue
		}
		if e.Seq <= last {
			out = append(out, Violation{collChangeLog, e.ID, fmt.Sprintf("seq %d does not increase (after %d)", e.Seq, last)})
		}
		last = e.Seq
		if e.State == audit.StatePending && s.due(e.At) {
			out = append(out, Violation{collChangeLog, e.ID, "pending past its lease"})
		} else if e.State == audit.StatePending {
			res.InFlight = append(res.InFlight, InFlight{e.Collection, e.RecordID, e.ID, e.At, visible[e.ID], time.Since(e.At) > s.lease})
		}
		if e.State == audit.StateApplied && e.Sealed != nil {
			out = append(out, Violation{collChangeLog, e.ID, "applied entry still holds sealed values"})
		}
	}
	mv, err := s.mirrorViolations(ctx)
	if err != nil {
		return res, err
	}
	res.Violations = append(out, mv...)
	return res, nil
}

// chainProblem checks one record's applied entries (in seq order) against
// its version and last change: one entry per version from 1, each starting
// from the state the previous one left.
func chainProblem(h []*verifyEntry, version int64, last string) string {
	if int64(len(h)) != version {
		return fmt.Sprintf("%d applied changes for version %d", len(h), version)
	}
	byVersion := make([]*verifyEntry, len(h))
	for _, e := range h {
		if e.VersionAfter < 1 || e.VersionAfter > version || byVersion[e.VersionAfter-1] != nil {
			return fmt.Sprintf("change %s has version %d twice or out of range", e.ID, e.VersionAfter)
		}
		byVersion[e.VersionAfter-1] = e
	}
	for i, e := range byVersion {
		if i == 0 {
			if e.before != nil {
				return fmt.Sprintf("change %s (version 1) does not create the record", e.ID)
			}
			continue
		}
		if !SameState(e.beforeState(), byVersion[i-1].afterState()) {
			return fmt.Sprintf("change %s (version %d) does not start from the state change %s left", e.ID, e.VersionAfter, byVersion[i-1].ID)
		}
	}
	if byVersion[len(byVersion)-1].ID != last {
		return fmt.Sprintf("the last applied change is %s, but the record names %s", byVersion[len(byVersion)-1].ID, last)
	}
	return ""
}

// verifyEntry is a change entry as verify holds it: its fields decoded,
// its before and after kept as the stored bytes and decoded only when
// compared. At 100,000 notes the change log decoded whole (every state a
// tree of maps) was most of a restore's peak of 5.2 GB.
type verifyEntry struct {
	audit.Entry
	before, after bson.Raw // nil where the entry stores none (or null)
}

// readVerifyEntry reads a stored change entry (raw is the cursor's,
// copied where kept).
func readVerifyEntry(raw bson.Raw) (verifyEntry, error) {
	var e verifyEntry
	// The fields but the states: decoding the states here only to drop
	// them made verify three times slower (at 10,000 notes, 94 s against
	// 23 s before the states were kept as bytes).
	elems, err := bsoncore.Document(raw).Elements()
	if err != nil {
		return e, err
	}
	var kept [][]byte
	for _, el := range elems {
		if k := el.Key(); k != "before" && k != "after" {
			kept = append(kept, el)
		}
	}
	if err := bson.Unmarshal(bsoncore.BuildDocumentFromElements(nil, kept...), &e.Entry); err != nil {
		return e, err
	}
	state := func(key string) bson.Raw {
		v, err := raw.LookupErr(key)
		if err != nil || v.Type != bson.TypeEmbeddedDocument {
			return nil
		}
		return bytes.Clone(v.Document())
	}
	e.before, e.after = state("before"), state("after")
	return e, nil
}

// beforeState and afterState decode the entry's states as the store's
// reads decode a document (nested documents as maps), or nil.
func (e *verifyEntry) beforeState() bson.M { return decodeState(e.before) }
func (e *verifyEntry) afterState() bson.M  { return decodeState(e.after) }

func decodeState(raw bson.Raw) bson.M {
	if raw == nil {
		return nil
	}
	dec := bson.NewDecoder(bson.NewDocumentReader(bytes.NewReader(raw)))
	dec.DefaultDocumentM()
	var m bson.M
	if err := dec.Decode(&m); err != nil {
		return nil // the bytes were a document when read: Unmarshal of the entry decoded them
	}
	return m
}
