package ledger

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// driverWrite matches a call of a driver method that changes stored data:
// collection writes, drops, GridFS uploads, and a write sent as a command.
var driverWrite = regexp.MustCompile(`\.(InsertOne|InsertMany|UpdateOne|UpdateMany|ReplaceOne|BulkWrite|DeleteOne|DeleteMany|FindOneAndUpdate|FindOneAndReplace|FindOneAndDelete|Drop|UploadFromStream|UploadFromStreamWithID|OpenUploadStream|OpenUploadStreamWithID)\(|\.RunCommand\(.*"(insert|update|delete|findAndModify|findandmodify|drop|dropDatabase)"`)

// writePathFile is the one file allowed to write records: the engine's
// write path. Nothing outside package ledger writes to the store.
const writePathFile = "ledger/write.go"

// benchRawFile is the benchmark's raw store: its writes go to a scratch
// database of their own, never to the service's, to measure what the
// driver alone costs for the operations a mutation needs.
const benchRawFile = "bench/raw.go"

// probeFile may write only its own scratch collection, through the variable
// scratch (the capability probes, ledger/probe.go): no record, no change entry.
const probeFile = "ledger/probe.go"

// internalsFile declares the test hooks (Engine.Internals), which no
// non-test file may call: a crash injected in the service would be a write
// outside the protocol.
const internalsFile = "ledger/internals.go"

var internalsCall = regexp.MustCompile(`\.Internals\(\)`)

var scratchWrite = regexp.MustCompile(`\bscratch\.(InsertOne|InsertMany|UpdateOne|FindOneAndUpdate|Drop)\(`)

// driverWrites returns each line of src that calls a driver write, without
// its line comment (a mention in a comment is not a call).
func driverWrites(src string) []string {
	var out []string
	for _, line := range strings.Split(src, "\n") {
		code := strings.TrimSpace(strings.SplitN(line, "//", 2)[0])
		if driverWrite.MatchString(code) {
			out = append(out, code)
		}
	}
	return out
}

// TestOnlyTheWritePathWrites walks the module and fails if any non-test Go
// file other than ledger/write.go calls a driver write: every change must go
// through the engine's Write, which records it in change_log, and nothing may
// hard-delete. The domain (repo), the tools, the server and every other
// package reach the store through the engine's surface only.
func TestOnlyTheWritePathWrites(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found above ledger: %v", err)
	}
	var scanned int
	var found, hooks []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path == root:
			case name == "node_modules", name == "testdata", name == "vendor", strings.HasPrefix(name, "."), strings.HasPrefix(name, "_"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if rel == writePathFile || rel == benchRawFile {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		scanned++
		for _, line := range strings.Split(string(src), "\n") {
			// The protocol's test hooks (Engine.Internals) are for tests only.
			if code := strings.SplitN(line, "//", 2)[0]; internalsCall.MatchString(code) && rel != internalsFile {
				hooks = append(hooks, rel+": "+strings.TrimSpace(code))
			}
		}
		for _, call := range driverWrites(string(src)) {
			if rel == probeFile && scratchWrite.MatchString(call) && len(driverWrite.FindAllString(call, -1)) == 1 {
				continue
			}
			found = append(found, rel+": "+call)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 10 {
		t.Fatalf("scanned only %d files under %s", scanned, root)
	}
	for _, f := range found {
		t.Errorf("driver write outside %s (use the write path): %s", writePathFile, f)
	}
	for _, f := range hooks {
		t.Errorf("the engine's test hooks called outside a test: %s", f)
	}
}

// TestDriverWritesAreRecognised keeps the scanner honest: it must see the
// write path's own calls and each kind of write, and not mere mentions.
func TestDriverWritesAreRecognised(t *testing.T) {
	src, err := os.ReadFile("write.go")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(driverWrites(string(src))); n < 5 {
		t.Errorf("the scanner sees %d driver writes in write.go; it must see them all", n)
	}
	got := driverWrites(`package x
	_, err := c.InsertMany(ctx, docs)
	c.Database().Collection("x").DeleteMany(ctx, bson.M{})
	err = db.Drop(ctx) // gone
	bucket.UploadFromStreamWithID(ctx, id, name, r)
	up, _ := bucket.OpenUploadStream(ctx, name)
	res := coll.FindOneAndDelete(ctx, f)
	// InsertOne and UpdateOne mentioned in a comment are not calls
	s.write(ctx, m)
	x.UpdateOneOf(y)
	db.RunCommand(ctx, bson.D{{Key: "delete", Value: "notes"}})
	db.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}})
`)
	want := []string{
		"_, err := c.InsertMany(ctx, docs)",
		`c.Database().Collection("x").DeleteMany(ctx, bson.M{})`,
		"err = db.Drop(ctx)",
		"bucket.UploadFromStreamWithID(ctx, id, name, r)",
		"up, _ := bucket.OpenUploadStream(ctx, name)",
		"res := coll.FindOneAndDelete(ctx, f)",
		`db.RunCommand(ctx, bson.D{{Key: "delete", Value: "notes"}})`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("driver writes (-want +got):\n%s", diff)
	}
}
