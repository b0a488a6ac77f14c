package embedded

import (
	"fmt"
	"strings"
	"testing"

	"outreach/internal/doctest"
)

// TestDocAnalystBounds holds the table of the analyst endpoint's bounds
// (docs/operations.md, "Looking at the data with mongosh") to the constants
// the gate enforces.
func TestDocAnalystBounds(t *testing.T) {
	const path = "../docs/operations.md"
	section, err := doctest.Section(path, "Looking at the data with mongosh")
	if err != nil {
		t.Fatal(err)
	}
	thousands := func(n int) string {
		s := fmt.Sprint(n)
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	}
	for _, c := range []struct{ row, value string }{
		{"| documents per batch", "| " + thousands(MaxBatch) + " |"},
		{"| `skip`, `$skip`", "| " + thousands(MaxSkip) + " |"},
		{"| negative `limit`", "| down to -" + thousands(MaxBatch) + " |"},
		{"| `maxTimeMS`", fmt.Sprintf("| %d s, the default and the most |", int(MaxTime.Seconds()))},
		{"| aggregation stages", fmt.Sprintf("| %d |", MaxStages)},
		{"| nesting of documents", fmt.Sprintf("| %d levels |", MaxDepth)},
		{"| open cursors per connection", fmt.Sprintf("| %d |", MaxCursors)},
		{"| connections at once", fmt.Sprintf("| %d |", MaxConnections)},
		{"| one command", fmt.Sprintf("| %d MiB |", MaxRequest>>20)},
	} {
		found := false
		for _, l := range strings.Split(section, "\n") {
			if strings.HasPrefix(l, c.row) {
				found = true
				if !strings.Contains(l, c.value) {
					t.Errorf("%s: the bounds row %q does not say %q:\n%s", path, c.row, c.value, l)
				}
			}
		}
		if !found {
			t.Errorf("%s: the mongosh section has no bounds row %q", path, c.row)
		}
	}
}
