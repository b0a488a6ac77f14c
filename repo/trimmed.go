package repo

import (
	"context"
	"errors"
	"outreach/ledger"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Trimmed fields of related records, as a detail or a dossier shows them.
var (
	TrimContact  = []string{"first_name", "last_name", "email", "title", "do_not_contact", "archived_at"}
	TrimCoverage = []string{"title", "url", "published_at", "type", "sentiment", "reach", "outlet_id"}
)

// TrimmedOne returns fields of record id of coll, or nil when id is empty or
// the record is missing.
func (s *Store) TrimmedOne(ctx context.Context, coll, id string, fields []string) (map[string]any, error) {
	if id == "" {
		return nil, nil
	}
	var doc bson.M
	err := s.Collection(coll).FindOne(ctx, bson.M{"_id": id}, options.FindOne().SetProjection(projection(fields))).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, ledger.DriverErr(err, KindOf(coll), id)
	}
	return trim(doc), nil
}

// Trimmed returns fields of the records of coll matching filter, in sort
// order (by _id when sort is nil). Never nil.
func (s *Store) Trimmed(ctx context.Context, coll string, filter bson.M, sort bson.D, fields []string) ([]map[string]any, error) {
	if sort == nil {
		sort = bson.D{{Key: "_id", Value: 1}}
	}
	cur, err := s.Find(ctx, coll, filter, options.Find().SetProjection(projection(fields)).SetSort(sort))
	if err != nil {
		return nil, ledger.DriverErr(err, KindOf(coll), "query")
	}
	var docs []bson.M
	if err := cur.All(ctx, &docs); err != nil {
		return nil, ledger.DriverErr(err, KindOf(coll), "query")
	}
	out := make([]map[string]any, 0, len(docs))
	for _, d := range docs {
		out = append(out, trim(d))
	}
	return out, nil
}

func projection(fields []string) bson.M {
	p := bson.M{"_id": 1}
	for _, f := range fields {
		p[f] = 1
	}
	return p
}

// trim renames _id to id and turns BSON dates into times, which JSON shows
// as RFC 3339 UTC strings.
func trim(doc bson.M) map[string]any {
	out := make(map[string]any, len(doc))
	for k, v := range doc {
		if dt, ok := v.(bson.DateTime); ok {
			v = dt.Time().UTC()
		}
		if k == "_id" {
			k = "id"
		}
		out[k] = v
	}
	return out
}
