// Package index is the service's own index of the embedded store: per
// collection, every record's small fields (the large text left out, see
// Spec) with posting lists on the fields lists select by, and an evaluator
// that answers a find (filter, sort, skip, limit) from them exactly as the
// store would, or declines.
//
// The index holds no state of its own beyond what it is given: the engine
// (package ledger's read surface, today repo's Store) builds a Coll per
// collection from the store, Puts each record the write path lands, and
// asks IDs for a query's ids in order and its total; the records are then
// read from the store by _id. A query the index cannot decide exactly (a
// field it left out, an operator or a value it does not evaluate as the
// store does) is declined (ok false) and goes to the store. Nothing here
// reads or writes the store.
package index

import (
	"bytes"
	"hash/maphash"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Spec says what the mirror keeps of one collection.
type Spec struct {
	// Keep, when given, lists the only paths held besides _id (dotted; a
	// path through an array of documents keeps the field of every
	// element): those a query filters, sorts or is covered by. A query on
	// any other path is declined and goes to the store.
	Keep []string
	// drop lists the fields left out (large text), as dotted paths; a path
	// through an array of documents drops the field of every element.
	Drop []string
	// keys are the paths with a posting list: an equality or $in of
	// strings on one of them picks the candidates instead of every record.
	Keys []string
	// Words, when set, is the word index's extraction (words.go).
	Words *Words
}

// Coll is the index of one collection. Records are numbered in the order
// they were first put (the store's unsorted order, which a replaced record
// keeps): a record's number is its place in ids and raws, and the posting
// lists hold numbers, sorted, not ids (at 100,000 notes a set of ids per
// value was most of the index's memory, and of its build).
type Coll struct {
	spec  Spec
	prune pruner
	// locs: record number → where the record is in arena; idx: id →
	// record number.
	locs  []loc
	arena arena
	idx   idTable
	// keys: path → value → the numbers of the records holding it, ascending.
	keys map[string]*postings
	// words is the word index (words.go), nil without Spec.Words.
	words *wordIndex
}

// Put adds or replaces a record: what the spec holds of it is copied in.
func (mc *Coll) Put(raw bson.Raw) {
	pruned, err := mc.prune.prune(raw)
	if err != nil {
		return // not a document: the store holds none such
	}
	mc.put(pruned)
}

// put adds or replaces a record already pruned.
func (mc *Coll) put(raw bson.Raw) {
	id := idOf(raw)
	if id == nil {
		return // the service's records have string ids; others are not mirrored
	}
	n, old := mc.find(string(id))
	if old {
		was := mc.raw(n)
		mc.unkey(n, was)
		mc.putWords(n, was, raw)
		mc.arena.replaced(mc.locs[n])
		mc.locs[n] = mc.arena.store(raw) // a replaced record keeps its place, as in the store
		if mc.arena.wasteful() {
			mc.compact()
		}
		raw = mc.raw(n)
	} else {
		n = int32(len(mc.locs))
		mc.locs = append(mc.locs, mc.arena.store(raw))
		raw = mc.raw(n)
		mc.add(idOf(raw), n)
		mc.putWords(n, nil, raw)
	}
	mc.key(n, raw)
}

// key adds record n (as held) to the posting lists of its values.
func (mc *Coll) key(n int32, raw bson.Raw) {
	for _, path := range mc.spec.Keys {
		for _, v := range flatten(valuesAt(raw, path)) {
			if str, ok := heldString(v); ok {
				p := mc.keys[path]
				if p == nil {
					p = newPostings()
					mc.keys[path] = p
				}
				p.insert(str, n)
			}
		}
	}
}

func (mc *Coll) unkey(n int32, raw bson.Raw) {
	for _, path := range mc.spec.Keys {
		for _, v := range flatten(valuesAt(raw, path)) {
			if str, ok := heldString(v); ok {
				if p := mc.keys[path]; p != nil {
					p.remove(str, n)
				}
			}
		}
	}
}

// insertNum adds n to the ascending list, once.
func insertNum(list []int32, n int32) []int32 {
	if k := len(list); k == 0 || list[k-1] < n {
		return append(list, n) // a new record: the largest number yet
	}
	at, found := slices.BinarySearch(list, n)
	if found {
		return list
	}
	return slices.Insert(list, at, n)
}

// removeNum takes n out of the ascending list.
func removeNum(list []int32, n int32) []int32 {
	at, found := slices.BinarySearch(list, n)
	if !found {
		return list
	}
	return slices.Delete(list, at, at+1)
}

// union merges ascending lists into one, each number once.
func union(lists [][]int32) []int32 {
	switch len(lists) {
	case 0:
		return []int32{}
	case 1:
		return lists[0]
	}
	var out []int32
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// IDs answers q: the ids in order, after skip and limit, and the number of
// matches. ok is false when the mirror cannot answer q exactly.
func (mc *Coll) IDs(q Query) (ids []string, total int64, ok bool) {
	if mc == nil || !mc.answers(q.Filter) || !mc.sorts(q.Sort) {
		return nil, 0, false
	}
	paths := make([]string, len(q.Sort))
	desc := make([]bool, len(q.Sort))
	for i, k := range q.Sort {
		paths[i] = k.Key
		dir, _ := asInt(k.Value)
		desc[i] = dir < 0
	}
	// Only the first skip+limit hits in order are kept (the rest are only
	// counted): a list of 100k records sorts 50, not 100k.
	keep := -1
	if q.Limit > 0 {
		keep = int(q.Skip + q.Limit)
	}
	less := func(a, b *hit) bool {
		for i := range a.keys {
			c := compareKeys(a.keys[i], b.keys[i])
			if desc[i] {
				c = -c
			}
			if c != 0 {
				return c < 0
			}
		}
		return a.n < b.n
	}
	var hits []*hit
	var n int64
	scratch := hit{keys: make([]sortKey, len(paths))}
	consider := func(num int32) bool {
		raw := mc.raw(num)
		match, ok := evalFilter(raw, q.Filter)
		if !ok {
			return false
		}
		if !match {
			return true
		}
		n++
		h := &scratch
		h.n = num
		for i, path := range paths {
			pv := walk(raw, path)
			if !pv.decideOn("sort") {
				return false
			}
			vs, gaps := pv.vals, pv.missing
			switch {
			case len(vs) == 0:
				h.keys[i] = sortKey{bracket: bracket(bson.TypeNull)}
			case len(vs) == 1 && !gaps:
				k, ok := keyOf(vs[0])
				if !ok {
					return false
				}
				h.keys[i] = k
			default:
				// A sort on an array's elements, or on a path some elements
				// of an array of documents lack (their null takes part in
				// the store's choice of a key): the store's rule, not ours.
				return false
			}
		}
		if keep == 0 || (keep > 0 && len(hits) == keep && !less(h, hits[keep-1])) {
			return true
		}
		h = &hit{n: num, keys: slices.Clone(scratch.keys)}
		if keep < 0 {
			hits = append(hits, h)
			return true
		}
		at, _ := slices.BinarySearchFunc(hits, h, func(a, b *hit) int {
			if less(a, b) {
				return -1
			}
			return 1
		})
		if len(hits) == keep {
			hits = hits[:keep-1]
		}
		hits = slices.Insert(hits, at, h)
		return true
	}
	cand, picked := mc.candidates(q.Filter)
	if q.Among != nil {
		among, _ := mc.byID(bson.M{"$in": q.Among})
		if picked && len(cand) < len(among) {
			in := newBitset(len(mc.locs))
			for _, num := range among {
				in[num>>6] |= 1 << (num & 63)
			}
			cand = slices.DeleteFunc(slices.Clone(cand), func(num int32) bool { return !in.has(num) })
		} else {
			cand, picked = among, true
		}
	}
	if picked {
		for _, num := range cand {
			if !consider(num) {
				return nil, 0, false
			}
		}
	} else {
		for num := range mc.locs {
			if !consider(int32(num)) {
				return nil, 0, false
			}
		}
	}
	if keep < 0 {
		slices.SortFunc(hits, func(a, b *hit) int {
			if less(a, b) {
				return -1
			}
			return 1
		})
	}
	total = n
	start := min(int(q.Skip), len(hits))
	ids = make([]string, 0, len(hits)-start)
	for _, h := range hits[start:] {
		ids = append(ids, mc.idString(h.n))
	}
	return ids, total, true
}

type hit struct {
	n    int32 // the record's number
	keys []sortKey
}

// sortKey is a sort value decoded once: its type bracket and its value.
type sortKey struct {
	bracket int
	num     numeric
	i64     int64
	str     string
	other   []byte
}

// keyOf is v's sort key; ok is false for a value the evaluator does not
// order exactly (see decided).
func keyOf(v bson.RawValue) (sortKey, bool) {
	if !decided(v) {
		return sortKey{}, false
	}
	k := sortKey{bracket: bracket(v.Type)}
	switch k.bracket {
	case 2:
		k.num, _ = numericOf(v)
	case 3:
		k.str = v.StringValue()
	case 8:
		if v.Boolean() {
			k.i64 = 1
		}
	case 9:
		k.i64 = v.DateTime()
	case 7:
		k.other = v.Value
	}
	return k, true
}

// compareKeys orders as compareValues does.
func compareKeys(a, b sortKey) int {
	if a.bracket != b.bracket {
		return a.bracket - b.bracket
	}
	switch a.bracket {
	case 1:
		return 0
	case 2:
		return compareNumeric(a.num, b.num)
	case 3:
		return strings.Compare(a.str, b.str)
	case 8, 9:
		return compareInt(a.i64, b.i64)
	}
	return strings.Compare(string(a.other), string(b.other))
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// answers reports whether every field filter names is kept whole, and
// every operator is one evalFilter evaluates.
func (mc *Coll) answers(filter bson.M) bool {
	for k, v := range filter {
		switch k {
		case "$and", "$or":
			arr, ok := v.(bson.A)
			if !ok || len(arr) == 0 {
				return false
			}
			for _, e := range arr {
				sub, ok := e.(bson.M)
				if !ok || !mc.answers(sub) {
					return false
				}
			}
			continue
		}
		if strings.HasPrefix(k, "$") || !mc.Keeps(k) {
			return false
		}
	}
	return true
}

// Keeps reports whether path is held whole: kept (Spec.Keep), and no
// dropped field at or under it.
func (mc *Coll) Keeps(path string) bool { return mc.spec.keeps(path) }

func (mc *Coll) sorts(sort bson.D) bool {
	for _, k := range sort {
		dir, ok := asInt(k.Value)
		if !ok || (dir != 1 && dir != -1) || !mc.Keeps(k.Key) {
			return false
		}
	}
	return true
}

// candidates is the smallest posting list the filter's top-level
// equalities (or $in of strings) on a key pick, as ascending record
// numbers; ok false when none does.
func (mc *Coll) candidates(filter bson.M) ([]int32, bool) {
	var best []int32
	found := false
	consider := func(list []int32) {
		if !found || len(list) < len(best) {
			best, found = list, true
		}
	}
	for k, v := range filter {
		if k == "$and" {
			for _, e := range v.(bson.A) {
				if list, ok := mc.candidates(e.(bson.M)); ok {
					consider(list)
				}
			}
			continue
		}
		if k == "$or" {
			// Every branch must pick its candidates, for their union to.
			var lists [][]int32
			all := true
			for _, e := range v.(bson.A) {
				list, ok := mc.candidates(e.(bson.M))
				if !ok {
					all = false
					break
				}
				lists = append(lists, list)
			}
			if all {
				consider(union(lists))
			}
			continue
		}
		if k == "_id" {
			if list, ok := mc.byID(v); ok {
				consider(list)
			}
			continue
		}
		postings, keyed := mc.keys[k]
		if !keyed && !slices.Contains(mc.spec.Keys, k) {
			continue
		}
		switch x := v.(type) {
		case string:
			consider(postings.get(x))
		case bson.M:
			if pat, ok := x["$regex"].(string); ok {
				// A pattern on a keyed field (a session id's prefix): the
				// records of the values it matches, among the distinct ones.
				opts, _ := x["$options"].(string)
				if opts == "i" {
					pat = "(?i)" + pat
				} else if opts != "" {
					continue
				}
				re, err := compiled(pat)
				if err != nil {
					continue
				}
				var lists [][]int32
				postings.each(func(v string, list []int32) {
					if re.MatchString(v) {
						lists = append(lists, list)
					}
				})
				consider(union(lists))
				continue
			}
			in, ok := x["$in"]
			if !ok {
				continue
			}
			var vals []any
			switch arr := in.(type) {
			case bson.A:
				vals = arr
			case []string:
				for _, s := range arr {
					vals = append(vals, s)
				}
			default:
				continue
			}
			var lists [][]int32
			all := true
			for _, e := range vals {
				s, ok := e.(string)
				if !ok {
					all = false
					break
				}
				lists = append(lists, postings.get(s))
			}
			if all {
				consider(union(lists))
			}
		}
	}
	return best, found
}

// byID is the records an _id equality or $in of strings names, as
// ascending record numbers.
func (mc *Coll) byID(v any) ([]int32, bool) {
	var vals []any
	switch x := v.(type) {
	case string:
		vals = []any{x}
	case bson.M:
		in, ok := x["$in"]
		if !ok || len(x) != 1 {
			return nil, false
		}
		if vals, ok = asList(in); !ok {
			return nil, false
		}
	default:
		return nil, false
	}
	list := []int32{}
	for _, e := range vals {
		id, ok := e.(string)
		if !ok {
			return nil, false
		}
		if n, stored := mc.find(id); stored {
			list = append(list, n)
		}
	}
	slices.Sort(list)
	return slices.Compact(list), true
}

// ---------------------------------------------------------------------------
// Evaluation: MongoDB's query semantics for the operators the service uses.

// evalFilter reports whether doc matches filter; ok is false when filter
// holds something this evaluator does not decide exactly.
func evalFilter(doc bson.Raw, filter bson.M) (match, ok bool) {
	match = true
	for k, v := range filter {
		var m bool
		switch k {
		case "$and", "$or":
			arr, isArr := v.(bson.A)
			if !isArr {
				return false, false
			}
			m = k == "$and"
			for _, e := range arr {
				sub, isM := e.(bson.M)
				if !isM {
					return false, false
				}
				sm, sok := evalFilter(doc, sub)
				if !sok {
					return false, false
				}
				if k == "$and" {
					m = m && sm
				} else {
					m = m || sm
				}
			}
		default:
			if strings.HasPrefix(k, "$") {
				return false, false
			}
			var fok bool
			m, fok = evalField(doc, k, v)
			if !fok {
				return false, false
			}
		}
		match = match && m
	}
	return match, true
}

// evalField evaluates one field's condition: a value (equality) or a
// document of operators.
func evalField(doc bson.Raw, path string, cond any) (match, ok bool) {
	pv := walk(doc, path)
	vals, missing := pv.vals, pv.missing
	ops, isOps := cond.(bson.M)
	if isOps && !anyOperator(ops) {
		return false, false // equality with a document: not needed, not decided here
	}
	if !isOps {
		if !pv.decideOn("") || (cond == nil && !pv.decideOn("null")) {
			return false, false
		}
		return equalsAny(vals, missing, cond)
	}
	match = true
	for op, arg := range ops {
		var m bool
		if !pv.decideOn(op) || (arg == nil && !pv.decideOn("null")) {
			return false, false
		}
		switch op {
		case "$eq":
			m, ok = equalsAny(vals, missing, arg)
		case "$ne":
			m, ok = equalsAny(vals, missing, arg)
			m = !m
		case "$in", "$nin":
			list, lok := asList(arg)
			if !lok || (slices.Contains(list, nil) && !pv.decideOn("null")) {
				return false, false
			}
			for _, e := range list {
				em, eok := equalsAny(vals, missing, e)
				if !eok {
					return false, false
				}
				m = m || em
			}
			if op == "$nin" {
				m = !m
			}
			ok = true
		case "$exists":
			want, bok := arg.(bool)
			if !bok {
				return false, false
			}
			m, ok = (len(vals) > 0) == want, true
		case "$gt", "$gte", "$lt", "$lte":
			want, wok := toRaw(arg)
			if !wok || want.Type == bson.TypeNull || !decided(want) {
				return false, false
			}
			for _, v := range flatten(vals) {
				if bracket(v.Type) != bracket(want.Type) {
					continue
				}
				c, cok := compareValues(v, want)
				if !cok {
					return false, false
				}
				if (op == "$gt" && c > 0) || (op == "$gte" && c >= 0) || (op == "$lt" && c < 0) || (op == "$lte" && c <= 0) {
					m = true
				}
			}
			ok = true
		case "$regex":
			opts, _ := ops["$options"].(string)
			pat, pok := arg.(string)
			if !pok || strings.Trim(opts, "i") != "" {
				return false, false
			}
			if opts == "i" {
				pat = "(?i)" + pat
			}
			re, err := compiled(pat)
			if err != nil {
				return false, false
			}
			for _, v := range flatten(vals) {
				if s, sok := v.StringValueOK(); sok && re.MatchString(s) {
					m = true
				}
			}
			ok = true
		case "$options":
			if _, has := ops["$regex"]; !has {
				return false, false
			}
			m, ok = true, true
		default:
			return false, false
		}
		if !ok {
			return false, false
		}
		match = match && m
	}
	return match, true
}

// regexps caches compiled patterns (a query evaluates its pattern on every
// candidate); it is emptied when full, so callers' patterns cannot grow it.
var (
	regexpsMu sync.Mutex
	regexps   = map[string]*regexp.Regexp{}
)

func compiled(pat string) (*regexp.Regexp, error) {
	regexpsMu.Lock()
	defer regexpsMu.Unlock()
	if re, ok := regexps[pat]; ok {
		return re, nil
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, err
	}
	if len(regexps) >= 256 {
		clear(regexps)
	}
	regexps[pat] = re
	return re, nil
}

func anyOperator(m bson.M) bool {
	for k := range m {
		if strings.HasPrefix(k, "$") {
			return true
		}
	}
	return false
}

func asList(v any) ([]any, bool) {
	switch x := v.(type) {
	case bson.A:
		return x, true
	case []any:
		return x, true
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out, true
	}
	return nil, false
}

// equalsAny: MongoDB's equality against a path's values: a value equal to
// want, or an array holding it; null matches a missing field too.
func equalsAny(vals []bson.RawValue, missing bool, want any) (match, ok bool) {
	w, wok := toRaw(want)
	if !wok {
		return false, false
	}
	if w.Type != bson.TypeNull && !decided(w) {
		return false, false // arrays, documents, patterns, NaN, decimal128…
	}
	if w.Type == bson.TypeNull {
		if len(vals) == 0 {
			return true, true
		}
		if missing {
			// Some elements of an array of documents lack the field and
			// others hold it: stores differ on whether null matches.
			return false, false
		}
		for _, v := range flatten(vals) {
			if v.Type == bson.TypeNull || v.Type == bson.TypeUndefined {
				return true, true
			}
		}
		return false, true
	}
	for _, v := range flatten(vals) {
		if bracket(v.Type) != bracket(w.Type) {
			continue
		}
		c, ok := compareValues(v, w)
		if !ok {
			return false, false
		}
		if c == 0 {
			return true, true
		}
	}
	return false, true
}

// flatten adds the elements of array values to the values (an equality or
// a comparison matches an array when it matches one of its elements).
func flatten(vals []bson.RawValue) []bson.RawValue {
	out := vals
	for _, v := range vals {
		if v.Type == bson.TypeArray {
			elems, err := v.Array().Values()
			if err == nil {
				out = append(out, elems...)
			}
		}
	}
	return out
}

// toRaw converts a Go value of a filter to a BSON value.
func toRaw(v any) (bson.RawValue, bool) {
	if v == nil {
		return bson.RawValue{Type: bson.TypeNull}, true
	}
	t, data, err := bson.MarshalValue(v)
	if err != nil {
		return bson.RawValue{}, false
	}
	return bson.RawValue{Type: t, Value: data}, true
}

// valuesAt is the values at a dotted path, descending into arrays of
// documents.
func valuesAt(doc bson.Raw, path string) []bson.RawValue {
	vals, _ := valuesAndGaps(doc, path)
	return vals
}

// pathValues is what a dotted path reaches in a document.
type pathValues struct {
	vals []bson.RawValue
	// missing: the document, or an element of an array of documents on the
	// way, lacks the path (an equality with null matches there).
	missing bool
	// blocked: the path meets a value it cannot enter before its end (a
	// scalar or null where a document should be); mixed:
	// an array on the way holds elements that are not documents; viaArray:
	// the path goes through an array of documents. The embedded store
	// answers some operators there otherwise than MongoDB (see decideOn).
	blocked, mixed, viaArray bool
}

// valuesAndGaps is valuesAt, also reporting the path's gaps.
func valuesAndGaps(doc bson.Raw, path string) (vals []bson.RawValue, missing bool) {
	pv := walk(doc, path)
	return pv.vals, pv.missing
}

func walk(doc bson.Raw, path string) (pv pathValues) {
	pv.walk(doc, path)
	return pv
}

func (pv *pathValues) walk(doc bson.Raw, path string) {
	head, rest, nested := strings.Cut(path, ".")
	v, err := doc.LookupErr(head)
	if err != nil {
		pv.missing = true
		return
	}
	if !nested {
		pv.vals = append(pv.vals, v)
		return
	}
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		pv.walk(v.Document(), rest)
		return
	case bson.TypeArray:
		elems, err := v.Array().Values()
		if err != nil {
			pv.missing, pv.blocked = true, true
			return
		}
		if len(elems) == 0 {
			pv.missing = true
			return
		}
		pv.viaArray = true
		for _, e := range elems {
			if e.Type != bson.TypeEmbeddedDocument {
				pv.missing, pv.mixed = true, true
				continue
			}
			pv.walk(e.Document(), rest)
		}
		return
	}
	pv.missing, pv.blocked = true, true
}

// decideOn reports whether op (an operator, "" for an equality with a
// value, "null" for one with null, "sort") is decided exactly on what
// the path reached. Compared with the embedded store (the evaluator's test,
// with generated documents), and declined where that store answers
// otherwise than MongoDB: an array of mixed elements on the way (its
// equality misses a document's value), a negation through an array of
// documents ($ne and $nin match a document one of whose values is
// excluded), and a path blocked by a scalar (it sorts by that scalar).
func (pv pathValues) decideOn(op string) bool {
	if pv.mixed {
		return false
	}
	switch op {
	case "$ne", "$nin":
		return !pv.viaArray && !pv.blocked
	case "null", "$exists", "sort":
		return !pv.blocked
	}
	return true
}

// bracket is MongoDB's type bracket: values compare within one only.
func bracket(t bson.Type) int {
	switch t {
	case bson.TypeNull, bson.TypeUndefined:
		return 1
	case bson.TypeInt32, bson.TypeInt64, bson.TypeDouble, bson.TypeDecimal128:
		return 2
	case bson.TypeString, bson.TypeSymbol:
		return 3
	case bson.TypeEmbeddedDocument:
		return 4
	case bson.TypeArray:
		return 5
	case bson.TypeBinary:
		return 6
	case bson.TypeObjectID:
		return 7
	case bson.TypeBoolean:
		return 8
	case bson.TypeDateTime:
		return 9
	case bson.TypeTimestamp:
		return 10
	case bson.TypeRegex:
		return 11
	}
	return 12
}

// decided reports whether the evaluator compares v exactly as MongoDB
// does: null, numbers (integers and doubles, compared exactly; not NaN,
// whose order is the store's own, nor decimal128, which the embedded store
// cannot hold, nor the double -2^63), strings, object ids, booleans and
// dates. The service
// stores nothing else in a field it selects or sorts by; a query that meets
// anything else goes to the store.
func decided(v bson.RawValue) bool {
	switch v.Type {
	case bson.TypeNull, bson.TypeInt32, bson.TypeInt64, bson.TypeString, bson.TypeObjectID, bson.TypeBoolean, bson.TypeDateTime:
		return true
	case bson.TypeDouble:
		f := v.Double()
		// -2^63 as a double equals the least int64 (MongoDB); the document
		// engine holds them unequal, so neither answer is given here.
		return !math.IsNaN(f) && f != -0x1p63
	}
	return false
}

// compareValues orders two values as MongoDB sorts them: by type bracket,
// then by value (numbers exactly, strings by bytes: the simple collation).
// ok is false for a value the evaluator does not decide (see decided).
func compareValues(a, b bson.RawValue) (c int, ok bool) {
	if !decided(a) || !decided(b) {
		return 0, false
	}
	if ba, bb := bracket(a.Type), bracket(b.Type); ba != bb {
		return ba - bb, true
	}
	switch bracket(a.Type) {
	case 1:
		return 0, true
	case 2:
		x, _ := numericOf(a)
		y, _ := numericOf(b)
		return compareNumeric(x, y), true
	case 3:
		return strings.Compare(a.StringValue(), b.StringValue()), true
	case 8:
		x, y := a.Boolean(), b.Boolean()
		switch {
		case x == y:
			return 0, true
		case !x:
			return -1, true
		}
		return 1, true
	case 9:
		return compareInt(a.DateTime(), b.DateTime()), true
	}
	return strings.Compare(string(a.Value), string(b.Value)), true // object ids: their bytes
}

// numeric is a BSON number held exactly: an int32 or int64 as an integer,
// a double as itself. Integers beyond 2^53 have no exact float64, so an
// integer and a double are compared without converting the integer.
type numeric struct {
	isInt bool
	i     int64
	f     float64
}

func numericOf(v bson.RawValue) (numeric, bool) {
	switch v.Type {
	case bson.TypeInt32:
		return numeric{isInt: true, i: int64(v.Int32())}, true
	case bson.TypeInt64:
		return numeric{isInt: true, i: v.Int64()}, true
	case bson.TypeDouble:
		if f := v.Double(); !math.IsNaN(f) {
			return numeric{f: f}, true
		}
	}
	return numeric{}, false
}

// compareNumeric orders two numbers exactly (-0 equals 0; no NaN here).
func compareNumeric(a, b numeric) int {
	switch {
	case a.isInt && b.isInt:
		return compareInt(a.i, b.i)
	case a.isInt:
		return compareIntFloat(a.i, b.f)
	case b.isInt:
		return -compareIntFloat(b.i, a.f)
	case a.f < b.f:
		return -1
	case a.f > b.f:
		return 1
	}
	return 0
}

// compareIntFloat orders an integer and a double exactly: by the double's
// integer part first (exact below 2^63), then by its fraction.
func compareIntFloat(i int64, f float64) int {
	switch {
	case f >= 0x1p63: // and +Inf: above every int64
		return -1
	case f < -0x1p63: // and -Inf
		return 1
	}
	t := math.Trunc(f)
	if c := compareInt(i, int64(t)); c != 0 {
		return c
	}
	switch {
	case f > t:
		return -1
	case f < t:
		return 1
	}
	return 0
}

// NewColl returns an empty index of one collection.
func NewColl(spec Spec) *Coll {
	mc := &Coll{spec: spec, prune: newPruner(spec), idx: idTable{seed: maphash.MakeSeed()}, keys: map[string]*postings{}}
	if spec.Words != nil {
		mc.words = &wordIndex{vocab: map[string]int32{}, lists: slab{bitmaps: true}}
	}
	return mc
}

// Query is a find the index may answer: limit 0 means no limit.
type Query struct {
	Filter      bson.M
	Sort        bson.D
	Skip, Limit int64
	// Among, when not nil, are the only records the answer may hold (the
	// ids a word index named): the filter is evaluated on them alone, as
	// an _id $in would be, without comparing each record with every id.
	Among []string
}

// Len is the number of records held.
func (mc *Coll) Len() int { return len(mc.locs) }

// Doc is the record id as held (only the fields the spec keeps).
func (mc *Coll) Doc(id string) (bson.Raw, bool) {
	n, ok := mc.find(id)
	if !ok {
		return nil, false
	}
	return mc.raw(n), true
}

// Each calls fn for every record held, in no order.
func (mc *Coll) Each(fn func(id string, raw bson.Raw)) {
	for n := range mc.locs {
		raw := mc.raw(int32(n))
		fn(string(idOf(raw)), raw)
	}
}

// Match reports whether doc matches filter as the store decides it; ok is
// false where the evaluator cannot decide exactly.
func Match(doc bson.Raw, filter bson.M) (match, ok bool) { return evalFilter(doc, filter) }

func decodeRaw(raw bson.Raw, into any) error {
	dec := bson.NewDecoder(bson.NewDocumentReader(bytes.NewReader(raw)))
	dec.DefaultDocumentM()
	return dec.Decode(into)
}
func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}
