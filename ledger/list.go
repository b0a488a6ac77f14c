package ledger

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// List returns the records of coll matching filter in sort order, with a
// total count. sort must end on a unique field (_id) so paging never skips or
// repeats a record.
//
// The total costs no second read where it can be had from the first: a page
// that is not full (and not past the end) ends the list, so its total is
// offset + its length. On a store that answers every query but an _id
// equality by scanning its whole collection (the embedded one), a count is a
// second full scan, so there the list is one read: every match comes back
// in order, the page's records are decoded and the rest only counted.
func List[T any](ctx context.Context, s *Engine, coll string, filter bson.M, sort bson.D, limit, offset int) (Page[T], error) {
	if ids, total, ok, err := s.mirrorIDs(ctx, mirrorQuery{coll: coll, filter: filter, sort: sort, skip: int64(offset), limit: int64(limit)}); err != nil {
		return Page[T]{}, DriverErr(err, s.schema.Kinds[coll], "list")
	} else if ok {
		raws, err := s.fetch(ctx, coll, ids, filter, nil)
		items := []T{}
		if err == nil {
			err = decodeAll(raws, &items)
		}
		if err != nil {
			return Page[T]{}, DriverErr(err, s.schema.Kinds[coll], "list")
		}
		return Page[T]{Total: total, Items: items}, nil
	}
	if s.serialWrites {
		return listOnePass[T](ctx, s, coll, filter, sort, limit, offset)
	}
	cur, err := s.coll(coll).Find(ctx, filter, options.Find().SetSort(sort).SetSkip(int64(offset)).SetLimit(int64(limit)))
	if err != nil {
		return Page[T]{}, DriverErr(err, s.schema.Kinds[coll], "list")
	}
	items := []T{}
	if err := cur.All(ctx, &items); err != nil {
		return Page[T]{}, DriverErr(err, s.schema.Kinds[coll], "list")
	}
	if len(items) < limit && (len(items) > 0 || offset == 0) {
		return Page[T]{Total: int64(offset + len(items)), Items: items}, nil
	}
	total, err := s.coll(coll).CountDocuments(ctx, filter)
	if err != nil {
		return Page[T]{}, DriverErr(err, s.schema.Kinds[coll], "list")
	}
	return Page[T]{Total: total, Items: items}, nil
}

// ListAmong is List restricted to the records among (ids a word index
// named), answered from the engine's index alone: ok is false where the
// index cannot answer (stale, being built, a filter or sort it does not
// keep), and the caller asks the store its own way. Among is not sent as
// an _id $in, which the embedded store and the index's evaluator compare
// with every id for every record.
func ListAmong[T any](ctx context.Context, s *Engine, coll string, among []string, filter bson.M, sort bson.D, limit, offset int) (Page[T], bool, error) {
	if among == nil {
		among = []string{}
	}
	ids, total, ok, err := s.mirrorIDs(ctx, mirrorQuery{coll: coll, filter: filter, among: among, sort: sort, skip: int64(offset), limit: int64(limit)})
	if err != nil || !ok {
		return Page[T]{}, false, DriverErr(err, s.schema.Kinds[coll], "list")
	}
	raws, err := s.fetch(ctx, coll, ids, filter, nil)
	items := []T{}
	if err == nil {
		err = decodeAll(raws, &items)
	}
	if err != nil {
		return Page[T]{}, false, DriverErr(err, s.schema.Kinds[coll], "list")
	}
	return Page[T]{Total: total, Items: items}, true, nil
}

// listOnePass is List in one read (see List).
func listOnePass[T any](ctx context.Context, s *Engine, coll string, filter bson.M, sort bson.D, limit, offset int) (Page[T], error) {
	cur, err := s.coll(coll).Find(ctx, filter, options.Find().SetSort(sort))
	if err != nil {
		return Page[T]{}, DriverErr(err, s.schema.Kinds[coll], "list")
	}
	defer cur.Close(context.WithoutCancel(ctx))
	items := []T{}
	var n int64
	for cur.Next(ctx) {
		if n >= int64(offset) && len(items) < limit {
			var item T
			if err := cur.Decode(&item); err != nil {
				return Page[T]{}, DriverErr(err, s.schema.Kinds[coll], "list")
			}
			items = append(items, item)
		}
		n++
	}
	if err := cur.Err(); err != nil {
		return Page[T]{}, DriverErr(err, s.schema.Kinds[coll], "list")
	}
	return Page[T]{Total: n, Items: items}, nil
}
