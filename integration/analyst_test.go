package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// mongoshPath is where scripts/test.sh installs mongosh.
const mongoshPath = "mongosh/node_modules/.bin/mongosh"

var (
	queryBlock = regexp.MustCompile("(?m)^```js query:([a-z-]+)\n(.+)\n```")
	queryCall  = regexp.MustCompile(`^db\.(\w+)\.(aggregate|find)\((.*?)\)(?:\.sort\((.*)\))?$`)
)

// runQueryDriver runs a query of the documented form with the Go driver.
func runQueryDriver(ctx context.Context, db *mongo.Database, q string) ([]map[string]any, error) {
	m := queryCall.FindStringSubmatch(q)
	if m == nil {
		return nil, fmt.Errorf("not of the form db.C.aggregate([...]) or db.C.find({...}, {...}).sort({...}): %s", q)
	}
	var args struct{ A bson.A }
	if err := bson.UnmarshalExtJSON([]byte(`{"A": [`+m[3]+`]}`), false, &args); err != nil {
		return nil, fmt.Errorf("arguments of %s: %w", q, err)
	}
	var cur *mongo.Cursor
	var err error
	coll := db.Collection(m[1])
	if m[2] == "aggregate" {
		cur, err = coll.Aggregate(ctx, args.A[0])
	} else {
		opts := options.Find()
		if len(args.A) > 1 {
			opts.SetProjection(args.A[1])
		}
		if m[4] != "" {
			var sort bson.D
			if err := bson.UnmarshalExtJSON([]byte(m[4]), false, &sort); err != nil {
				return nil, err
			}
			opts.SetSort(sort)
		}
		cur, err = coll.Find(ctx, args.A[0], opts)
	}
	if err != nil {
		return nil, err
	}
	var docs []bson.M
	if err := cur.All(ctx, &docs); err != nil {
		return nil, err
	}
	// The same shape mongosh's relaxed Extended JSON gives.
	raw, err := bson.MarshalExtJSON(bson.M{"r": docs}, false, false)
	if err != nil {
		return nil, err
	}
	var out struct{ R []map[string]any }
	return out.R, json.Unmarshal(raw, &out)
}

// mongoshEval runs mongosh on uri with a script, without a profile, and
// returns what it printed (its errors too), allowing it two minutes.
func mongoshEval(ctx context.Context, uri, script string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, mongoshPath, "--quiet", "--norc", uri, "--eval", script).CombinedOutput()
	return string(out), err
}

// haveMongosh says whether scripts/test.sh installed mongosh; without it a
// test runs its driver part alone, except under CI, where it fails.
func haveMongosh(t *testing.T) bool {
	t.Helper()
	if _, err := os.Stat(mongoshPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mongosh is not installed (scripts/test.sh installs it): %v", err)
		}
		t.Logf("mongosh not installed: %v", err)
		return false
	}
	return true
}

// runQueryMongosh runs q with mongosh and returns its result as relaxed Extended JSON.
func runQueryMongosh(ctx context.Context, uri, q string) ([]map[string]any, error) {
	out, err := mongoshEval(ctx, uri, "EJSON.stringify(("+q+").toArray(), null, 0, {relaxed: true})")
	if err != nil {
		return nil, fmt.Errorf("mongosh: %v\n%s", err, out)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		return nil, fmt.Errorf("mongosh printed %s: %w", out, err)
	}
	return rows, nil
}

// readerURI starts the server on data and returns how an analyst reaches
// its database: the analyst endpoint with a read key made at the command
// line, as docs/operations.md's mongosh section does, or on MONGODB_URI the
// server itself (analysts have users of their own there; the embedded
// store's endpoint does not exist).
func readerURI(t *testing.T, data string) (srv *proc, uri, dbName string) {
	t.Helper()
	dbName = storeEnv(data)[0][len("OUTREACH_DB="):]
	base := os.Getenv("MONGODB_URI")
	if base == "" {
		addr := freeTCP(t)
		srv = startServer(t, data, "OUTREACH_MONGO_LISTEN="+addr)
		return srv, analystURI(addr, dbName, analystCLIKey(t, data)), dbName
	}
	srv = startServer(t, data)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + dbName
	return srv, u.String(), dbName
}

