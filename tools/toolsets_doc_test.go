package tools

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/repo"
)

// toolsetsPath is the page that holds the table of toolsets.
const toolsetsPath = "../docs/toolsets.md"

// toolsetTable is the table of toolsets (docs/toolsets.md), written from the
// toolsets and their tools: the names, the core set, how many tools each
// has and how many of them read, and the sums an operator weighs.
func toolsetTable() string {
	var b strings.Builder
	b.WriteString("| toolset | listed by default | in `core` | tools | of them reads | bytes in tools/list | ~tokens | what |\n|---|---|---|---|---|---|---|---|\n")
	all := All(nil)
	size := func(name string) int {
		var defs []*mcp.Tool
		for _, t := range all {
			if t.Toolset == name {
				def := t.Def
				defs = append(defs, &def)
			}
		}
		return listBytes(defs)
	}
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
			listed := "no"
			if slices.Contains(defaultToolsets, ts.name) {
				listed = "yes"
			}
			bytes := size(ts.name)
			fmt.Fprintf(&b, "| `%s` | %s | %s | %d | %d | %d | %d | %s |\n", ts.name, listed, core, n, reads, bytes, bytes/4, ts.description)
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
	c := NewCatalog(nil, must(WithToolsets("")))
	def, every := listBytes(c.Defs(Selection{})), listBytes(c.Defs(Selection{Toolsets: c.Available()}))
	fmt.Fprintf(&b, "The default `tools/list` (%s) is %d bytes (~%d tokens at four characters a token; the budget is %d);\nevery toolset together is %d bytes (~%d tokens).\n",
		strings.Join(c.Listed(), ", "), def, def/4, ToolsListBudget, every, every/4)
	return b.String()
}

// listBytes is the size of a tools/list result of defs.
func listBytes(defs []*mcp.Tool) int {
	b, err := json.Marshal(&mcp.ListToolsResult{Tools: defs})
	if err != nil {
		panic(err)
	}
	return len(b)
}

// TestToolsListBudget fails when the default tools/list (a client naming
// no toolsets, of a server started without --toolsets, seen by an admin
// key) passes its budget or lacks the notes toolset (the group the
// specification details: an agent logs a call without enabling anything
// first), and checks that every tool offered is still in some toolset a
// client can name.
func TestToolsListBudget(t *testing.T) {
	c := NewCatalog(nil, must(WithToolsets("")))
	if n := listBytes(c.Defs(Selection{})); n > ToolsListBudget {
		t.Errorf("the default tools/list is %d bytes, over its budget of %d: shorten descriptions or schemas, or list fewer toolsets by default", n, ToolsListBudget)
	}
	if got, want := len(c.Defs(Selection{Toolsets: c.Available()})), len(All(nil)); got != want {
		t.Errorf("every toolset together serves %d tools, want all %d", got, want)
	}
	if !slices.Contains(c.Listed(), "notes") {
		t.Errorf("the default list's toolsets %v lack notes", c.Listed())
	}
	for _, name := range []string{"list_toolsets", "enable_toolset", "create_note", "list_notes", "get_interaction_log"} {
		if !slices.ContainsFunc(c.Defs(Selection{}), func(d *mcp.Tool) bool { return d.Name == name }) {
			t.Errorf("the default list lacks %s", name)
		}
	}
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
	"imports":       "../docs/tools/contacts.md",
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

// detailsStart and detailsEnd mark, on each tool page, the tools' whole
// descriptions (tools/list serves their first sentences; brief.go).
const detailsStart, detailsEnd = "<!-- tool descriptions: generated from the code (go test ./tools -update); do not edit by hand -->\n", "<!-- end of tool descriptions -->\n"

// toolDetails is a page's section of whole descriptions: each tool of the
// page's toolsets, in the order tools/list shows them.
func toolDetails(path string) string {
	var b strings.Builder
	b.WriteString("| tool | what it does |\n|---|---|\n")
	for _, tool := range All(nil) {
		if toolPages[tool.Toolset] == path {
			fmt.Fprintf(&b, "| `%s` | %s |\n", tool.Def.Name, strings.ReplaceAll(tool.Details, "|", "\\|"))
		}
	}
	return b.String()
}

// TestDocToolDetails holds each tool page's section of whole descriptions
// to the code: what tools/list leaves out of a description is there.
func TestDocToolDetails(t *testing.T) {
	done := map[string]bool{}
	for _, path := range toolPages {
		if done[path] {
			continue
		}
		done[path] = true
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		i, j := strings.Index(text, detailsStart), strings.Index(text, detailsEnd)
		want := toolDetails(path)
		if *update {
			if i < 0 || j < i {
				text += "\n## What each tool does\nThe whole description of each tool; `tools/list` serves its first sentences.\n\n" + detailsStart + detailsEnd
				i, j = strings.Index(text, detailsStart), strings.Index(text, detailsEnd)
			}
			if err := os.WriteFile(path, []byte(text[:i+len(detailsStart)]+want+text[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if i < 0 || j < i {
			t.Errorf("%s lacks the tool descriptions' markers (go test ./tools -update adds them)", path)
			continue
		}
		if diff := cmp.Diff(want, text[i+len(detailsStart):j]); diff != "" {
			t.Errorf("%s: the tool descriptions are stale (-code +page); run go test ./tools -update:\n%s", path, diff)
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
