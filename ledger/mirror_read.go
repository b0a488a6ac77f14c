package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"outreach/ledger/index"
)

// The read side of the mirror (mirror.go): find, findOne and count take
// the mirror's answer where it has one and the store's otherwise; every
// record returned is read from the store by _id.

// findQuery turns a Find's options into a mirror query; ok is false for an
// option the mirror does not apply (it then goes to the store).
func findQuery(coll string, filter bson.M, opts *options.FindOptionsBuilder) (mirrorQuery, bool) {
	q := mirrorQuery{coll: coll, filter: filter}
	if opts == nil {
		return q, true
	}
	var fo options.FindOptions
	for _, set := range opts.Opts {
		if err := set(&fo); err != nil {
			return q, false
		}
	}
	if fo.AllowPartialResults != nil || fo.Collation != nil || fo.Hint != nil || fo.Max != nil || fo.Min != nil ||
		fo.ReturnKey != nil || fo.ShowRecordID != nil || fo.Let != nil || fo.CursorType != nil {
		return q, false
	}
	return q.with(fo.Sort, fo.Projection, fo.Skip, fo.Limit)
}

func findOneQuery(coll string, filter bson.M, opts *options.FindOneOptionsBuilder) (mirrorQuery, bool) {
	q := mirrorQuery{coll: coll, filter: filter}
	one := int64(1)
	if opts == nil {
		return q.with(nil, nil, nil, &one)
	}
	var fo options.FindOneOptions
	for _, set := range opts.Opts {
		if err := set(&fo); err != nil {
			return q, false
		}
	}
	if fo.AllowPartialResults != nil || fo.Collation != nil || fo.Hint != nil || fo.Max != nil || fo.Min != nil ||
		fo.ReturnKey != nil || fo.ShowRecordID != nil {
		return q, false
	}
	return q.with(fo.Sort, fo.Projection, fo.Skip, &one)
}

func (q mirrorQuery) with(sort, projection any, skip, limit *int64) (mirrorQuery, bool) {
	switch x := sort.(type) {
	case nil:
	case bson.D:
		q.sort = x
	case bson.M:
		if len(x) > 1 {
			return q, false // a map's order is not the caller's
		}
		for k, v := range x {
			q.sort = bson.D{{Key: k, Value: v}}
		}
	default:
		return q, false
	}
	switch x := projection.(type) {
	case nil:
	case bson.M:
		q.projection = x
	default:
		return q, false
	}
	if skip != nil {
		q.skip = *skip
	}
	if limit != nil {
		if *limit < 0 {
			return q, false
		}
		q.limit = *limit
	}
	return q, true
}

// onlyID reports whether a projection asks for nothing but _id.
func onlyID(p bson.M) bool {
	if len(p) != 1 {
		return false
	}
	v, ok := AsInt(p["_id"])
	return ok && v == 1
}

