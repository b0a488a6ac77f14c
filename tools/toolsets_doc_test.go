package tools

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"outreach/repo"
)

const readmePath = "../README.md"

// toolsetTable is the README's table of toolsets, written from the
// toolsets and their tools: the names, the core set, how many tools each
// has and how many of them read, and the sums an operator weighs.
func toolsetTable() string {
	var b strings.Builder
	b.WriteString("| toolset | in `core` | tools | of them reads | what |\n|---|---|---|---|---|\n")
	all := All(nil)
	count := func(name string) (n, reads int) {
		for _, t := range all {
			if t.Toolset == name {
				n++
				if t.kind.readOnly() {
					reads++
				}
			}
		}
		return n, reads
	}
	order := append(CoreToolsets(), toolsetNames(func(t toolset) bool { return !t.core })...)
	for _, name := range order {
		for _, ts := range toolsets {
			if ts.name != name {
				continue
			}
			core := "no"
			switch {
			case ts.name == alwaysOn:
				core = "always"
			case ts.core:
				core = "yes"
			}
			n, reads := count(ts.name)
			fmt.Fprintf(&b, "| `%s` | %s | %d | %d | %s |\n", ts.name, core, n, reads, ts.description)
		}
	}
	core := All(nil, must(WithToolsets("core")))
	readKey := 0
	for _, t := range core {
		if t.Scope == repo.ScopeRead {
			readKey++
		}
	}
	fmt.Fprintf(&b, "\n%d toolsets serve %d tools; `core` serves %d of them (%d toolsets, `audit` included), of which a\n`read` key sees %d.\n",
		len(toolsets), len(all), len(core), len(CoreToolsets()), readKey)
	return b.String()
}

// TestReadmeToolsets holds the README's table of toolsets to the code, as
// the data dictionary is held (go test ./tools -update rewrites it).
func TestReadmeToolsets(t *testing.T) {
	const start, end = "<!-- toolsets: generated from the code (go test ./tools -update); do not edit by hand -->\n", "<!-- end of toolsets -->\n"
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i, j := strings.Index(text, start), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the toolset table's markers", readmePath)
	}
	got, want := text[i+len(start):j], toolsetTable()
	if *update {
		if err := os.WriteFile(readmePath, []byte(text[:i+len(start)]+want+text[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("README's toolset table is stale (-code +README); run go test ./tools -update:\n%s", diff)
	}
}
