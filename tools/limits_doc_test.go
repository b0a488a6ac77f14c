package tools

import (
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"outreach/internal/doctest"
)

// limitsPath is the page whose Limits table the code holds.
const limitsPath = "../docs/limits.md"

// TestDocLimits holds the table of limits (docs/limits.md) to the
// declarations (limits.go and the fields' tags): every argument whose limit
// is not its type's default has a row that names it and gives its figures,
// and the defaults have theirs. A limit changed in the code fails here until
// the page says so.
func TestDocLimits(t *testing.T) {
	rows, err := doctest.TableRows(limitsPath, "Limits")
	if err != nil {
		t.Fatal(err)
	}
	check := func(what, name string, figures ...int64) {
		t.Helper()
		for _, row := range rows {
			if !strings.Contains(row, name) {
				continue
			}
			all := true
			for _, f := range figures {
				if !regexp.MustCompile(`(^|[^0-9,])` + regexp.QuoteMeta(commas(f)) + `([^0-9,]|$)`).MatchString(row) {
					all = false
				}
			}
			if all {
				return
			}
		}
		t.Errorf("%s: the Limits table has no row naming %s with %v (%s)", limitsPath, name, figures, what)
	}
	check("the default of a string", "a string argument", MaxText)
	check("the default of an array", "an array argument", MaxItems)
	seen := map[string]bool{}
	for _, tool := range All(nil) {
		for _, a := range tool.spec.fields {
			byDefault := (a.kind == reflect.String && a.max == MaxText) || (a.kind == reflect.Slice && a.max == MaxItems) || a.max == 0
			if byDefault && !a.hasMin {
				continue
			}
			var figures []int64
			if a.max > 0 {
				figures = append(figures, a.max)
			}
			if a.hasMin {
				figures = append(figures, a.min)
			}
			key := a.name + strconv.FormatInt(a.max, 10) + strconv.FormatInt(a.min, 10)
			if seen[key] {
				continue
			}
			seen[key] = true
			check(tool.Def.Name+"."+a.name, "`"+a.name+"`", figures...)
		}
	}
}

// commas writes n with thousands separators, as the docs do.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	var out []string
	for len(s) > 3 {
		out = append([]string{s[len(s)-3:]}, out...)
		s = s[:len(s)-3]
	}
	return strings.Join(append([]string{s}, out...), ",")
}
