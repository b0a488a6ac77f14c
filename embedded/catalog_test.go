package embedded

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// tableOf is the table FerretDB gives a new collection (lower-case name and
// the FNV-1a hash of the name), the name a creation after a crash collides
// with.
func tableOf(collection string) string {
	h := fnv.New32a()
	h.Write([]byte(collection))
	return fmt.Sprintf("%s_%08x", strings.ToLower(collection), h.Sum32())
}

func rawFile(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: path}).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func exec1(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// startStore starts the store on dir, failing the test if it cannot.
func startStore(t *testing.T, dir string) *Store {
	t.Helper()
	es, err := Start(context.Background(), Options{Dir: dir})
	if err != nil {
		t.Fatalf("start on %s: %v", dir, err)
	}
	return es
}

func storeClient(t *testing.T, es *Store) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(es.URI))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(context.Background()) })
	return c
}

// checkCollection asserts that collection takes a document, refuses a
// second with the same _id and takes an index: what a creation cut short
// broke.
func checkCollection(t *testing.T, ctx context.Context, c *mongo.Collection, id string) {
	t.Helper()
	if _, err := c.InsertOne(ctx, bson.M{"_id": id, "n": 1}); err != nil {
		t.Fatalf("%s: insert: %v", c.Name(), err)
	}
	if _, err := c.InsertOne(ctx, bson.M{"_id": id, "n": 2}); !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("%s: a second document with _id %s: %v, want a duplicate key error", c.Name(), id, err)
	}
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "n", Value: 1}}, Options: options.Index().SetName("by_n")}); err != nil {
		t.Fatalf("%s: create index: %v", c.Name(), err)
	}
	if n, err := c.CountDocuments(ctx, bson.M{}); err != nil || n < 1 {
		t.Fatalf("%s: count %d, %v", c.Name(), n, err)
	}
}

