package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// analystCommand is a command the analyst endpoint accepts, as a
// runCommand document in Extended JSON; CURSOR stands for the id of a
// cursor a find just opened on outlets.
type analystCommand struct {
	name  string
	cmd   string
	admin bool // run on the admin database, as MongoDB requires
	check func(reply bson.Raw) error
	// lacking is the error of a server on MONGODB_URI that lacks the
	// command (the analyst endpoint must answer it).
	lacking string
}

// The maxTimeMS a client adds: none, one below the endpoint's bound (60 s),
// one above it.
var clientTimes = []int{0, 30_000, 3_600_000}

// withMaxTime adds maxTimeMS to a command document's text.
func withMaxTime(cmd string, ms int) string {
	if ms == 0 {
		return cmd
	}
	return strings.TrimSuffix(cmd, "}") + fmt.Sprintf(`, "maxTimeMS": %d}`, ms)
}

// batchLen checks the length of a cursor's first or next batch.
func batchLen(field string, want int) func(bson.Raw) error {
	return func(r bson.Raw) error {
		docs, err := r.Lookup("cursor", field).Array().Values()
		if err != nil || len(docs) != want {
			return fmt.Errorf("%s of %d documents (%v), want %d", field, len(docs), err, want)
		}
		return nil
	}
}

// names checks that a cursor's first batch has a document named want.
func names(want string) func(bson.Raw) error {
	return func(r bson.Raw) error {
		docs, _ := r.Lookup("cursor", "firstBatch").Array().Values()
		for _, d := range docs {
			if d.Document().Lookup("name").StringValue() == want {
				return nil
			}
		}
		return fmt.Errorf("%q is not in %v", want, docs)
	}
}

func number(r bson.Raw, key ...string) (int, error) {
	v, err := r.LookupErr(key...)
	if err != nil {
		return 0, err
	}
	n, ok := v.AsInt64OK()
	if !ok {
		return 0, fmt.Errorf("%s is %v, not a number", strings.Join(key, "."), v)
	}
	return int(n), nil
}

func hasField(key string) func(bson.Raw) error {
	return func(r bson.Raw) error {
		_, err := r.LookupErr(key)
		return err
	}
}

