package ledger

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// engineSide are the module's packages the engine may import: its own, and
// the change entry's type it records.
var engineSide = []string{"outreach/ledger", "outreach/audit"}

// TestTheEngineImportsNothingOfTheDomain keeps the direction: the engine
// (this package and the index under it) depends on the store's driver and
// its own vocabulary, never on the domain above it (repo, tools, server,
// ...). A domain package imported here would let the domain's rules reach
// back into the one door.
func TestTheEngineImportsNothingOfTheDomain(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", "outreach/ledger/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var own int
	for _, p := range strings.Fields(string(out)) {
		if p != "outreach" && !strings.HasPrefix(p, "outreach/") {
			continue
		}
		own++
		allowed := false
		for _, e := range engineSide {
			if p == e || strings.HasPrefix(p, e+"/") {
				allowed = true
			}
		}
		if !allowed {
			t.Errorf("the engine depends on %s, a package of the domain", p)
		}
	}
	if own < 2 {
		t.Fatalf("go list found %d of the module's packages under the engine: %s", own, out)
	}
}

// TestTheIndexDoesNoIO keeps the index a pure structure: it is built, fed
// and asked by the engine's read surface, and never reaches the store
// itself (no driver client, collection or cursor; BSON only).
func TestTheIndexDoesNoIO(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", "outreach/ledger/index").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, p := range deps {
		if p == "go.mongodb.org/mongo-driver/v2/mongo" || strings.HasPrefix(p, "go.mongodb.org/mongo-driver/v2/mongo/") {
			t.Errorf("the index depends on %s: it must not reach the store", p)
		}
	}
	if !slices.Contains(deps, "go.mongodb.org/mongo-driver/v2/bson") {
		t.Fatalf("go list: the index does not even use bson: %s", out)
	}
}
