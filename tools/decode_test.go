package tools

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"outreach/repo"
)

type fuzzIn struct {
	ID     string            `json:"id"`
	Type   *string           `json:"type,omitempty"`
	IDs    []string          `json:"ids,omitempty"`
	Limit  *int              `json:"limit,omitempty" max:"500"`
	Flag   bool              `json:"flag,omitempty"`
	Fields map[string]any    `json:"fields,omitempty"`
	Nested map[string]string `json:"nested,omitempty"`
}

func TestDecode(t *testing.T) {
	spec := newArgSpec(reflect.TypeFor[fuzzIn]())
	cases := []struct {
		in, field string
	}{
		{`{"id":"x"}`, ""},
		{`{}`, "id"},
		{`{"id":null}`, "id"},
		{`{"id":"x","limit":1.5}`, "limit"},
		{`{"id":"x","limit":"3"}`, "limit"},
		{`{"id":"x","ids":"a"}`, "ids"},
		{`{"id":"x","ids":[1]}`, "ids"},
		{`{"id":"x","flag":"true"}`, "flag"},
		{`{"id":"x","extra":1}`, "extra"},
		{`[1]`, ""},
		{`"s"`, ""},
	}
	for _, tc := range cases {
		var in fuzzIn
		err := decode(json.RawMessage(tc.in), &in, spec)
		var e *repo.Error
		switch {
		case tc.field == "" && tc.in == `{"id":"x"}`:
			if err != nil {
				t.Errorf("%s: %v", tc.in, err)
			}
		case !errors.As(err, &e) || e.Code != repo.CodeInvalid:
			t.Errorf("%s: error %v, want invalid_argument", tc.in, err)
		case e.Field != tc.field:
			t.Errorf("%s: field %q, want %q (%s)", tc.in, e.Field, tc.field, e.Message)
		}
	}
}

// FuzzDecode: any bytes as arguments either decode or give an
// invalid_argument error; never a panic, never another kind of error. What
// decodes keeps within every limit (checkLimits).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"id":"x"}`, `{"id":"x","ids":["a"],"limit":3,"fields":{"a":{"b":[1,{"c":null}]}}}`, `{"limit":1e400}`, `null`, ``, `{"id":"\ud800"}`, `{"id":"x","type":null}`, `{"id":"0B9D5C55-6A7E-4A55-9A63-0C1C1C0A0A01"}`, "{\"id\":\"\xff\"}", `{"id":"x","fields":{"a\u0000":1}}`, `{"id":"\ud83d\ude00"}`} {
		f.Add([]byte(s))
	}
	spec := newArgSpec(reflect.TypeFor[fuzzIn]())
	f.Fuzz(func(t *testing.T, b []byte) {
		var in fuzzIn
		err := decode(json.RawMessage(b), &in, spec)
		if err == nil {
			checkLimits(t, b, &in)
			return
		}
		var e *repo.Error
		if !errors.As(err, &e) || e.Code != repo.CodeInvalid || e.Message == "" {
			t.Fatalf("decode(%q) = %v; want an invalid_argument error with a message", b, err)
		}
	})
}
