package ledger

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
)

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
