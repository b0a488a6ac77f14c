package embedded

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// FerretDB's look-up by _id runs on SQLite's index once IndexIDs made it
// (SQLite's own query plan says so), and reads the same documents.
func TestLookupsByIDUseAnIndex(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	es, err := Start(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	client, err := mongo.Connect(options.Client().ApplyURI(es.URI))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(ctx)
	coll := client.Database("idx").Collection("notes")
	var docs []any
	for i := range 200 {
		docs = append(docs, bson.M{"_id": fmt.Sprintf("n-%03d", i), "i": i})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	plan := func() string {
		db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: filepath.Join(dir, "idx.sqlite")}).String())
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var table string
		if err := db.QueryRow(`SELECT table_name FROM "_ferretdb_collections" WHERE name = 'notes'`).Scan(&table); err != nil {
			t.Fatal(err)
		}
		rows, err := db.Query(fmt.Sprintf(`EXPLAIN QUERY PLAN SELECT _ferretdb_sjson FROM %q WHERE _ferretdb_sjson->'$._id' = ?`, table), `"n-007"`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			out = append(out, detail)
		}
		return strings.Join(out, "; ")
	}
	if p := plan(); !strings.Contains(p, "SCAN") {
		t.Fatalf("before IndexIDs the look-up was expected to scan (FerretDB's own index does not cover it): %s", p)
	}
	for range 2 { // idempotent
		if err := es.IndexIDs(ctx, "idx"); err != nil {
			t.Fatal(err)
		}
	}
	if p := plan(); !strings.Contains(p, "USING INDEX") || !strings.Contains(p, "_outreach_id_lookup") {
		t.Fatalf("the look-up by _id does not use the index: %s", p)
	}
	var got bson.M
	if err := coll.FindOne(ctx, bson.M{"_id": "n-007"}).Decode(&got); err != nil || got["i"] != int32(7) {
		t.Fatalf("find by _id: %v %v", got, err)
	}
	if _, err := coll.ReplaceOne(ctx, bson.M{"_id": "n-008"}, bson.M{"i": 80}); err != nil {
		t.Fatal(err)
	}
	if err := coll.FindOne(ctx, bson.M{"_id": "n-008"}).Decode(&got); err != nil || got["i"] != int32(80) {
		t.Fatalf("find by _id after a replace: %v %v", got, err)
	}
	if n, err := coll.CountDocuments(ctx, bson.M{}); err != nil || n != 200 {
		t.Fatalf("count %d %v", n, err)
	}
	// In memory there are no files to index: nothing to do, no error.
	mem, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if err := mem.IndexIDs(ctx, "idx"); err != nil {
		t.Fatal(err)
	}
}
