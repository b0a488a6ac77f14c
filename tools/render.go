package tools

import (
	"encoding/json"
	"reflect"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// encodeResult writes a tool's result as JSON. A stored value JSON cannot
// write must not make a read fail: the tools refuse dates outside years
// 0000–9999, but older versions and people working in the database directly
// may have stored one, and encoding/json refuses to write it. Then the result
// is written again with every such date held at the nearest end of the range
// (the stored value is left as it is), so the reader still answers.
func encodeResult(out any) ([]byte, error) {
	text, err := json.Marshal(out)
	if err == nil {
		return text, nil
	}
	fixed, changed := renderable(reflect.ValueOf(out))
	if !changed {
		return nil, err
	}
	return json.Marshal(fixed.Interface())
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

// renderable returns v with every time (time.Time, bson.DateTime) outside
// years 0000–9999 clamped into them, copying only what contains one; changed
// reports whether anything was.
func renderable(v reflect.Value) (reflect.Value, bool) {
	if !v.IsValid() {
		return v, false
	}
	switch v.Type() {
	case timeType:
		if t, ok := clampTime(v.Interface().(time.Time)); ok {
			return reflect.ValueOf(t), true
		}
		return v, false
	case dateTimeType:
		if t, ok := clampTime(v.Interface().(bson.DateTime).Time()); ok {
			return reflect.ValueOf(bson.NewDateTimeFromTime(t)), true
		}
		return v, false
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v, false
		}
		e, changed := renderable(v.Elem())
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
		e, changed := renderable(v.Elem())
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
			f, changed := renderable(v.Field(i))
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
			e, changed := renderable(it.Value())
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
			e, changed := renderable(v.Index(i))
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
