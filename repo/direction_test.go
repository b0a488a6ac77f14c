package repo

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// areas are the domain's areas above the core (package repo), bottom first:
// an area may import the core and the areas before it in this list, never
// one after it, and the core imports none. An area that must make a lower
// one react (a rollback rule, a reaction to a write) registers with the
// core instead (registry.go). A new area takes its place here. repotest,
// the helpers of the areas' tests, links every area and so comes last.
var areas = []string{"textlist", "outbox", "directory", "access", "notes", "pipeline", "notify", "mailboxes", "inbox", "pitches", "dossiers", "reports", "search", "repotest"}

// TestTheDomainImportsDownward keeps the direction of the domain's
// packages: the core imports no area, and an area imports only the areas
// below it, in its code and in its own tests. (The core's external tests,
// package repo_test, sit above every area and may read them all.)
func TestTheDomainImportsDownward(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goBin, "list", "-json=ImportPath,Imports,TestImports", "outreach/repo/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	rank := map[string]int{"outreach/repo": 0}
	for i, a := range areas {
		rank["outreach/repo/"+a] = i + 1
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var seen []string
	for dec.More() {
		var p struct {
			ImportPath           string
			Imports, TestImports []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, p.ImportPath)
		own, ok := rank[p.ImportPath]
		if !ok {
			t.Errorf("%s is a package of the domain without a place in areas (repo/direction_test.go)", p.ImportPath)
			continue
		}
		for _, imp := range append(p.Imports, p.TestImports...) {
			if imp != "outreach/repo" && !strings.HasPrefix(imp, "outreach/repo/") {
				continue
			}
			if r, ok := rank[imp]; !ok || r >= own && imp != p.ImportPath {
				t.Errorf("%s imports %s, which is not below it", p.ImportPath, imp)
			}
		}
	}
	for p := range rank {
		if !slices.Contains(seen, p) {
			t.Errorf("go list did not find %s, an area of repo/direction_test.go", p)
		}
	}

	// A create_note's path stays inside notes, the core, the outbox, ledger
	// and audit: the notes area links no other area but the outbox, the
	// bottom one, which imports the core alone and writes the note's event
	// in the note's unit (an opportunity it links is read as the core's
	// record, a stage change's note is registered with the core; textlist,
	// the lists' free-text filters below every area, was the core's), and
	// the core none.
	t.Run("notes", func(t *testing.T) {
		out, err := exec.Command(goBin, "list", "-deps", "outreach/repo/notes").CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		inside := []string{"outreach/repo/notes", "outreach/repo", "outreach/repo/outbox", "outreach/ledger", "outreach/ledger/index", "outreach/audit", "outreach/indexes", "outreach/textfold", "outreach/repo/textlist"}
		var deps []string
		for _, p := range strings.Fields(string(out)) {
			if p == "outreach" || strings.HasPrefix(p, "outreach/") {
				deps = append(deps, p)
				if !slices.Contains(inside, p) {
					t.Errorf("outreach/repo/notes links %s: a create_note's path leaves notes, the core, the outbox, ledger and audit", p)
				}
			}
		}
		if !slices.Contains(deps, "outreach/repo") || !slices.Contains(deps, "outreach/ledger") {
			t.Errorf("go list -deps outreach/repo/notes found %v; want the core and ledger among them", deps)
		}
	})
}