// TestAnalystQueries runs every query of docs/analyst-queries.md against the
// demo data through the analyst endpoint, with a read key as docs/operations.md's
// mongosh section shows, or on the MongoDB of
// MONGODB_URI directly (with mongosh when
// scripts/test.sh installed it, else the same text through the driver) and
// checks each answer against plain counts and finds of the same data.
func TestAnalystQueries(t *testing.T) {
	ctx := context.Background()
	doc, err := os.ReadFile("../docs/analyst-queries.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := queryBlock.FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 6 {
		t.Fatalf("found %d queries in docs/analyst-queries.md", len(blocks))
	}
	data := dataDir(t)
	seedDemoCLI(t, data)
	_, uri, dbName := readerURI(t, data)
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetTimeout(20 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(ctx)
	db := client.Database(dbName)
	withMongosh := haveMongosh(t)
	if !withMongosh {
		t.Logf("running the queries' text through the Go driver")
	}
	var contact bson.M
	if err := db.Collection("contacts").FindOne(ctx, bson.M{"email": "clara.marchetti@circuitmonthly.example.org"}).Decode(&contact); err != nil {
		t.Fatal(err)
	}
	contactID := contact["_id"].(string)
	count := func(coll string, filter bson.M) int {
		n, err := db.Collection(coll).CountDocuments(ctx, filter)
		if err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	ids := func(coll string, filter bson.M) []string {
		cur, err := db.Collection(coll).Find(ctx, filter, options.Find().SetProjection(bson.M{"_id": 1}))
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.M
		cur.All(ctx, &docs)
		var out []string
		for _, d := range docs {
			out = append(out, d["_id"].(string))
		}
		return out
	}
	num := func(v any) int { f, _ := v.(float64); return int(f) }
	group := func(r map[string]any, k string) any {
		g, _ := r["_id"].(map[string]any)
		return g[k]
	}
	sameIDs := func(name string, rows []map[string]any, want []string, sortKey string) {
		var got []string
		last := ""
		for i, r := range rows {
			got = append(got, r["_id"].(string))
			if s := jsonText(r[sortKey]); i > 0 && s > last {
				t.Errorf("%s: not newest first by %s: %s after %s", name, sortKey, s, last)
			} else {
				last = s
			}
		}
		if diff := cmp.Diff(len(want), len(got)); diff != "" || len(want) == 0 && name == "contact-notes" {
			t.Errorf("%s: %d rows %v, want the %d of %v", name, len(got), got, len(want), want)
		}
		for _, id := range want {
			if !strings.Contains(strings.Join(got, " "), id) {
				t.Errorf("%s: %s missing", name, id)
			}
		}
	}
	checks := map[string]func(rows []map[string]any){
		"pipeline-by-stage": func(rows []map[string]any) {
			if len(rows) != 9 {
				t.Errorf("stages: %v", rows)
			}
			for _, r := range rows {
				if want := count("opportunities", bson.M{"stage": r["_id"], "archived_at": nil}); num(r["opportunities"]) != want || want == 0 {
					t.Errorf("stage %v: %v, want %d", r["_id"], r["opportunities"], want)
				}
			}
		},
		"coverage-by-sentiment": func(rows []map[string]any) {
			total := 0
			for _, r := range rows {
				f := bson.M{"archived_at": nil, "sentiment": group(r, "sentiment"), "campaign_id": group(r, "campaign_id")}
				if f["campaign_id"] == nil {
					f["campaign_id"] = bson.M{"$exists": false}
				}
				if want := count("coverage", f); num(r["pieces"]) != want {
					t.Errorf("coverage group %v: %v pieces, want %d", r["_id"], r["pieces"], want)
				}
				total += num(r["pieces"])
			}
			if want := count("coverage", bson.M{"archived_at": nil}); total != want || want == 0 {
				t.Errorf("coverage groups sum to %d, want %d", total, want)
			}
		},
		"contact-notes": func(rows []map[string]any) {
			sameIDs("contact-notes", rows, ids("notes", bson.M{"links.contact_id": contactID, "archived_at": nil}), "occurred_at")
		},
		"contact-emails": func(rows []map[string]any) {
			sameIDs("contact-emails", rows, ids("email_threads", bson.M{"contact_ids": contactID}), "last_message_at")
			if len(rows) == 0 {
				t.Errorf("contact-emails: no thread with the demo contact")
			}
		},
		"contact-coverage": func(rows []map[string]any) {
			sameIDs("contact-coverage", rows, ids("coverage", bson.M{"contact_ids": contactID}), "published_at")
		},
		"session-changes": func(rows []map[string]any) {
			total := 0
			for _, r := range rows {
				want := count("change_log", bson.M{"session_id": "demo", "state": "applied", "collection": group(r, "collection"), "action": group(r, "action")})
				if num(r["changes"]) != want {
					t.Errorf("session group %v: %v, want %d", r["_id"], r["changes"], want)
				}
				total += num(r["changes"])
			}
			if want := count("change_log", bson.M{"session_id": "demo", "state": "applied"}); total != want || want < 100 {
				t.Errorf("the demo session's changes sum to %d, want %d", total, want)
			}
		},
		"session-log": func(rows []map[string]any) {
			if want := count("change_log", bson.M{"session_id": "demo", "state": "applied"}); len(rows) != want {
				t.Errorf("session log: %d entries, want %d", len(rows), want)
			}
			for i := 1; i < len(rows); i++ {
				if num(rows[i]["seq"]) >= num(rows[i-1]["seq"]) {
					t.Errorf("session log not newest first at %d", i)
					break
				}
			}
		},
	}
	for _, b := range blocks {
		name, q := b[1], strings.ReplaceAll(b[2], "CONTACT_ID", contactID)
		check, ok := checks[name]
		if !ok {
			t.Errorf("query %s has no check in this test", name)
			continue
		}
		delete(checks, name)
		var rows []map[string]any
		if withMongosh {
			rows, err = runQueryMongosh(ctx, uri, q)
		} else {
			rows, err = runQueryDriver(ctx, db, q)
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		check(rows)
	}
	for name := range checks {
		t.Errorf("query %s is checked here but not in the document", name)
	}
}

// analystCLIKey makes a read key at the command line, as docs/operations.md's
// mongosh section does: `outreach keys create --scopes read` prints the key,
// `outreach keys list` its id (the user name on the analyst endpoint).
func analystCLIKey(t *testing.T, data string) analystKey {
	t.Helper()
	key := createKey(t, "--data", data, "--name", "analyst", "--scopes", "read")
	return analystKey{ID: listKeys(t, data, key)["analyst"].ID, Key: key}
}

// seedDemoCLI runs `outreach seed --demo` on data, allowing it minutes on a
// loaded machine (it makes about 190 writes).
func seedDemoCLI(t *testing.T, data string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), "seed", "--demo", "--data", data)
	cmd.Env = append(os.Environ(), storeEnv(data)...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("outreach seed --demo: %v\n%s\n%s", err, o.String(), e.String())
	}
	return o.String()
}