// analystCommands are the commands docs/operations.md says the analyst
// endpoint accepts, on three outlets of tiers 1, 2 and 2.
func analystCommands(dbName string) []analystCommand {
	return []analystCommand{
		{name: "find", cmd: `{"find": "outlets", "filter": {}}`, check: batchLen("firstBatch", 3)},
		{name: "aggregate", cmd: `{"aggregate": "outlets", "pipeline": [{"$group": {"_id": "$tier", "n": {"$sum": 1}}}], "cursor": {}}`, check: batchLen("firstBatch", 2)},
		{name: "count", cmd: `{"count": "outlets"}`, check: func(r bson.Raw) error {
			if n, err := number(r, "n"); err != nil || n != 3 {
				return fmt.Errorf("n = %d (%v), want 3", n, err)
			}
			return nil
		}},
		{name: "distinct", cmd: `{"distinct": "outlets", "key": "tier"}`, check: func(r bson.Raw) error {
			values, err := r.Lookup("values").Array().Values()
			var got []int64
			for _, v := range values {
				n, _ := v.AsInt64OK()
				got = append(got, n)
			}
			slices.Sort(got)
			if err != nil || fmt.Sprint(got) != "[1 2]" {
				return fmt.Errorf("values %v (%v), want [1 2]", values, err)
			}
			return nil
		}},
		{name: "getMore", cmd: `{"getMore": CURSOR, "collection": "outlets", "batchSize": 1}`, check: batchLen("nextBatch", 1)},
		{name: "killCursors", cmd: `{"killCursors": "outlets", "cursors": [CURSOR]}`, check: func(r bson.Raw) error {
			if killed, err := r.Lookup("cursorsKilled").Array().Values(); err != nil || len(killed) != 1 {
				return fmt.Errorf("cursorsKilled %v (%v), want the cursor", killed, err)
			}
			return nil
		}},
		{name: "explain find", cmd: `{"explain": {"find": "outlets", "filter": {"tier": 2}}}`, check: hasField("ok")},
		{name: "explain aggregate", cmd: `{"explain": {"aggregate": "outlets", "pipeline": [{"$match": {"tier": 2}}], "cursor": {}}}`, check: hasField("ok")},
		{name: "explain count", cmd: `{"explain": {"count": "outlets", "query": {"tier": 2}}}`, check: hasField("ok")},
		{name: "explain distinct", cmd: `{"explain": {"distinct": "outlets", "key": "tier"}}`, check: hasField("ok"),
			lacking: "explain for distinct command is not supported"}, // FerretDB v2
		{name: "listCollections", cmd: `{"listCollections": 1, "nameOnly": true}`, check: names("outlets")},
		{name: "listIndexes", cmd: `{"listIndexes": "outlets"}`, check: names("_id_")},
		{name: "listDatabases", cmd: `{"listDatabases": 1, "nameOnly": true}`, admin: true, check: func(r bson.Raw) error {
			dbs, _ := r.Lookup("databases").Array().Values()
			for _, d := range dbs {
				if d.Document().Lookup("name").StringValue() == dbName {
					return nil
				}
			}
			return fmt.Errorf("%s is not in %v", dbName, dbs)
		}},
		{name: "dbStats", cmd: `{"dbStats": 1}`, check: func(r bson.Raw) error {
			if n, err := number(r, "collections"); err != nil || n < 1 {
				return fmt.Errorf("collections = %d (%v), want some", n, err)
			}
			return nil
		}},
		{name: "collStats", cmd: `{"collStats": "outlets"}`, check: func(r bson.Raw) error {
			if n, err := number(r, "count"); err != nil || n != 3 {
				return fmt.Errorf("count = %d (%v), want 3", n, err)
			}
			return nil
		}},
		{name: "dataSize", cmd: `{"dataSize": "` + dbName + `.outlets"}`, check: hasField("size")},
	}
}

// analystShell are the mongosh helpers an analyst types, each without and
// with a maxTimeMS of its own (30 s, and 1 h, above the endpoint's bound),
// with what each must give on three outlets of tiers 1, 2 and 2, as JSON.
var analystShell = []struct{ name, js, want, lacking string }{
	{"distinct", `db.outlets.distinct("tier").sort()`, `[1,2]`, ""},
	{"distinct 30s", `db.outlets.distinct("tier", {}, {maxTimeMS: 30000}).sort()`, `[1,2]`, ""},
	{"distinct 1h", `db.outlets.distinct("tier", {}, {maxTimeMS: 3600000}).sort()`, `[1,2]`, ""},
	{"find", `db.outlets.find({}).toArray().length`, `3`, ""},
	{"find 30s", `db.outlets.find({}).maxTimeMS(30000).toArray().length`, `3`, ""},
	{"find 1h", `db.outlets.find({}).maxTimeMS(3600000).toArray().length`, `3`, ""},
	{"aggregate", `db.outlets.aggregate([{$group: {_id: "$tier"}}]).toArray().length`, `2`, ""},
	{"aggregate 30s", `db.outlets.aggregate([{$group: {_id: "$tier"}}], {maxTimeMS: 30000}).toArray().length`, `2`, ""},
	{"aggregate 1h", `db.outlets.aggregate([{$group: {_id: "$tier"}}], {maxTimeMS: 3600000}).toArray().length`, `2`, ""},
	{"countDocuments", `db.outlets.countDocuments({tier: 2})`, `2`, ""},
	{"countDocuments 30s", `db.outlets.countDocuments({tier: 2}, {maxTimeMS: 30000})`, `2`, ""},
	{"countDocuments 1h", `db.outlets.countDocuments({tier: 2}, {maxTimeMS: 3600000})`, `2`, ""},
	{"estimatedDocumentCount", `db.outlets.estimatedDocumentCount()`, `3`, ""},
	{"estimatedDocumentCount 30s", `db.outlets.estimatedDocumentCount({maxTimeMS: 30000})`, `3`, ""},
	{"count", `db.outlets.count({tier: 2})`, `2`, ""},
	{"count 30s", `db.outlets.count({tier: 2}, {maxTimeMS: 30000})`, `2`, ""},
	{"explain find", `typeof db.outlets.find({tier: 2}).explain()`, `"object"`, ""},
	{"explain distinct", `typeof db.outlets.explain().distinct("tier")`, `"object"`, "explain for distinct command is not supported"},
	{"getCollectionNames", `db.getCollectionNames().includes("outlets")`, `true`, ""},
	{"getIndexes", `db.outlets.getIndexes().map(i => i.name).includes("_id_")`, `true`, ""},
	{"db.stats", `db.stats().collections > 0`, `true`, ""},
}

