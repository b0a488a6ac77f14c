package integration

// This file's name sorts last: its test runs after every other test of the
// package (go test runs a package's tests in file order), so it explains the
// query shapes of the whole suite, besides a workload of its own.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/integration/testenv"
)

// TestEveryQueryUsesAnIndex explains every query shape (find, aggregate,
// count, distinct) that the service issued in this test process, recorded by
// a command monitor on every store testenv opens, and fails on a collection
// scan or on an in-memory sort of an unbounded set. Each shape is explained
// against a fresh database carrying the service's indexes, so that the
// answer is whether an index serves the shape, not whether PostgreSQL finds
// a scan cheaper for the three documents of a test. Reads of a whole
// collection (no filter, no limit: verify, recovery's sweeps) are listed, not
// failed. It parses MongoDB's queryPlanner (COLLSCAN and SORT stages) and
// DocumentDB's PostgreSQL plan (Seq Scan, a scan of the _id_ index on the
// shard key alone, a Sort node not under a Limit).
func TestEveryQueryUsesAnIndex(t *testing.T) {
	if os.Getenv("MONGODB_URI") == "" {
		t.Skip("the embedded store (FerretDB v1 on SQLite) uses no index for any query: explained where MONGODB_URI names a server with indexes (the document engine, MongoDB)")
	}
	// A workload of its own, so the test means something when run alone:
	// every source of the interaction log, search, and the list tools.
	env := testenv.New(t)
	w := seedLog(t, env)
	c := env.Admin()
	for _, q := range []M{{"contact_id": w.contact}, {"outlet_id": w.outlet}, {"opportunity_id": w.opportunity}} {
		c.Must("get_interaction_log", q, nil)
	}
	searchWorld(t, env)
	for _, q := range []string{"launch", "café weekly"} {
		c.Must("search", M{"query": q}, nil)
	}
	for _, tool := range []string{"list_contacts", "list_outlets", "list_campaigns", "list_opportunities", "list_coverage",
		"list_notes", "list_channels", "list_media", "list_users", "list_email_threads", "get_change_log"} {
		c.Must(tool, M{}, nil)
	}
	c.Must("get_contact_dossier", M{"contact_id": w.contact}, nil)
	c.Must("get_outlet_dossier", M{"outlet_id": w.outlet}, nil)
	// The reports: the coverage report with its clip list (the clips'
	// outlets and journalists), the pipeline report by campaign and for the
	// team, and a shared report made, listed, viewed and revoked.
	camp, _ := reportFixture(t, c)
	oct := func(extra M) M {
		m := M{"kind": "coverage", "campaign_id": camp, "since": "2026-10-01", "until": "2026-10-31"}
		maps.Copy(m, extra)
		return m
	}
	c.Must("get_coverage_report", M{"campaign_id": camp, "since": "2026-10-01", "until": "2026-10-31"}, nil)
	c.Must("get_coverage_report", M{"outlet_ids": []string{w.outlet}, "since": "2026-10-01", "until": "2026-10-31"}, nil)
	c.Must("render_report", M{"kind": "coverage", "format": "csv", "table": "clips", "since": "2026-10-01", "until": "2026-10-31"}, nil) // the team's
	c.Must("render_report", oct(M{"format": "csv", "table": "clips"}), nil)
	callRaw(t, c, "render_report", oct(M{"format": "png", "chart": "trend"})) // the figures and the image
	c.Must("get_pipeline_report", M{"campaign_id": camp}, nil)
	c.Must("get_pipeline_report", M{}, nil)
	var shared sharedView
	c.Must("share_report", oct(nil), &shared)
	c.Must("list_shared_reports", M{"all": true}, nil)
	if res, body := get(t, shared.Link); res.StatusCode != 200 {
		t.Fatalf("the shared page: %d %s", res.StatusCode, body)
	}
	c.Must("revoke_shared_report", M{"id": shared.ID}, nil)

	// With the text indexes wherever they can be built: the suite's $text
	// queries (forced on where only case folds) are explained too.
	text := ""
	if env.Store.Capabilities().TextIndex {
		text = "on"
	}
	fresh := testenv.OpenStore(t, testenv.Options{TextSearch: text})
	db := fresh.RawCollections().Database
	ctx := context.Background()
	// The parser must see a scan where there is one, and none where an
	// index serves: a field no index has, and _id.
	for _, c := range []struct {
		filter bson.D
		scan   bool
	}{{bson.D{{Key: "no_index_has_this", Value: "x"}}, true}, {bson.D{{Key: "_id", Value: "x"}}, false}} {
		var out bson.M
		cmd := bson.D{{Key: "find", Value: "notes"}, {Key: "filter", Value: c.filter}}
		if err := db.RunCommand(ctx, bson.D{{Key: "explain", Value: cmd}, {Key: "verbosity", Value: "queryPlanner"}}).Decode(&out); err != nil {
			t.Fatal(err)
		}
		if got := len(planProblems(out)) > 0; got != c.scan {
			t.Fatalf("explain of %v: scan found %v, want %v (the plan parser is wrong): %v", c.filter, got, c.scan, out)
		}
	}
	shapes := testenv.Queries()
	if len(shapes) < 20 {
		t.Fatalf("only %d query shapes recorded: the recorder sees too little", len(shapes))
	}
	var checked, whole, literal, topN int
	for _, q := range shapes {
		if wholeCollection(q.Command) {
			whole++
			t.Logf("whole-collection read (not a query): %s", q.Shape)
			continue
		}
		if strings.Contains(q.Shape, "$regex") {
			// search's literal path matches fragments of words anywhere in
			// a field: no index can serve that. Where the text-search probe
			// passes, whole words go to the text index instead.
			literal++
			t.Logf("literal search (regular expressions, a scan by nature): %s", q.Shape)
			continue
		}
		cmd := q.Command
		if cmd[0].Key == "aggregate" {
			cmd = append(append(bson.D{}, cmd...), bson.E{Key: "cursor", Value: bson.D{}})
		}
		var out bson.M
		err := db.RunCommand(ctx, bson.D{{Key: "explain", Value: cmd}, {Key: "verbosity", Value: "queryPlanner"}}).Decode(&out)
		if err != nil {
			t.Errorf("explain %s: %v", q.Shape, err)
			continue
		}
		checked++
		if firstPageInOrder(q.Command) && documentDBPlan(out) {
			// DocumentDB's planner uses no index for an order: the first page
			// of a whole collection is a scan and a bounded (top-N) sort
			// there, whatever the indexes (MongoDB reads it from the index).
			topN++
			t.Logf("first page of a whole collection in order (a scan and a top-N sort on this engine): %s", q.Shape)
			continue
		}
		if problems := planProblems(out); len(problems) > 0 {
			t.Errorf("%s (issued %d times, e.g. %v): %s", q.Shape, q.Count, cmd, strings.Join(problems, "; "))
		}
	}
	t.Logf("%d query shapes explained (%d of them first pages of a whole collection, listed), %d whole-collection reads and %d literal-search shapes listed",
		checked, topN, whole, literal)
}

