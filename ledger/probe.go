package ledger

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The capability probes decide what the server can do by doing it, never by
// the name or version it reports. They run at start in the scratch collection
// "capability_probes", each start with documents of its own (ids prefixed by
// a random run id, and a run field), so several processes may start on one
// store at once. It holds no record (no version, no change entry) and nothing
// else reads it; the service deletes nothing, so each start leaves its five
// small probe documents there (a few hundred bytes). Its writes are the only
// driver writes outside the write path (a test holds them to this collection).
const CollProbes = "capability_probes"

// Probes is what the probes found.
type Probes struct {
	// Transactions: a write inside an aborted transaction is invisible
	// (inside it as well as after the abort), and a committed one is visible.
	Transactions bool
	// AtomicUpdates: concurrent version-guarded updates of one document let
	// exactly one win per version, and concurrent $inc return distinct
	// numbers that sum exactly.
	AtomicUpdates bool
	// UnionWith: $unionWith returns the documents of both pipelines.
	UnionWith bool
	// TextIndex: a text index can be built and $text finds a whole word
	// whatever its case.
	TextIndex bool
	// TextSearch: besides, $text finds a word whatever its accents, as the
	// service's search promises.
	TextSearch bool
	// Notes say why a probe came out false.
	Notes []string
}

// probeRounds and probeWriters size the atomicity probe: each round, that many
// writers race for one version of one document.
const (
	probeRounds  = 4
	probeWriters = 8
)

// probeRun names one start's probe documents.
type probeRun string

func (r probeRun) id(name string) string { return string(r) + "-" + name }

// Probe runs every probe on documents of its own in db's scratch
// collection (CollProbes): what the server can do is decided by what it
// does, never by its name.
func Probe(ctx context.Context, client *mongo.Client, db *mongo.Database) Probes {
	var p Probes
	scratch := db.Collection(CollProbes)
	run := probeRun(strings.ReplaceAll(uuid.NewString(), "-", ""))
	note := func(format string, args ...any) { p.Notes = append(p.Notes, fmt.Sprintf(format, args...)) }
	if _, err := scratch.InsertMany(ctx, []any{
		bson.M{"_id": run.id("guard"), "run": run, "v": int64(0), "wins": int64(0)},
		bson.M{"_id": run.id("counter"), "run": run, "n": int64(0)},
		bson.M{"_id": run.id("word"), "run": run, "body": "alpha bravo"},
		bson.M{"_id": run.id("other"), "run": run, "body": "charlie delta"},
		bson.M{"_id": run.id("accent"), "run": run, "body": "Crème Café"},
	}); err != nil {
		note("probe collection: %v", err)
		return p
	}
	var why string
	p.AtomicUpdates, why = probeAtomic(ctx, scratch, run)
	if why != "" {
		note("atomic updates: %s", why)
	}
	p.Transactions, why = probeTransactions(ctx, client, scratch, run)
	if why != "" {
		note("transactions: %s", why)
	}
	p.UnionWith, why = probeUnionWith(ctx, scratch, run)
	if why != "" {
		note("$unionWith: %s", why)
	}
	p.TextIndex, p.TextSearch, why = probeText(ctx, scratch, run)
	if why != "" {
		note("text search: %s", why)
	}
	return p
}

// probeAtomic races probeWriters guarded updates for each version of one
// document, and as many $inc of a counter: a server that reads and then
// writes without a lock lets two guarded writers win one version, or two
// $inc return one number.
func probeAtomic(ctx context.Context, scratch *mongo.Collection, run probeRun) (bool, string) {
	for round := range int64(probeRounds) {
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			wins  int64
			seen  []int64
			fails []error
		)
		start := make(chan struct{})
		for range probeWriters {
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				res, err := scratch.UpdateOne(ctx, bson.M{"_id": run.id("guard"), "v": round},
					bson.M{"$set": bson.M{"v": round + 1}, "$inc": bson.M{"wins": int64(1)}})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					fails = append(fails, err)
				} else {
					wins += res.ModifiedCount
				}
			}()
			go func() {
				defer wg.Done()
				<-start
				var doc struct {
					N int64 `bson:"n"`
				}
				after := (&options.FindOneAndUpdateOptionsBuilder{}).SetReturnDocument(options.After)
				err := scratch.FindOneAndUpdate(ctx, bson.M{"_id": run.id("counter")}, bson.M{"$inc": bson.M{"n": int64(1)}}, after).Decode(&doc)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					fails = append(fails, err)
				} else {
					seen = append(seen, doc.N)
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(fails) > 0 {
			return false, fmt.Sprintf("a probe write failed: %v", fails[0])
		}
		if wins != 1 {
			return false, fmt.Sprintf("%d guarded updates won version %d (want 1)", wins, round)
		}
		sort.Slice(seen, func(i, j int) bool { return seen[i] < seen[j] })
		for i, n := range seen {
			if want := round*probeWriters + int64(i) + 1; n != want {
				return false, fmt.Sprintf("concurrent $inc returned %v (want %d..%d)", seen, round*probeWriters+1, (round+1)*probeWriters)
			}
		}
	}
	var guard, counter struct {
		V    int64 `bson:"v"`
		Wins int64 `bson:"wins"`
		N    int64 `bson:"n"`
	}
	if err := scratch.FindOne(ctx, bson.M{"_id": run.id("guard")}).Decode(&guard); err != nil {
		return false, err.Error()
	}
	if err := scratch.FindOne(ctx, bson.M{"_id": run.id("counter")}).Decode(&counter); err != nil {
		return false, err.Error()
	}
	if guard.V != probeRounds || guard.Wins != probeRounds || counter.N != probeRounds*probeWriters {
		return false, fmt.Sprintf("after the races: version %d, %d $inc of wins, counter %d (want %d, %d, %d)",
			guard.V, guard.Wins, counter.N, probeRounds, probeRounds, probeRounds*probeWriters)
	}
	return true, ""
}

