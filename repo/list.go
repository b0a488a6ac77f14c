package repo

import (
	"context"
	"regexp"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Page is one page of a list.
type Page[T any] struct {
	Total int64
	Items []T
}

// listPage returns the records of coll matching filter in sort order, with a
// total count. sort must end on a unique field (_id) so paging never skips or
// repeats a record.
func listPage[T any](ctx context.Context, s *Store, coll string, filter bson.M, sort bson.D, limit, offset int) (Page[T], error) {
	total, err := s.coll(coll).CountDocuments(ctx, filter)
	if err != nil {
		return Page[T]{}, driverErr(err, kinds[coll], "list")
	}
	cur, err := s.coll(coll).Find(ctx, filter, options.Find().SetSort(sort).SetSkip(int64(offset)).SetLimit(int64(limit)))
	if err != nil {
		return Page[T]{}, driverErr(err, kinds[coll], "list")
	}
	items := []T{}
	if err := cur.All(ctx, &items); err != nil {
		return Page[T]{}, driverErr(err, kinds[coll], "list")
	}
	return Page[T]{Total: total, Items: items}, nil
}

// literal matches text literally and case-insensitively: the query's
// characters are never read as a pattern or an operator.
func literal(text string) bson.M {
	return bson.M{"$regex": regexp.QuoteMeta(text), "$options": "i"}
}

// anyField matches text literally in any of fields.
func anyField(text string, fields ...string) bson.M {
	or := bson.A{}
	for _, f := range fields {
		or = append(or, bson.M{f: literal(text)})
	}
	return bson.M{"$or": or}
}

// active is the filter of records that are not archived, unless includeArchived.
func active(filter bson.M, includeArchived bool) bson.M {
	if !includeArchived {
		filter["archived_at"] = nil
	}
	return filter
}

// between bounds field by since and until, both inclusive, when given.
func between(filter bson.M, field string, since, until *time.Time) {
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

// checkKeys refuses free-form object keys that MongoDB would read as an
// operator or a path: a leading '$', a '.', or an empty key. Objects nested at
// any depth, in objects or in arrays (of arrays), are checked too.
func checkKeys(field string, obj map[string]any) error {
	for k, v := range obj {
		if k == "" || strings.HasPrefix(k, "$") || strings.Contains(k, ".") {
			return Invalid(field, "key %q is not allowed: keys may not be empty, start with '$' or contain '.'", k)
		}
		if err := checkValueKeys(field+"."+k, v); err != nil {
			return err
		}
	}
	return nil
}

func checkValueKeys(field string, v any) error {
	switch x := v.(type) {
	case map[string]any:
		return checkKeys(field, x)
	case []any:
		for _, e := range x {
			if err := checkValueKeys(field, e); err != nil {
				return err
			}
		}
	}
	return nil
}
