package ledger

import (
	"errors"
	"reflect"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Records are documents with a canonical UUID string _id. Every stored
// record carries bookkeeping fields the engine owns; they are not part of a
// change's before/after.
const (
	FieldVersion    = "version"
	FieldLastChange = "last_change"
	FieldLockedBy   = "locked_by"
)

// Page is one page of a list: the items asked for and the total matching.
type Page[T any] struct {
	Total int64
	Items []T
}

// CheckID reports whether id is a UUID in its canonical form.
func CheckID(id string) error {
	u, err := uuid.Parse(id)
	if err != nil || u.String() != id {
		return errors.New("not a canonical UUID")
	}
	return nil
}

// ToM returns rec's stored state without bookkeeping fields.
func ToM(rec any) (bson.M, error) {
	raw, err := bson.Marshal(rec)
	if err != nil {
		return nil, err
	}
	var m bson.M
	if err := bson.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return Strip(m), nil
}

// DecodeM decodes a stored state into a record.
func DecodeM(m bson.M, into any) error {
	raw, err := bson.Marshal(m)
	if err != nil {
		return err
	}
	return bson.Unmarshal(raw, into)
}

// Strip returns doc without its bookkeeping fields.
func Strip(doc bson.M) bson.M {
	out := make(bson.M, len(doc))
	for k, v := range doc {
		switch k {
		case FieldVersion, FieldLastChange, FieldLockedBy:
		default:
			out[k] = v
		}
	}
	return out
}

// SameState compares two stored states field by field, whatever the order of
// their keys or the Go types the driver decoded their sub-documents into.
func SameState(a, b bson.M) bool {
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

// AsInt reads a stored integer (int, int32 or int64).
func AsInt(v any) (int64, bool) {
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
