package testenv

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
)

// Query is one shape of query the service issued in this test process, with
// the first command of that shape as it was sent (its database, and the
// command without the driver's session fields).
type Query struct {
	Shape   string
	DB      string
	Command bson.D
	Count   int
}

// queries records, by shape, every read command the stores opened by this
// package send (find, aggregate, count, distinct): the explain test explains
// each. The shapes come from the code as it runs, not from a list kept by
// hand. Only stores on MONGODB_URI record (the embedded store uses no index).
var queries = struct {
	sync.Mutex
	byShape map[string]*Query
}{byShape: map[string]*Query{}}

// Queries returns the recorded query shapes, sorted by shape.
func Queries() []Query {
	queries.Lock()
	defer queries.Unlock()
	out := make([]Query, 0, len(queries.byShape))
	for _, q := range queries.byShape {
		out = append(out, *q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Shape < out[j].Shape })
	return out
}

// recorder is the command monitor that feeds Queries.
var recorder = &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
	switch e.CommandName {
	case "find", "aggregate", "count", "distinct":
	default:
		return
	}
	var cmd bson.D
	if err := bson.Unmarshal(e.Command, &cmd); err != nil || len(cmd) == 0 {
		return
	}
	var keep bson.D
	for _, el := range cmd {
		switch el.Key {
		case "lsid", "$clusterTime", "$db", "txnNumber", "startTransaction", "autocommit", "readConcern",
			"$readPreference", "maxTimeMS", "batchSize", "singleBatch", "cursor", "comment":
			continue
		}
		keep = append(keep, el)
	}
	coll := fmt.Sprint(cmd[0].Value)
	if coll == "capability_probes" {
		return // the start-up probes' scratch collection
	}
	shape := e.CommandName + " " + coll + " " + shapeOf(keep[1:], false)
	queries.Lock()
	defer queries.Unlock()
	if q := queries.byShape[shape]; q != nil {
		q.Count++
		return
	}
	queries.byShape[shape] = &Query{Shape: shape, DB: e.DatabaseName, Command: keep, Count: 1}
}}

// shapeOf writes v with every value replaced by its type: two commands of one
// shape differ only in the values they look for. A document's keys are
// sorted (a filter or projection built from a Go map has no order), except
// where the order means something (ordered: a sort, a command's top level).
func shapeOf(v any, ordered bool) string {
	switch x := v.(type) {
	case bson.D:
		parts := make([]string, len(x))
		for i, el := range x {
			parts[i] = el.Key + ":" + shapeOf(el.Value, el.Key == "sort" || el.Key == "$sort")
		}
		if !ordered {
			sort.Strings(parts)
		}
		return "{" + strings.Join(parts, ",") + "}"
	case bson.M:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ":" + shapeOf(x[k], false)
		}
		return "{" + strings.Join(parts, ",") + "}"
	case bson.A:
		// A list of values ($in) is one shape whatever its length; a list
		// of stages or conditions keeps each.
		seen := map[string]bool{}
		var parts []string
		for _, e := range x {
			s := shapeOf(e, false)
			if !seen[s] || strings.HasPrefix(s, "{") {
				parts = append(parts, s)
			}
			seen[s] = true
		}
		return "[" + strings.Join(parts, ",") + "]"
	case string:
		if strings.HasPrefix(x, "$") {
			return x // a field path in a pipeline
		}
		return "str"
	case int32, int64, float64:
		return "num"
	case bool:
		return fmt.Sprint(x)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}
