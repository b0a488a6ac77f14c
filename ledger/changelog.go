package ledger

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
)

// ChangeFilter selects change entries; empty fields do not filter.
type ChangeFilter struct {
	RecordID, Collection, Action, AgentID, SessionID, UserID string
	Since, Until                                             *time.Time
}

// ChangeLog lists applied change entries, newest (highest seq) first.
func (s *Engine) ChangeLog(ctx context.Context, f ChangeFilter, limit, offset int) (Page[audit.Entry], error) {
	filter := bson.M{"state": audit.StateApplied}
	for k, v := range map[string]string{"record_id": f.RecordID, "collection": f.Collection, "action": f.Action,
		"agent_id": f.AgentID, "session_id": f.SessionID, "user_id": f.UserID} {
		if v != "" {
			filter[k] = v
		}
	}
	Between(filter, "at", f.Since, f.Until)
	return List[audit.Entry](ctx, s, collChangeLog, filter, bson.D{{Key: "seq", Value: -1}}, limit, offset)
}

// Change returns one applied change entry.
func (s *Engine) Change(ctx context.Context, id string) (*audit.Entry, error) {
	if CheckID(id) != nil {
		return nil, NotFound("change", id)
	}
	var e audit.Entry
	if err := s.coll(collChangeLog).FindOne(ctx, bson.M{"_id": id, "state": audit.StateApplied}).Decode(&e); err != nil {
		return nil, DriverErr(err, "change", id)
	}
	return &e, nil
}

// Between bounds field of a filter by since and until, both inclusive,
// when given.
func Between(filter bson.M, field string, since, until *time.Time) {
	r := bson.M{}
	if since != nil {
		r["$gte"] = *since
	}
	if until != nil {
		r["$lte"] = *until
	}
	if len(r) > 0 {
		filter[field] = r
	}
}