// wholeCollection: a find or count with no filter and no limit, or a pipeline
// that starts with an empty $match and has no $limit, reads a whole
// collection on purpose (verify, recovery's sweeps, a count of all keys).
func wholeCollection(cmd bson.D) bool {
	hasLimit, hasFilter := false, false
	for _, e := range cmd {
		switch e.Key {
		case "filter", "query":
			filter, _ := e.Value.(bson.D)
			hasFilter = len(filter) > 0
		case "limit":
			hasLimit = true
		case "pipeline":
			stages, _ := e.Value.(bson.A)
			if len(stages) == 0 {
				return true
			}
			first, _ := stages[0].(bson.D)
			if len(first) != 1 || first[0].Key != "$match" {
				return false
			}
			if m, _ := first[0].Value.(bson.D); len(m) > 0 {
				return false
			}
			for _, st := range stages {
				if d, _ := st.(bson.D); len(d) == 1 && d[0].Key == "$limit" {
					return false
				}
			}
			return true
		}
	}
	return !hasFilter && !hasLimit
}

// firstPageInOrder: no filter, a sort and a limit.
func firstPageInOrder(cmd bson.D) bool {
	var sorted, limited bool
	for _, e := range cmd {
		switch e.Key {
		case "filter":
			if f, _ := e.Value.(bson.D); len(f) > 0 {
				return false
			}
		case "sort":
			sorted = true
		case "limit":
			limited = true
		}
	}
	return sorted && limited
}

// documentDBPlan: the explain answer is a PostgreSQL plan.
func documentDBPlan(explain bson.M) bool {
	qp, _ := explain["queryPlanner"].(bson.M)
	_, ok := qp["Plan"]
	return ok
}

// planProblems finds collection scans and unbounded in-memory sorts in an
// explain answer of MongoDB (queryPlanner.winningPlan stages) or of
// DocumentDB (a PostgreSQL plan: nodes with "Node Type").
func planProblems(explain bson.M) []string {
	var out []string
	var walk func(v any, underLimit bool) (fullScan bool)
	walk = func(v any, underLimit bool) bool {
		full := false
		switch x := v.(type) {
		case bson.M:
			stage, _ := x["stage"].(string)
			node, _ := x["Node Type"].(string)
			limited := underLimit || stage == "LIMIT" || node == "Limit" || x["limitAmount"] != nil
			for k, c := range x {
				if k == "rejectedPlans" {
					continue
				}
				if walk(c, limited) {
					full = true
				}
			}
			switch {
			case stage == "COLLSCAN":
				out = append(out, "collection scan (COLLSCAN)")
				full = true
			case node == "Seq Scan":
				out = append(out, fmt.Sprintf("collection scan (Seq Scan of %v)", x["Relation Name"]))
				full = true
			case strings.Contains(node, "Index Scan") && x["Index Name"] == "_id_" && onlyShardKey(fmt.Sprint(x["Index Cond"])):
				out = append(out, "collection scan (the _id_ index on the shard key alone)")
				full = true
			case (stage == "SORT" || node == "Sort") && !limited && full:
				out = append(out, "in-memory sort of an unbounded set")
			}
		case bson.A:
			for _, c := range x {
				if walk(c, underLimit) {
					full = true
				}
			}
		}
		return full
	}
	walk(explain, false)
	return out
}

// onlyShardKey: DocumentDB's scan of a whole collection reads its _id_ index
// with the collection's shard key as the only condition.
func onlyShardKey(cond string) bool {
	return strings.Contains(cond, "shard_key_value") && !strings.Contains(cond, "object_id")
}
