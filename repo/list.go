package repo

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/ledger"
)

// Page is one page of a list (the engine's, ledger.Page).
type Page[T any] = ledger.Page[T]

// ListPage returns the records of coll matching filter in sort order, with a
// total count (ledger.List: from the engine's index or the store).
func ListPage[T any](ctx context.Context, s *Store, coll string, filter bson.M, sort bson.D, limit, offset int) (Page[T], error) {
	return ledger.List[T](ctx, s.Engine, coll, filter, sort, limit, offset)
}

// literal matches text literally and case-insensitively: the query's
// characters are never read as a pattern or an operator.
func literal(text string) bson.M {
	return bson.M{"$regex": Quote(text), "$options": "i"}
}

// Element matches an array field one of whose elements is text, whole,
// literally and case-insensitively: "ai" matches a topic "AI" but not "AI policy".
func Element(text string) bson.M {
	return bson.M{"$regex": "^" + Quote(text) + "$", "$options": "i"}
}

// Quote escapes text for a regular expression, MongoDB's (PCRE) and Go's
// alike. A NUL byte, which MongoDB refuses inside a pattern, is written as
// the escape \x00.
func Quote(text string) string {
	return strings.ReplaceAll(regexp.QuoteMeta(text), "\x00", `\x00`)
}

// AnyField matches text literally in any of fields.
func AnyField(text string, fields ...string) bson.M {
	or := bson.A{}
	for _, f := range fields {
		or = append(or, bson.M{f: literal(text)})
	}
	return bson.M{"$or": or}
}

// Active is the filter of records that are not archived, unless includeArchived.
func Active(filter bson.M, includeArchived bool) bson.M {
	if !includeArchived {
		filter["archived_at"] = nil
	}
	return filter
}

// Limits of free-form objects (social_links, preferences, attributes, media
// metadata). MongoDB refuses documents nested deeper than 100 levels, and a
// free-form object sits inside a record, the record inside its change entry,
// and the entry inside a rollback plan, each adding levels: 20 levels leave
// room for all of them, so whatever is accepted can be written, logged and
// rolled back.
const (
	// FreeFormMaxDepth is how deep a free-form object may nest: the object
	// itself is level 1, and each object or array inside it one more.
	FreeFormMaxDepth = 20
	// FreeFormMaxEntries caps the keys and array elements of one free-form
	// object, counted at every depth.
	FreeFormMaxEntries = 1000
	// FreeFormMaxKey caps the length of a key, in bytes.
	FreeFormMaxKey = 200
)

// FreeFormRules says in one sentence what a free-form object may hold.
var FreeFormRules = fmt.Sprintf("at most %d levels deep and %d keys and array elements in all; keys non-empty, at most %d bytes, "+
	"without a leading '$', a '.' or a NUL character; no array directly inside another array", FreeFormMaxDepth, FreeFormMaxEntries, FreeFormMaxKey)

// CheckFreeForm refuses a free-form object MongoDB would misread or refuse,
// or that could not be rolled back: keys that are empty, start with '$',
// contain '.' or NUL, or are too long, and objects nested too deep or too
// large. Objects inside arrays are checked too. An array directly inside an
// array ([[1]]) is refused on the path of the outer array: the embedded
// store cannot hold one, and a field must be storable on every store the
// service runs on. A bad key is reported on the path of the object holding
// it (social_links.a.b); a size or depth beyond the limits on field itself.
func CheckFreeForm(field string, obj map[string]any) error {
	entries := 0
	return checkObject(field, field, obj, 1, &entries)
}

func checkObject(field, path string, obj map[string]any, depth int, entries *int) error {
	if depth > FreeFormMaxDepth {
		return Invalid(field, "%s is nested more than %d levels deep; free-form objects are %s", path, FreeFormMaxDepth, FreeFormRules)
	}
	for k, v := range obj {
		*entries++
		if *entries > FreeFormMaxEntries {
			return Invalid(field, "has more than %d keys and array elements; free-form objects are %s", FreeFormMaxEntries, FreeFormRules)
		}
		switch {
		case k == "" || strings.HasPrefix(k, "$") || strings.Contains(k, "."):
			return Invalid(path, "key %q is not allowed: keys may not be empty, start with '$' or contain '.'", k)
		case strings.ContainsRune(k, 0):
			return Invalid(path, "key %q contains a NUL character, which keys may not hold", k)
		case len(k) > FreeFormMaxKey:
			return Invalid(path, "key %.40q… is %d bytes long; keys are at most %d bytes", k, len(k), FreeFormMaxKey)
		}
		if err := checkValue(field, path+"."+k, v, depth, entries); err != nil {
			return err
		}
	}
	return nil
}

// checkValue checks v, held at depth, for the objects and arrays in it.
func checkValue(field, path string, v any, depth int, entries *int) error {
	switch x := v.(type) {
	case map[string]any:
		return checkObject(field, path, x, depth+1, entries)
	case []any:
		if depth+1 > FreeFormMaxDepth {
			return Invalid(field, "%s is nested more than %d levels deep; free-form objects are %s", path, FreeFormMaxDepth, FreeFormRules)
		}
		for _, e := range x {
			*entries++
			if *entries > FreeFormMaxEntries {
				return Invalid(field, "has more than %d keys and array elements; free-form objects are %s", FreeFormMaxEntries, FreeFormRules)
			}
			if _, nested := e.([]any); nested {
				return Invalid(path, "holds an array directly inside an array, which cannot be stored; wrap the inner array in an object ([{\"items\": [...]}]); free-form objects are %s", FreeFormRules)
			}
			if err := checkValue(field, path, e, depth+1, entries); err != nil {
				return err
			}
		}
	}
	return nil
}

// NewestFirst is the order of every directory list (and of most others): newest first, with _id
// breaking ties between records created in the same millisecond.
var NewestFirst = bson.D{{Key: "created_at", Value: -1}, {Key: "_id", Value: -1}}

// patternBound is how long a list's free-text filter (package textlist) may
// scan the store when the word index cannot answer it (a variable for the
// test of the bound).
var patternBound = 10 * time.Second

// TextPatternBound is patternBound.
func TextPatternBound() time.Duration { return patternBound }

// TextsByPattern reports whether s asks the store's pattern for every
// free-text filter of a list, so that tests can compare the two paths.
func (s *Store) TextsByPattern() bool { return s.textByPattern.Load() }
