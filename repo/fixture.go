package repo

import (
	"context"
	"slices"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Fixture creates a record of collection coll holding fields, through the
// write path (so it has its change entry) but without the checks of the
// record's own tools. Tests and benchmarks use it to set up related records
// of other groups; the service never calls it.
func (s *Store) Fixture(ctx context.Context, coll string, fields map[string]any) (string, error) {
	if !slices.Contains(recordCollections, coll) {
		return "", Invalid("collection", "%q is not a record collection", coll)
	}
	id, _ := fields["_id"].(string)
	if id == "" {
		id = uuid.NewString()
	}
	t := Now()
	after := bson.M{"_id": id, "created_at": t, "updated_at": t, "archived_at": nil}
	for k, v := range fields {
		after[k] = v
	}
	raw, err := bson.Marshal(after)
	if err != nil {
		return "", err
	}
	var doc bson.M
	if err := bson.Unmarshal(raw, &doc); err != nil {
		return "", err
	}
	_, err = s.write(ctx, mutation{Coll: coll, ID: id, Action: "create", After: doc})
	return id, err
}