// probeTransactions writes inside a transaction and aborts it: the write must
// not be seen from outside while the transaction runs, nor after the abort;
// then a committed write must be seen. A server that accepts startTransaction
// but applies its writes at once fails here, whatever it answers.
func probeTransactions(ctx context.Context, client *mongo.Client, scratch *mongo.Collection, run probeRun) (bool, string) {
	sess, err := client.StartSession()
	if err != nil {
		return false, err.Error()
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	in := mongo.NewSessionContext(ctx, sess)
	visible := func(id string) (bool, error) {
		n, err := scratch.CountDocuments(ctx, bson.M{"_id": id})
		return n > 0, err
	}
	if err := sess.StartTransaction(); err != nil {
		return false, err.Error()
	}
	if _, err := scratch.InsertOne(in, bson.M{"_id": run.id("tx-aborted"), "run": run}); err != nil {
		sess.AbortTransaction(context.WithoutCancel(ctx))
		return false, fmt.Sprintf("write in a transaction: %v", err)
	}
	early, err := visible(run.id("tx-aborted"))
	abortErr := sess.AbortTransaction(context.WithoutCancel(ctx))
	if err != nil {
		return false, err.Error()
	}
	if early {
		return false, "a write inside a transaction is visible outside it before the commit"
	}
	if late, err := visible(run.id("tx-aborted")); err != nil || late {
		return false, fmt.Sprintf("a write of an aborted transaction is visible (abort: %v, read: %v)", abortErr, err)
	}
	if err := sess.StartTransaction(); err != nil {
		return false, err.Error()
	}
	if _, err := scratch.InsertOne(in, bson.M{"_id": run.id("tx-committed"), "run": run}); err != nil {
		sess.AbortTransaction(context.WithoutCancel(ctx))
		return false, fmt.Sprintf("write in a transaction: %v", err)
	}
	if err := sess.CommitTransaction(ctx); err != nil {
		return false, fmt.Sprintf("commit: %v", err)
	}
	if ok, err := visible(run.id("tx-committed")); err != nil || !ok {
		return false, fmt.Sprintf("a committed write is not visible (read: %v)", err)
	}
	return true, ""
}

// probeUnionWith unions the run's "word" document with itself.
func probeUnionWith(ctx context.Context, scratch *mongo.Collection, run probeRun) (bool, string) {
	match := bson.D{{Key: "$match", Value: bson.M{"_id": run.id("word")}}}
	cur, err := scratch.Aggregate(ctx, mongo.Pipeline{match,
		{{Key: "$unionWith", Value: bson.D{{Key: "coll", Value: scratch.Name()}, {Key: "pipeline", Value: bson.A{match}}}}}})
	if err != nil {
		return false, err.Error()
	}
	var docs []bson.M
	if err := cur.All(ctx, &docs); err != nil {
		return false, err.Error()
	}
	if len(docs) != 2 {
		return false, fmt.Sprintf("%d documents, want 2", len(docs))
	}
	return true, ""
}

// probeText builds a text index and searches whole words the way the
// service's search promises them (search.go): case-insensitive ("BRAVO"
// finds "bravo") and diacritic-insensitive ("cafe" finds "Café"). A server
// whose text index misses either keeps the literal path.
func probeText(ctx context.Context, scratch *mongo.Collection, run probeRun) (index, search bool, why string) {
	if _, err := scratch.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "body", Value: "text"}}}); err != nil {
		return false, false, fmt.Sprintf("text index: %v", err)
	}
	for i, c := range []struct{ search, want string }{{"BRAVO", run.id("word")}, {"cafe", run.id("accent")}} {
		cur, err := scratch.Find(ctx, bson.M{"$text": bson.M{"$search": c.search}, "run": run})
		if err != nil {
			return i > 0, false, err.Error()
		}
		var docs []bson.M
		if err := cur.All(ctx, &docs); err != nil {
			return i > 0, false, err.Error()
		}
		if len(docs) != 1 || docs[0]["_id"] != c.want {
			ids := []any{}
			for _, d := range docs {
				ids = append(ids, d["_id"])
			}
			return i > 0, false, fmt.Sprintf("$text %q found %v, want [%s]", c.search, ids, c.want)
		}
	}
	return true, true, ""
}
