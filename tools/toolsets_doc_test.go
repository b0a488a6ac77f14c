package tools

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"outreach/repo"
)

// toolsetsPath is the page that holds the table of toolsets.
const toolsetsPath = "../docs/toolsets.md"

// toolsetTable is the table of toolsets (docs/toolsets.md), written from the
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

// TestDocToolsets holds the table of toolsets (docs/toolsets.md) to the
// code, as the data dictionary is held (go test ./tools -update rewrites it).
func TestDocToolsets(t *testing.T) {
	const start, end = "<!-- toolsets: generated from the code (go test ./tools -update); do not edit by hand -->\n", "<!-- end of toolsets -->\n"
	b, err := os.ReadFile(toolsetsPath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i, j := strings.Index(text, start), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the toolset table's markers", toolsetsPath)
	}
	got, want := text[i+len(start):j], toolsetTable()
	if *update {
		if err := os.WriteFile(toolsetsPath, []byte(text[:i+len(start)]+want+text[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: the toolset table is stale (-code +page); run go test ./tools -update:\n%s", toolsetsPath, diff)
	}
}

// toolPages names the page that describes each toolset's tools.
var toolPages = map[string]string{
	"outlets":       "../docs/tools/outlets.md",
	"channels":      "../docs/tools/outlets.md",
	"contacts":      "../docs/tools/contacts.md",
	"campaigns":     "../docs/tools/pipeline.md",
	"opportunities": "../docs/tools/pipeline.md",
	"coverage":      "../docs/tools/pipeline.md",
	"reports":       "../docs/tools/reports.md",
	"imports":       "../docs/tools/reports.md",
	"notes":         "../docs/tools/notes.md",
	"search":        "../docs/tools/search.md",
	"audit":         "../docs/tools/audit.md",
	"keys":          "../docs/tools/audit.md",
	"media":         "../docs/tools/media.md",
	"emails":        "../docs/tools/emails.md",
	"notifications": "../docs/tools/notifications.md",
	"messaging":     "../docs/tools/notifications.md",
	"pitches":       "../docs/tools/pitches.md",
}

// TestDocToolPages holds the tool pages to the code: every toolset has a
// page, and every tool is named on its toolset's page, so a new tool is not
// served undocumented.
func TestDocToolPages(t *testing.T) {
	pages := map[string]string{}
	for _, tool := range All(nil) {
		path, ok := toolPages[tool.Toolset]
		if !ok {
			t.Errorf("toolset %s has no page in toolPages (docs/tools/)", tool.Toolset)
			continue
		}
		if _, ok := pages[path]; !ok {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			pages[path] = string(b)
		}
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(tool.Def.Name) + `\b`).MatchString(pages[path]) {
			t.Errorf("%s (toolset %s) is not named on %s", tool.Def.Name, tool.Toolset, path)
		}
	}
}

// TestReadmeToolCount holds the README's count of tools to the code.
func TestReadmeToolCount(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("- %d tools in the groups", len(All(nil))); !strings.Contains(string(b), want) {
		t.Errorf("README.md does not say %q", want)
	}
}