// TestAnalystCommands runs every command the analyst endpoint accepts
// (docs/operations.md, "Looking at the data with mongosh"), without and with
// a maxTimeMS of the client's below and above the endpoint's bound, through
// the Go driver and mongosh, and checks each answer: the endpoint bounds
// the time of each (maxTimeMS to the store where it stops a command itself,
// its own wait elsewhere), which must not break any. On MONGODB_URI the
// same commands go to the server itself, as analysts' do there.
func TestAnalystCommands(t *testing.T) {
	ctx := context.Background()
	data := dataDir(t)
	srv, uri, dbName := readerURI(t, data)
	admin := mustDial(t, srv.URL, srv.FirstKey)
	for i, tier := range []int{1, 2, 2} {
		admin.must(t, "create_outlet", map[string]any{"name": fmt.Sprintf("Outlet %d", i), "tier": tier}, nil)
	}
	commands := analystCommands(dbName)
	onServer := os.Getenv("MONGODB_URI") != ""
	// lacks says whether err is a server's on MONGODB_URI lacking the command.
	lacks := func(err error, lacking string) bool {
		return onServer && lacking != "" && err != nil && strings.Contains(err.Error(), lacking)
	}

	// The driver, with the commands as written (no timeout of the client's
	// own: the driver adds none), in one session: a server continues a
	// cursor in the session that opened it.
	client := analystClient(t, uri, options.Client().SetTimeout(0))
	db := client.Database(dbName)
	session, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer session.EndSession(ctx)
	sctx := mongo.NewSessionContext(ctx, session)
	for _, c := range commands {
		for _, ms := range clientTimes {
			text := withMaxTime(c.cmd, ms)
			if strings.Contains(text, "CURSOR") {
				id, err := db.RunCommand(sctx, bson.D{{Key: "find", Value: "outlets"}, {Key: "batchSize", Value: int32(1)}}).Raw()
				if err != nil {
					t.Fatal(err)
				}
				text = strings.ReplaceAll(text, "CURSOR", fmt.Sprintf(`{"$numberLong": "%d"}`, id.Lookup("cursor", "id").Int64()))
			}
			var cmd bson.D
			if err := bson.UnmarshalExtJSON([]byte(text), false, &cmd); err != nil {
				t.Fatalf("%s: %v", text, err)
			}
			on := db
			if c.admin {
				on = client.Database("admin")
			}
			reply, err := on.RunCommand(sctx, cmd).Raw()
			if err == nil {
				err = c.check(reply)
			}
			if err != nil && !lacks(err, c.lacking) {
				t.Errorf("driver, %s: %v", text, err)
			}
		}
	}

	// The driver's helpers, on a client with a timeout (the driver then
	// sends maxTimeMS with each command) and on one without.
	for name, c := range map[string]*mongo.Client{"no timeout": client, "20 s timeout": analystClient(t, uri)} {
		outlets := c.Database(dbName).Collection("outlets")
		var tiers []int
		if err := outlets.Distinct(ctx, "tier", bson.M{}).Decode(&tiers); err != nil || len(tiers) != 2 {
			t.Errorf("driver (%s), Distinct: %v %v; want tiers 1 and 2", name, tiers, err)
		}
		if n, err := outlets.CountDocuments(ctx, bson.M{"tier": 2}); err != nil || n != 2 {
			t.Errorf("driver (%s), CountDocuments: %d %v; want 2", name, n, err)
		}
		if n, err := outlets.EstimatedDocumentCount(ctx); err != nil || n != 3 {
			t.Errorf("driver (%s), EstimatedDocumentCount: %d %v; want 3", name, n, err)
		}
		var docs []bson.M
		cur, err := outlets.Find(ctx, bson.M{}, options.Find().SetBatchSize(1))
		if err == nil {
			err = cur.All(ctx, &docs)
		}
		if err != nil || len(docs) != 3 {
			t.Errorf("driver (%s), Find over batches of 1: %d documents, %v; want 3", name, len(docs), err)
		}
		if names, err := c.Database(dbName).ListCollectionNames(ctx, bson.M{"name": "outlets"}); err != nil || len(names) != 1 {
			t.Errorf("driver (%s), ListCollectionNames: %v %v", name, names, err)
		}
	}

	// A bad command gets a clear answer from the store, not "internal".
	bad := db.RunCommand(ctx, bson.D{{Key: "distinct", Value: "outlets"}, {Key: "key", Value: ""}, {Key: "maxTimeMS", Value: int32(30_000)}}).Err()
	var se mongo.ServerError
	if !errors.As(bad, &se) || strings.Contains(strings.ToLower(bad.Error()), "internal") || !strings.Contains(bad.Error(), "empty") {
		t.Errorf("distinct with an empty key: %v; want the store's error saying the key is empty", bad)
	}

	if !haveMongosh(t) {
		return
	}
	// mongosh: the same commands through db.runCommand, then the helpers.
	var script strings.Builder
	script.WriteString("const CURSOR = () => db.runCommand({find: \"outlets\", batchSize: 1}).cursor.id;\nconst cases = {\n")
	for _, c := range commands {
		run := "db.runCommand"
		if c.admin {
			run = "db.adminCommand"
		}
		for _, ms := range clientTimes {
			text := withMaxTime(c.cmd, ms)
			fmt.Fprintf(&script, "%q: () => %s(%s),\n", text, run, strings.ReplaceAll(text, "CURSOR", "CURSOR()"))
		}
	}
	for _, h := range analystShell {
		fmt.Fprintf(&script, "%q: () => ({v: JSON.stringify(%s)}),\n", h.name, h.js)
	}
	script.WriteString(`};
const out = {};
for (const [name, run] of Object.entries(cases)) {
  try { out[name] = {r: run()}; } catch (e) { out[name] = {err: String(e.codeName || "") + " " + String(e.code || "") + ": " + e.message}; }
}
EJSON.stringify(out, null, 0, {relaxed: false})`)
	out, err := mongoshEval(ctx, uri, script.String())
	if err != nil {
		t.Fatalf("mongosh: %v\n%s", err, out)
	}
	var results map[string]struct {
		R   bson.Raw
		Err string
	}
	// The JSON is the last line (warnings, e.g. count's deprecation, come before).
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := bson.UnmarshalExtJSON([]byte(lines[len(lines)-1]), true, &results); err != nil {
		t.Fatalf("mongosh printed %s: %v", out, err)
	}
	for _, c := range commands {
		for _, ms := range clientTimes {
			text := withMaxTime(c.cmd, ms)
			res := results[text]
			err := errors.New(res.Err)
			if res.Err == "" && res.R == nil {
				err = errors.New("no result")
			} else if res.Err == "" {
				err = c.check(res.R)
			}
			if err != nil && !lacks(err, c.lacking) {
				t.Errorf("mongosh, db.runCommand(%s): %v", text, err)
			}
		}
	}
	for _, h := range analystShell {
		res := results[h.name]
		got := ""
		if res.R != nil {
			got = res.R.Lookup("v").StringValue()
		}
		if (res.Err != "" || got != h.want) && !lacks(errors.New(res.Err), h.lacking) {
			t.Errorf("mongosh, %s: %s%s; want %s", h.js, got, res.Err, h.want)
		}
	}
}