// mirrorIDs asks the mirror, and in check mode the store too.
func (s *Engine) mirrorIDs(ctx context.Context, q mirrorQuery) (ids []string, total int64, ok bool, err error) {
	if s.mirror == nil || (s.mirror.follow == nil && !s.serialWrites) {
		return nil, 0, false, nil
	}
	if _, isID := q.filter["_id"].(string); isID && len(q.filter) == 1 {
		return nil, 0, false, nil // the store's own cheap read
	}
	if _, kept := s.schema.Index[q.coll]; !kept {
		return nil, 0, false, nil // not indexed: no counter to ask
	}
	for attempt := 0; ; attempt++ {
		if !s.mirrorLive(ctx) {
			return nil, 0, false, nil
		}
		ids, total, ok = s.mirror.ids(q)
		if !ok || !s.mirror.check {
			return ids, total, ok, nil
		}
		sids, stotal, all, err := s.storeMatches(ctx, q)
		if err != nil {
			return nil, 0, false, err
		}
		if slices.Equal(ids, sids) && total == stotal {
			return ids, total, true, nil
		}
		if len(q.sort) == 0 && total == stotal && len(ids) == len(sids) && subset(ids, all) {
			// No order asked for: a server returns its matches in an order
			// of its own, and a limit takes any of them.
			return ids, total, true, nil
		}
		// A write may have landed between the two reads: ask again.
		if attempt == 3 {
			s.log.Error().Str("collection", q.coll).Interface("filter", q.filter).Interface("sort", q.sort).
				Strs("index", ids).Int64("index_total", total).Strs("store", sids).Int64("store_total", stotal).Msg("index mismatch")
			return nil, 0, false, fmt.Errorf("%w: %s %v sort %v skip %d limit %d: index %v (%d), store %v (%d)", errMirrorMismatch,
				q.coll, q.filter, q.sort, q.skip, q.limit, ids[:min(len(ids), 5)], total, sids[:min(len(sids), 5)], stotal)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// storeIDs is the store's answer to q (check mode).
func (s *Engine) storeIDs(ctx context.Context, q mirrorQuery) ([]string, int64, error) {
	ids, total, _, err := s.storeMatches(ctx, q)
	return ids, total, err
}

// subset reports whether every id of ids is in all.
func subset(ids, all []string) bool {
	in := make(map[string]bool, len(all))
	for _, id := range all {
		in[id] = true
	}
	for _, id := range ids {
		if !in[id] {
			return false
		}
	}
	return true
}

// storeMatches is the store's answer to q, with every match's id.
func (s *Engine) storeMatches(ctx context.Context, q mirrorQuery) ([]string, int64, []string, error) {
	opts := options.Find().SetProjection(bson.M{"_id": 1})
	if q.sort != nil {
		opts.SetSort(q.sort)
	}
	filter := q.filter
	if q.among != nil {
		filter = maps.Clone(q.filter)
		filter["_id"] = bson.M{"$in": q.among}
	}
	cur, err := s.coll(q.coll).Find(ctx, filter, opts)
	if err != nil {
		return nil, 0, nil, err
	}
	var docs []struct {
		ID string `bson:"_id"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, 0, nil, err
	}
	ids := []string{}
	all := make([]string, len(docs))
	for i, d := range docs {
		all[i] = d.ID
		if int64(i) >= q.skip && (q.limit == 0 || int64(len(ids)) < q.limit) {
			ids = append(ids, d.ID)
		}
	}
	return ids, int64(len(docs)), all, nil
}

// fetch reads the records ids of coll by _id, in order, a few at a time.
// A record changed since the mirror chose it so that it no longer matches
// filter is left out (checked when the whole record is read).
func (s *Engine) fetch(ctx context.Context, coll string, ids []string, filter, projection bson.M) ([]bson.Raw, error) {
	if projection != nil && onlyID(projection) {
		out := make([]bson.Raw, len(ids))
		for i, id := range ids {
			raw, err := bson.Marshal(bson.M{"_id": id})
			if err != nil {
				return nil, err
			}
			out[i] = raw
		}
		return out, nil
	}
	if out, ok := s.covered(coll, ids, projection); ok {
		return out, nil
	}
	out := make([]bson.Raw, len(ids))
	errs := make([]error, len(ids))
	var opts *options.FindOneOptionsBuilder
	if projection != nil {
		opts = options.FindOne().SetProjection(projection)
	}
	// Whole records the record cache holds need no read of the store.
	todo := make([]int, 0, len(ids))
	for i, id := range ids {
		if projection == nil && s.cacheOn(coll) && !s.mirror.check {
			if raw, _, hit := s.cache.get(coll, id); hit {
				out[i] = raw
				continue
			}
		}
		todo = append(todo, i)
	}
	if s.mirror.follow != nil && len(todo) > 1 {
		// A server: one find by _id $in (an index scan there) instead of a
		// round trip per record.
		if err := s.fetchIn(ctx, coll, ids, todo, projection, out); err != nil {
			return nil, err
		}
		todo = nil
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < min(4, len(todo)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var raw bson.Raw
				var err error
				if projection == nil {
					raw, err = s.byID(ctx, coll, ids[i])
				} else {
					err = s.coll(coll).FindOne(ctx, bson.M{"_id": ids[i]}, opts).Decode(&raw)
				}
				if errors.Is(err, mongo.ErrNoDocuments) {
					continue
				}
				out[i], errs[i] = raw, err
			}
		}()
	}
	for _, i := range todo {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	kept := out[:0]
	for _, raw := range out {
		if raw == nil {
			continue
		}
		if projection == nil {
			if match, ok := index.Match(raw, filter); ok && !match {
				continue
			}
		}
		kept = append(kept, raw)
	}
	return kept, nil
}

// findAll reads every record of coll matching filter into out (a pointer
// to a slice), through the mirror where it answers.
func (s *Engine) findAll(ctx context.Context, coll string, filter bson.M, opts *options.FindOptionsBuilder, out any) error {
	if q, ok := findQuery(coll, filter, opts); ok {
		ids, _, ok, err := s.mirrorIDs(ctx, q)
		if err != nil {
			return DriverErr(err, s.schema.Kinds[coll], "list")
		}
		if ok {
			raws, err := s.fetch(ctx, coll, ids, filter, q.projection)
			if err == nil {
				err = decodeAll(raws, out)
			}
			if err != nil {
				return DriverErr(err, s.schema.Kinds[coll], "list")
			}
			return nil
		}
	}
	cur, err := s.coll(coll).Find(ctx, filter, opts)
	if err != nil {
		return DriverErr(err, s.schema.Kinds[coll], "list")
	}
	if err := cur.All(ctx, out); err != nil {
		return DriverErr(err, s.schema.Kinds[coll], "list")
	}
	return nil
}

// findOne is FindOne on coll, through the mirror where it answers.
func (s *Engine) findOne(ctx context.Context, coll string, filter bson.M, opts ...*options.FindOneOptionsBuilder) *mongo.SingleResult {
	all := options.FindOne()
	for _, o := range opts {
		if o != nil {
			all.Opts = append(all.Opts, o.Opts...)
		}
	}
	if q, ok := findOneQuery(coll, filter, all); ok {
		ids, _, ok, err := s.mirrorIDs(ctx, q)
		if err != nil {
			return mongo.NewSingleResultFromDocument(bson.D{}, err, nil)
		}
		if ok {
			if len(ids) == 0 {
				return mongo.NewSingleResultFromDocument(bson.D{}, mongo.ErrNoDocuments, nil)
			}
			var byID *options.FindOneOptionsBuilder
			if q.projection != nil {
				byID = options.FindOne().SetProjection(q.projection)
			}
			return s.coll(coll).FindOne(ctx, bson.M{"_id": ids[0]}, byID)
		}
	}
	return s.coll(coll).FindOne(ctx, filter, all)
}

// count is CountDocuments on coll, through the mirror where it answers.
func (s *Engine) count(ctx context.Context, coll string, filter bson.M) (int64, error) {
	_, total, ok, err := s.mirrorIDs(ctx, mirrorQuery{coll: coll, filter: filter, limit: 1})
	if err != nil {
		return 0, err
	}
	if ok {
		return total, nil
	}
	return s.coll(coll).CountDocuments(ctx, filter)
}

// decodeAll decodes raws into out, a pointer to a slice, as the store's
// client does (documents inside documents as bson.M).
func decodeAll(raws []bson.Raw, out any) error {
	rv := reflect.ValueOf(out)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Slice {
		return fmt.Errorf("decodeAll: %T is not a pointer to a slice", out)
	}
	sl := rv.Elem()
	items := reflect.MakeSlice(sl.Type(), 0, len(raws))
	for _, raw := range raws {
		item := reflect.New(sl.Type().Elem())
		if err := decodeRaw(raw, item.Interface()); err != nil {
			return err
		}
		items = reflect.Append(items, item.Elem())
	}
	sl.Set(items)
	return nil
}

func decodeRaw(raw bson.Raw, into any) error {
	dec := bson.NewDecoder(bson.NewDocumentReader(bytes.NewReader(raw)))
	dec.DefaultDocumentM()
	return dec.Decode(into)
}

// found is what find returns: the records the mirror chose (read by _id),
// or the store's cursor.
type found struct {
	raws []bson.Raw
	cur  *mongo.Cursor
}

// All decodes every record into out, a pointer to a slice.
func (f *found) All(ctx context.Context, out any) error {
	if f.cur != nil {
		return f.cur.All(ctx, out)
	}
	return decodeAll(f.raws, out)
}

// find is Find on coll, through the mirror where it answers.
func (s *Engine) find(ctx context.Context, coll string, filter bson.M, opts ...*options.FindOptionsBuilder) (*found, error) {
	all := options.Find()
	for _, o := range opts {
		if o != nil {
			all.Opts = append(all.Opts, o.Opts...)
		}
	}
	if q, ok := findQuery(coll, filter, all); ok {
		ids, _, ok, err := s.mirrorIDs(ctx, q)
		if err != nil {
			return nil, err
		}
		if ok {
			raws, err := s.fetch(ctx, coll, ids, filter, q.projection)
			if err != nil {
				return nil, err
			}
			return &found{raws: raws}, nil
		}
	}
	cur, err := s.coll(coll).Find(ctx, filter, all)
	if err != nil {
		return nil, err
	}
	return &found{cur: cur}, nil
}

// covered answers a fetch from the index alone when the projection asks
// only for top-level fields the index keeps whole, as MongoDB answers a
// covered query from its index: the index holds those fields as stored
// (Verify compares them, record by record), and one read of the store per
// record is what it saves. ok is false for any other projection, or when a
// record is not (or no longer) there.
func (s *Engine) covered(coll string, ids []string, projection bson.M) ([]bson.Raw, bool) {
	if projection == nil || s.mirror == nil {
		return nil, false
	}
	want := map[string]bool{"_id": true}
	for k, v := range projection {
		on, ok := AsInt(v)
		if b, isBool := v.(bool); isBool {
			on, ok = 0, true
			if b {
				on = 1
			}
		}
		if !ok || strings.Contains(k, ".") || strings.HasPrefix(k, "$") {
			return nil, false
		}
		if k == "_id" {
			want["_id"] = on == 1
			continue
		}
		if on != 1 {
			return nil, false // an exclusion: the index may lack what it keeps
		}
		want[k] = true
	}
	mi := s.mirror
	if mi.stale.Load() {
		return nil, false
	}
	mi.mu.RLock()
	defer mi.mu.RUnlock()
	mc := mi.colls[coll]
	if mc == nil {
		return nil, false
	}
	for k := range want {
		if !mc.Keeps(k) {
			return nil, false
		}
	}
	out := make([]bson.Raw, 0, len(ids))
	for _, id := range ids {
		raw, ok := mc.Doc(id)
		if !ok {
			return nil, false
		}
		elems, err := raw.Elements()
		if err != nil {
			return nil, false
		}
		idx, doc := bsoncore.AppendDocumentStart(nil)
		for _, e := range elems {
			if want[e.Key()] {
				doc = append(doc, e...)
			}
		}
		doc, err = bsoncore.AppendDocumentEnd(doc, idx)
		if err != nil {
			return nil, false
		}
		out = append(out, bson.Raw(doc))
	}
	return out, true
}

// fetchIn reads the records ids[i], i in todo, of coll with one find by
// _id $in into out (a record not stored stays nil).
func (s *Engine) fetchIn(ctx context.Context, coll string, ids []string, todo []int, projection bson.M, out []bson.Raw) error {
	want := make([]string, len(todo))
	for k, i := range todo {
		want[k] = ids[i]
	}
	opts := options.Find()
	if projection != nil {
		opts.SetProjection(projection)
	}
	cur, err := s.coll(coll).Find(ctx, bson.M{"_id": bson.M{"$in": want}}, opts)
	if err != nil {
		return err
	}
	defer cur.Close(ctx)
	byID := make(map[string]bson.Raw, len(want))
	for cur.Next(ctx) {
		if id, ok := cur.Current.Lookup("_id").StringValueOK(); ok {
			byID[id] = slices.Clone(cur.Current)
		}
	}
	if err := cur.Err(); err != nil {
		return err
	}
	for _, i := range todo {
		out[i] = byID[ids[i]]
	}
	return nil
}
