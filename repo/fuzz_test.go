package repo

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// depthOf measures a JSON value's nesting: an object or array is one level
// more than its deepest member; anything else is zero.
func depthOf(v any) int {
	d := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			d = max(d, depthOf(e))
		}
		return d + 1
	case []any:
		for _, e := range x {
			d = max(d, depthOf(e))
		}
		return d + 1
	}
	return 0
}

// entriesOf counts the keys and array elements at every depth.
func entriesOf(v any) int {
	n := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			n += 1 + entriesOf(e)
		}
	case []any:
		for _, e := range x {
			n += 1 + entriesOf(e)
		}
	}
	return n
}

// nestedArray reports whether an array sits directly inside an array at any depth.
func nestedArray(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if nestedArray(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if _, ok := e.([]any); ok || nestedArray(e) {
				return true
			}
		}
	}
	return false
}

// badKey reports whether any key at any depth breaks the key rules.
func badKey(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "" || k[0] == '$' || strings.ContainsAny(k, ".\x00") || len(k) > FreeFormMaxKey || badKey(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if badKey(e) {
				return true
			}
		}
	}
	return false
}

// FuzzCheckFreeForm: CheckFreeForm accepts exactly the objects within the
// limits, measured here independently, and what it accepts can be stored as
// a record's field inside a change entry inside a rollback plan.
func FuzzCheckFreeForm(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":{"b":[1,{"c":null}]}}`, `{"$gt":1}`, `{"a.b":1}`, `{"":1}`, `{"a\u0000":1}`,
		`{"a":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]}`, `{"a":[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var obj map[string]any
		if json.Unmarshal(b, &obj) != nil || obj == nil {
			return
		}
		err := CheckFreeForm("f", obj)
		ok := depthOf(obj) <= FreeFormMaxDepth && entriesOf(obj) <= FreeFormMaxEntries && !badKey(obj) && !nestedArray(obj)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalid || !strings.HasPrefix(e.Field, "f") {
				t.Fatalf("CheckFreeForm(%s) = %v; want invalid_argument on f", b, err)
			}
			if ok {
				t.Fatalf("CheckFreeForm refused %s, which is within the limits: %v", b, err)
			}
			return
		}
		if !ok {
			t.Fatalf("CheckFreeForm accepted %s (depth %d, %d entries, a bad key: %v, an array in an array: %v)", b, depthOf(obj), entriesOf(obj), badKey(obj), nestedArray(obj))
		}
		// record → change entry (before/after) → rollback plan step.
		doc := bson.M{"plan": bson.M{"steps": bson.A{bson.M{"entry": bson.M{"after": bson.M{"social_links": obj}}}}}}
		if _, err := bson.Marshal(doc); err != nil {
			t.Fatalf("accepted %s, which BSON cannot hold: %v", b, err)
		}
	})
}

// FuzzSearchText: search text is matched literally and case-insensitively:
// its pattern compiles, and matches a text exactly when the text contains the
// search, whatever characters either holds.
func FuzzSearchText(f *testing.F) {
	for _, s := range [][2]string{{"pitch", "the Pitch deck"}, {".*", "abc"}, {"(x)", "a (X) b"}, {"a\x00b", "a\x00b"}, {`\d`, `\d`},
		{"$where", "x"}, {"[", "["}, {"é", "É"}, {"^", "a^b"}, {"", "x"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, search, text string) {
		if !utf8.ValidString(search) || !utf8.ValidString(text) {
			return // arguments are refused unless they are UTF-8
		}
		re, err := regexp.Compile("(?i)" + literal(search)["$regex"].(string))
		if err != nil {
			t.Fatalf("search %q: pattern does not compile: %v", search, err)
		}
		if got, want := re.MatchString(text), containsFold(text, search); got != want {
			t.Fatalf("search %q in %q: match %v, want %v", search, text, got, want)
		}
		el, err := regexp.Compile("(?i)" + Element(search)["$regex"].(string))
		if err != nil {
			t.Fatalf("element %q: pattern does not compile: %v", search, err)
		}
		if got, want := el.MatchString(text), strings.EqualFold(text, search); got != want {
			t.Fatalf("element %q against %q: match %v, want %v", search, text, got, want)
		}
	})
}

// containsFold reports whether s contains sub, ignoring case (simple folding,
// rune for rune, as a case-insensitive regular expression does).
func containsFold(s, sub string) bool {
	rs, rsub := []rune(s), []rune(sub)
	for i := 0; i+len(rsub) <= len(rs); i++ {
		if strings.EqualFold(string(rs[i:i+len(rsub)]), sub) {
			return true
		}
	}
	return false
}