// Each state a kill leaves between two of FerretDB's catalog steps, made by
// hand in the SQLite file as the step before the kill leaves it; the next
// start repairs each, says so, and every collection then works; a third
// start finds nothing to repair.
func TestStartRepairsACatalogChangeCutShort(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	es := startStore(t, dir)
	c := storeClient(t, es)
	db := c.Database("app")
	if _, err := db.Collection("notes").InsertOne(ctx, bson.M{"_id": "n1", "title": "kept"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("notes").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "title", Value: 1}}, Options: options.Index().SetName("title")}); err != nil {
		t.Fatal(err)
	}
	if err := es.IndexIDs(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	c.Disconnect(ctx)
	es.Close()

	raw := rawFile(t, filepath.Join(dir, "app.sqlite"))
	// Killed after CREATE TABLE, before the catalog row (the failure seen:
	// the next insert into deliveries tried to create its table again).
	exec1(t, raw, fmt.Sprintf(`CREATE TABLE %q (_ferretdb_sjson TEXT NOT NULL CHECK(_ferretdb_sjson != '')) STRICT`, tableOf("deliveries")))
	// Killed after the catalog row, before the _id index.
	exec1(t, raw, fmt.Sprintf(`CREATE TABLE %q (_ferretdb_sjson TEXT NOT NULL CHECK(_ferretdb_sjson != '')) STRICT`, tableOf("threads")))
	exec1(t, raw, `INSERT INTO "_ferretdb_collections" (name, table_name, settings) VALUES (?, ?, '{}')`, "threads", tableOf("threads"))
	// Killed after an index's CREATE INDEX, before the settings named it.
	exec1(t, raw, fmt.Sprintf(`CREATE INDEX %q ON %q (_ferretdb_sjson->"occurred_at")`, tableOf("notes")+"_occurred", tableOf("notes")))
	// An index the settings name whose CREATE INDEX is not in the file.
	exec1(t, raw, fmt.Sprintf(`DROP INDEX %q`, tableOf("notes")+"_title"))
	raw.Close()
	// Killed after the file of a new database was made, before its catalog.
	if err := os.WriteFile(filepath.Join(dir, "other.sqlite"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	es = startStore(t, dir) // after the kills
	want := []string{
		"app: table " + tableOf("deliveries") + ", left empty by a collection's creation cut short, dropped",
		"app: collection notes: index title was in the catalog but not in the file: made",
		"app: collection notes: index occurred, not in the catalog (its creation was cut short), dropped",
		"app: collection threads had no _id index (its creation was cut short): added",
		"other: the catalog table was missing (the file's creation was cut short): made",
	}
	if got := strings.Join(es.Repaired, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("repaired:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	c = storeClient(t, es)
	db = c.Database("app")
	checkCollection(t, ctx, db.Collection("deliveries"), "d1")
	checkCollection(t, ctx, db.Collection("threads"), "t1")
	checkCollection(t, ctx, db.Collection("notes"), "n2")
	if _, err := db.Collection("notes").Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "occurred_at", Value: -1}}, Options: options.Index().SetName("occurred")}); err != nil {
		t.Fatalf("the index whose creation was cut short, made again: %v", err)
	}
	var kept bson.M
	if err := db.Collection("notes").FindOne(ctx, bson.M{"_id": "n1"}).Decode(&kept); err != nil || kept["title"] != "kept" {
		t.Fatalf("the document written before: %v %v", kept, err)
	}
	if n, err := db.Collection("notes").CountDocuments(ctx, bson.M{"title": "kept"}); err != nil || n != 1 {
		t.Fatalf("found by the remade title index: %d %v", n, err)
	}
	checkCollection(t, ctx, c.Database("other").Collection("first"), "f1")
	c.Disconnect(ctx)
	es.Close()

	es = startStore(t, dir)
	if len(es.Repaired) != 0 {
		t.Errorf("a start after the repair repaired again: %q", es.Repaired)
	}
	// The service's own look-up index is not FerretDB's to name: kept.
	raw = rawFile(t, filepath.Join(dir, "app.sqlite"))
	var n int
	if err := raw.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?`, tableOf("notes")+"_outreach_id_lookup").Scan(&n); err != nil || n != 1 {
		t.Errorf("the service's _id look-up index: %d %v", n, err)
	}
	es.Close()
}

// A table the catalog does not name that holds documents is not an
// interrupted creation: the start is refused, naming it, and the file is
// left as it was.
func TestStartRefusesATableWithDocumentsOutsideTheCatalog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	es := startStore(t, dir)
	c := storeClient(t, es)
	if _, err := c.Database("app").Collection("notes").InsertOne(ctx, bson.M{"_id": "n1"}); err != nil {
		t.Fatal(err)
	}
	c.Disconnect(ctx)
	es.Close()
	raw := rawFile(t, filepath.Join(dir, "app.sqlite"))
	stray := tableOf("stray")
	exec1(t, raw, fmt.Sprintf(`CREATE TABLE %q (_ferretdb_sjson TEXT NOT NULL) STRICT`, stray))
	exec1(t, raw, fmt.Sprintf(`INSERT INTO %q VALUES ('{"_id":"x"}')`, stray))
	raw.Close()
	_, err := Start(ctx, Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), stray) || !strings.Contains(err.Error(), "holds documents") {
		t.Fatalf("start: %v, want a refusal naming %s", err, stray)
	}
	raw = rawFile(t, filepath.Join(dir, "app.sqlite"))
	var n int
	if err := raw.QueryRow(fmt.Sprintf(`SELECT count(*) FROM %q`, stray)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the stray table after the refusal: %d rows, %v", n, err)
	}
}

// The real thing: a process creating collections and indexes is killed
// (SIGKILL) at a random moment, again and again; every start after a kill
// succeeds and every collection the catalog names then works.
func TestStartAfterKillsDuringCatalogChanges(t *testing.T) {
	if dir := os.Getenv("OUTREACH_CATALOG_CHILD"); dir != "" {
		catalogChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("kills child processes")
	}
	ctx := context.Background()
	dir := t.TempDir()
	rounds, repaired := 25, 0
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStartAfterKillsDuringCatalogChanges$")
		cmd.Env = append(os.Environ(), "OUTREACH_CATALOG_CHILD="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until the child is creating collections, then kill it at a
		// random moment of the next few hundred.
		buf := make([]byte, 6)
		if _, err := out.Read(buf); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: the child did not start: %v", round, err)
		}
		time.Sleep(time.Duration(rand.IntN(40_000)) * time.Microsecond)
		cmd.Process.Kill()
		cmd.Wait()

		es, err := Start(ctx, Options{Dir: dir})
		if err != nil {
			t.Fatalf("round %d: start after the kill: %v", round, err)
		}
		repaired += len(es.Repaired)
		c := storeClient(t, es)
		db := c.Database("app")
		names, err := db.ListCollectionNames(ctx, bson.M{})
		if err != nil {
			t.Fatal(err)
		}
		// The child makes c_0, c_1, ... in order: every collection the
		// catalog names, and the next one, whose creation the kill may have
		// cut short, must work.
		for i := range len(names) + 1 {
			checkCollection(t, ctx, db.Collection(fmt.Sprintf("c_%d", i)), fmt.Sprintf("check-%d", round))
		}
		c.Disconnect(ctx)
		es.Close()
	}
	t.Logf("%d kills, %d repairs", rounds, repaired)
}

// catalogChild creates collections after those there are (c_0, c_1, ...),
// each with a document and two indexes, until it is killed.
func catalogChild(dir string) {
	ctx := context.Background()
	es, err := Start(ctx, Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c, err := mongo.Connect(options.Client().ApplyURI(es.URI))
	if err != nil {
		os.Exit(2)
	}
	db := c.Database("app")
	names, err := db.ListCollectionNames(ctx, bson.M{})
	if err != nil {
		os.Exit(2)
	}
	fmt.Print("ready\n")
	for i := len(names); ; i++ {
		coll := db.Collection(fmt.Sprintf("c_%d", i))
		coll.InsertOne(ctx, bson.M{"_id": "first", "n": i})
		coll.Indexes().CreateMany(ctx, []mongo.IndexModel{
			{Keys: bson.D{{Key: "a", Value: 1}}, Options: options.Index().SetName("a")},
			{Keys: bson.D{{Key: "b", Value: 1}, {Key: "c", Value: -1}}, Options: options.Index().SetName("bc")},
		})
	}
}
