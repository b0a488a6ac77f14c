package tools

import (
	"encoding/json"
	"reflect"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/repo"
)

// encodeResult writes a tool's result as JSON twice: shown, for the caller,
// and kept, what may be stored (an idempotency key's result) and replayed.
// They differ only where the result carries a repo.Secret (a new agent key,
// a signed URL): kept holds its kept form, shown the value. A result without
// one is the same bytes in both.
func encodeResult(out any) (shown, kept []byte, err error) {
	kept, err = marshalResult(out)
	if err != nil {
		return nil, nil, err
	}
	revealed, changed := rewrite(reflect.ValueOf(out), showSecret, maySecret)
	if !changed {
		return kept, kept, nil
	}
	shown, err = marshalResult(revealed.Interface())
	return shown, kept, err
}

// marshalResult writes a result as JSON. A stored value JSON cannot
// write must not make a read fail: the tools refuse dates outside years
// 0000–9999, but older versions and people working in the database directly
// may have stored one, and encoding/json refuses to write it. Then the result
// is written again with every such date held at the nearest end of the range
// (the stored value is left as it is), so the reader still answers.
func marshalResult(out any) ([]byte, error) {
	text, err := json.Marshal(out)
	if err == nil {
		return text, nil
	}
	fixed, changed := rewrite(reflect.ValueOf(out), clampLeaf, nil)
	if !changed {
		return nil, err
	}
	return json.Marshal(fixed.Interface())
}

var secretType = reflect.TypeFor[repo.Secret]()

// showSecret makes every secret of a result show its value.
func showSecret(v reflect.Value) (reflect.Value, bool, bool) {
	if v.Type() != secretType {
		return v, false, false
	}
	s := v.Interface().(repo.Secret)
	if s.IsZero() {
		return v, false, true
	}
	return reflect.ValueOf(s.Shown()), true, true
}

// secretTypes caches, per type, whether a value of it may hold a secret, so
// the walk for secrets skips the records of a long list at once.
var secretTypes sync.Map

// maySecret reports whether a value of type t may hold a repo.Secret:
// it is one, or holds one, or holds an interface (whose value may).
func maySecret(t reflect.Type) bool {
	if v, ok := secretTypes.Load(t); ok {
		return v.(bool)
	}
	secretTypes.Store(t, true) // a recursive type is walked
	may := false
	switch t.Kind() {
	case reflect.Interface:
		may = true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		may = maySecret(t.Elem())
	case reflect.Map:
		may = maySecret(t.Elem())
	case reflect.Struct:
		may = t == secretType
		for i := 0; i < t.NumField() && !may; i++ {
			may = t.Field(i).IsExported() && maySecret(t.Field(i).Type)
		}
	}
	secretTypes.Store(t, may)
	return may
}

var (
	timeType     = reflect.TypeFor[time.Time]()
	dateTimeType = reflect.TypeFor[bson.DateTime]()
)

// clampTime holds t within what RFC 3339 can write.
func clampTime(t time.Time) (time.Time, bool) {
	u := t.UTC()
	switch {
	case u.Before(minTime):
		return minTime, true
	case u.After(maxTime):
		return maxTime, true
	}
	return t, false
}

// clampLeaf holds every time (time.Time, bson.DateTime) outside years
// 0000–9999 within them.
func clampLeaf(v reflect.Value) (reflect.Value, bool, bool) {
	switch v.Type() {
	case timeType:
		if t, ok := clampTime(v.Interface().(time.Time)); ok {
			return reflect.ValueOf(t), true, true
		}
		return v, false, true
	case dateTimeType:
		if t, ok := clampTime(v.Interface().(bson.DateTime).Time()); ok {
			return reflect.ValueOf(bson.NewDateTimeFromTime(t)), true, true
		}
		return v, false, true
	}
	return v, false, false
}

// rewrite returns v with leaf applied to every value in it, copying only
// what contains a value leaf changed; changed reports whether anything was.
// leaf answers (new value, changed, handled): a handled value is not walked
// into. prune, when set, tells the types that need no walk.
func rewrite(v reflect.Value, leaf func(reflect.Value) (reflect.Value, bool, bool), prune func(reflect.Type) bool) (reflect.Value, bool) {
	inner := func(v reflect.Value) (reflect.Value, bool) { return rewrite(v, leaf, prune) }
	if !v.IsValid() {
		return v, false
	}
	if prune != nil && !prune(v.Type()) {
		return v, false
	}
	if out, changed, handled := leaf(v); handled {
		return out, changed
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v, false
		}
		e, changed := inner(v.Elem())
		if !changed {
			return v, false
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(e)
		return p, true
	case reflect.Interface:
		if v.IsNil() {
			return v, false
		}
		e, changed := inner(v.Elem())
		if !changed {
			return v, false
		}
		i := reflect.New(v.Type()).Elem()
		i.Set(e)
		return i, true
	case reflect.Struct:
		var out reflect.Value
		for i := 0; i < v.NumField(); i++ {
			if !v.Type().Field(i).IsExported() {
				continue
			}
			f, changed := inner(v.Field(i))
			if !changed {
				continue
			}
			if !out.IsValid() {
				out = reflect.New(v.Type()).Elem()
				out.Set(v)
			}
			out.Field(i).Set(f)
		}
		if out.IsValid() {
			return out, true
		}
		return v, false
	case reflect.Map:
		if v.IsNil() {
			return v, false
		}
		var out reflect.Value
		it := v.MapRange()
		for it.Next() {
			e, changed := inner(it.Value())
			if !changed {
				continue
			}
			if !out.IsValid() {
				out = reflect.MakeMapWithSize(v.Type(), v.Len())
				for it2 := v.MapRange(); it2.Next(); {
					out.SetMapIndex(it2.Key(), it2.Value())
				}
			}
			out.SetMapIndex(it.Key(), e)
		}
		if out.IsValid() {
			return out, true
		}
		return v, false
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return v, false
		}
		var out reflect.Value
		for i := 0; i < v.Len(); i++ {
			e, changed := inner(v.Index(i))
			if !changed {
				continue
			}
			if !out.IsValid() {
				if v.Kind() == reflect.Slice {
					out = reflect.MakeSlice(v.Type(), v.Len(), v.Len())
					reflect.Copy(out, v)
				} else {
					out = reflect.New(v.Type()).Elem()
					out.Set(v)
				}
			}
			out.Index(i).Set(e)
		}
		if out.IsValid() {
			return out, true
		}
		return v, false
	}
	return v, false
}
