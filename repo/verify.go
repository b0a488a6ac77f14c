package repo

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
)

// recordCollections are the collections written through the write path.
var recordCollections = []string{collOutlets, collContacts, collChannels, collCampaigns, collOpportunities,
	collCoverage, collMedia, collNotes, collEmails, collUsers, collKeys, collSettings}

// Violation is one broken invariant.
type Violation struct {
	Collection string `json:"collection"`
	RecordID   string `json:"record_id"`
	Problem    string `json:"problem"`
}

// Verify checks the invariants of the write path over the whole store:
// every record equals the after state of the applied entry its last_change
// names, at that entry's version; seq is unique and increasing over applied
// entries; no record is locked by a plan that is not in progress; no entry is
// pending past its lease. The tests and `outreach verify` share it.
//
// It reads each collection once (the embedded store answers any query by a
// scan, so per-record look-ups would make it quadratic).
func (s *Store) Verify(ctx context.Context) ([]Violation, error) {
	var out []Violation
	entryByID := map[string]*audit.Entry{}
	cur, err := s.coll(collChangeLog).Find(ctx, bson.M{}, options.Find().SetSort(bson.D{{Key: "seq", Value: 1}}))
	if err != nil {
		return nil, err
	}
	var entries []audit.Entry
	if err := cur.All(ctx, &entries); err != nil {
		return nil, err
	}
	for i := range entries {
		entryByID[entries[i].ID] = &entries[i]
	}
	planState := map[string]string{}
	cur, err = s.coll(collPlans).Find(ctx, bson.M{}, options.Find().SetProjection(bson.M{"state": 1}))
	if err != nil {
		return nil, err
	}
	var plans []plan
	if err := cur.All(ctx, &plans); err != nil {
		return nil, err
	}
	for _, p := range plans {
		planState[p.ID] = p.State
	}
	for _, coll := range recordCollections {
		cur, err := s.coll(coll).Find(ctx, bson.M{})
		if err != nil {
			return nil, err
		}
		var recs []bson.M
		if err := cur.All(ctx, &recs); err != nil {
			return nil, err
		}
		for _, rec := range recs {
			id := fmt.Sprint(rec["_id"])
			bad := func(format string, args ...any) {
				out = append(out, Violation{coll, id, fmt.Sprintf(format, args...)})
			}
			lc, _ := rec[fieldLastChange].(string)
			if lc == "" {
				bad("no last_change")
				continue
			}
			e, ok := entryByID[lc]
			if !ok {
				bad("last_change %s is not in change_log", lc)
				continue
			}
			if e.State != audit.StateApplied {
				bad("last_change %s is %s", lc, e.State)
			}
			if e.RecordID != id || e.Collection != coll {
				bad("last_change %s is of %s/%s", lc, e.Collection, e.RecordID)
			}
			if v, _ := rec[fieldVersion].(int64); v != e.VersionAfter {
				bad("version %v, entry says %d", rec[fieldVersion], e.VersionAfter)
			}
			if !sameState(redact(coll, strip(rec)), e.After) {
				bad("differs from the after state of %s", lc)
			}
			if lb, ok := rec[fieldLockedBy].(string); ok {
				if st := planState[lb]; st != planLocking && st != planLocked {
					bad("locked by plan %s that is not in progress", lb)
				}
			}
		}
	}
	var last int64
	for _, e := range entries {
		if e.Seq <= last {
			out = append(out, Violation{collChangeLog, e.ID, fmt.Sprintf("seq %d does not increase (after %d)", e.Seq, last)})
		}
		last = e.Seq
		if e.State == audit.StatePending && time.Since(e.At) > s.lease {
			out = append(out, Violation{collChangeLog, e.ID, "pending past its lease"})
		}
	}
	return out, nil
}

// strip returns doc without its bookkeeping fields.
func strip(doc bson.M) bson.M {
	out := make(bson.M, len(doc))
	for k, v := range doc {
		switch k {
		case fieldVersion, fieldLastChange, fieldLockedBy:
		default:
			out[k] = v
		}
	}
	return out
}

// sameState compares two stored states field by field, whatever the order of
// their keys or the Go types the driver decoded their sub-documents into.
func sameState(a, b bson.M) bool {
	return reflect.DeepEqual(canonical(a), canonical(b))
}

func canonical(v any) any {
	switch x := v.(type) {
	case bson.M:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = canonical(e)
		}
		return out
	case map[string]any:
		return canonical(bson.M(x))
	case bson.D:
		out := make(map[string]any, len(x))
		for _, e := range x {
			out[e.Key] = canonical(e.Value)
		}
		return out
	case bson.A:
		return canonical([]any(x))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = canonical(e)
		}
		return out
	}
	return v
}
