package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/access"
)

// analystKey is an agent key made through MCP: its id is the user name on
// the analyst endpoint, the key the password.
type analystKey struct{ ID, Key string }

func newAgentKey(t *testing.T, admin *mcpConn, name string, scopes ...string) analystKey {
	t.Helper()
	var k struct {
		Key      string
		AgentKey struct{ ID string } `json:"agent_key"`
	}
	admin.must(t, "create_agent_key", map[string]any{"name": name, "scopes": scopes}, &k)
	return analystKey{ID: k.AgentKey.ID, Key: k.Key}
}

// analystURI is the documented connection string of the analyst endpoint.
func analystURI(addr, db string, k analystKey) string {
	if k.ID == "" {
		return "mongodb://" + addr + "/" + db
	}
	return "mongodb://" + k.ID + ":" + k.Key + "@" + addr + "/" + db + "?authMechanism=SCRAM-SHA-256"
}

func analystClient(t *testing.T, uri string, opts ...*options.ClientOptions) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(append([]*options.ClientOptions{options.Client().ApplyURI(uri).SetTimeout(20 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(context.Background()) })
	return c
}

// serverCode is the MongoDB error code of err, or 0.
func serverCode(err error) int {
	var se mongo.ServerError
	if errors.As(err, &se) {
		for _, c := range []int{2, 13, 18, 43, 334} {
			if se.HasErrorCode(c) {
				return c
			}
		}
		return -1
	}
	return 0
}

// analystServer serves data with the analyst endpoint; it skips on
// MONGODB_URI, where analysts use the server's own users
// (docs/analyst-queries.md).
func analystServer(t *testing.T, data string) (*proc, string, string) {
	t.Helper()
	needsAnalystEndpoint(t)
	addr := freeTCP(t)
	srv := startServer(t, data, "OUTREACH_MONGO_LISTEN="+addr)
	return srv, addr, storeEnv(data)[0][len("OUTREACH_DB="):]
}

// needsAnalystEndpoint skips on MONGODB_URI; a test that seeds a store
// before it starts the server calls it first, so it skips before the work.
func needsAnalystEndpoint(t *testing.T) {
	t.Helper()
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("the analyst endpoint is the embedded store's; on MongoDB analysts use the server's own read-only users")
	}
}

// TestAnalystAuthentication connects to the analyst endpoint with the
// stock Go driver and mongosh: without credentials only the handshake and
// ping answer; a key with the read scope reads (and sees no secret-bearing
// collection); a wrong password, a key without the read scope and a revoked
// key are refused, a connection of a key revoked meanwhile is refused its
// next command; failed attempts are rate limited.
func TestAnalystAuthentication(t *testing.T) {
	ctx := context.Background()
	data := dataDir(t)
	srv, addr, db := analystServer(t, data)
	admin := mustDial(t, srv.URL, srv.FirstKey)
	var outlet struct{ ID string }
	admin.must(t, "create_outlet", map[string]any{"name": "The Example Times", "tier": 1}, &outlet)
	reader := newAgentKey(t, admin, "analyst", "read")
	writer := newAgentKey(t, admin, "writer", "write")
	doomed := newAgentKey(t, admin, "doomed", "read")
	limited := newAgentKey(t, admin, "limited", "read", "write")

	anon := analystClient(t, analystURI(addr, db, analystKey{})).Database(db)
	if err := anon.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Errorf("ping without credentials: %v", err)
	}
	for name, run := range map[string]func() error{
		"find":            func() error { return anon.Collection("outlets").FindOne(ctx, bson.M{}).Err() },
		"listCollections": func() error { _, err := anon.ListCollectionNames(ctx, bson.M{}); return err },
		"insert":          func() error { _, err := anon.Collection("outlets").InsertOne(ctx, bson.M{"name": "x"}); return err },
	} {
		if err := run(); serverCode(err) != 13 || !strings.Contains(err.Error(), "requires authentication") {
			t.Errorf("%s without credentials: %v; want code 13, authentication required", name, err)
		}
	}

	rdb := analystClient(t, analystURI(addr, db, reader)).Database(db)
	var got bson.M
	if err := rdb.Collection("outlets").FindOne(ctx, bson.M{"_id": outlet.ID}).Decode(&got); err != nil || got["name"] != "The Example Times" {
		t.Fatalf("find with a read key: %v %v", got, err)
	}
	names, err := rdb.ListCollectionNames(ctx, bson.M{})
	if err != nil || !strings.Contains(strings.Join(names, " "), "change_log") {
		t.Fatalf("listCollections with a read key: %v %v", names, err)
	}
	for _, hidden := range []string{"agent_keys", "settings", "idempotency_keys", "write_intents"} {
		if strings.Contains(" "+strings.Join(names, " ")+" ", " "+hidden+" ") {
			t.Errorf("listCollections shows %s: %v", hidden, names)
		}
		if err := rdb.Collection(hidden).FindOne(ctx, bson.M{}).Err(); serverCode(err) != 13 || !strings.Contains(err.Error(), "secrets") {
			t.Errorf("find on %s: %v; want code 13, not shown", hidden, err)
		}
	}
	if _, err := rdb.Collection("outlets").UpdateOne(ctx, bson.M{"_id": outlet.ID}, bson.M{"$set": bson.M{"name": "Tampered"}}); serverCode(err) != 13 || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("a write with a read key: %v; want code 13, read-only", err)
	}
	var status bson.M
	if err := rdb.RunCommand(ctx, bson.D{{Key: "connectionStatus", Value: 1}}).Decode(&status); err != nil || !strings.Contains(fmt.Sprint(status), reader.ID) {
		t.Errorf("connectionStatus: %v %v; want the key's id as the user", status, err)
	}

	authFails := func(what string, k analystKey, want string) {
		t.Helper()
		err := analystClient(t, analystURI(addr, db, k)).Ping(ctx, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", what, err, want)
		}
	}
	authFails("a wrong password", analystKey{reader.ID, writer.Key}, "Authentication failed")
	authFails("an unknown user", analystKey{"no-such-key", reader.Key}, "Authentication failed")
	authFails("a key without the read scope", writer, "Authentication failed")
	// Without authMechanism the driver asks which mechanisms the user has.
	if err := analystClient(t, "mongodb://"+reader.ID+":"+reader.Key+"@"+addr+"/"+db).Ping(ctx, nil); err != nil {
		t.Errorf("connecting without authMechanism: %v", err)
	}

	// A revoked key: its open connection is refused its next command and
	// closed; a new connection fails to authenticate.
	ddb := analystClient(t, analystURI(addr, db, doomed), options.Client().SetRetryReads(false)).Database(db)
	if err := ddb.Collection("outlets").FindOne(ctx, bson.M{}).Err(); err != nil {
		t.Fatalf("find with a read key before its revocation: %v", err)
	}
	admin.must(t, "revoke_agent_key", map[string]any{"id": doomed.ID}, nil)
	if err := ddb.Collection("outlets").FindOne(ctx, bson.M{}).Err(); err == nil || !strings.Contains(err.Error(), "may no longer read") && !strings.Contains(err.Error(), "Authentication failed") {
		t.Errorf("find on a connection whose key was revoked: %v; want it refused", err)
	}
	authFails("a revoked key", doomed, "Authentication failed")

	// Failed attempts under one user name are limited: after a handful,
	// even the right password is refused for a while.
	limitedOut := false
	for i := 0; i < 10 && !limitedOut; i++ {
		err := analystClient(t, analystURI(addr, db, analystKey{limited.ID, reader.Key})).Ping(ctx, nil)
		if err == nil {
			t.Fatal("a wrong password was accepted")
		}
		limitedOut = strings.Contains(err.Error(), "too many failed authentications")
	}
	if !limitedOut {
		t.Errorf("ten wrong passwords in a row were never rate limited")
	}
	authFails("the right password right after the failures", limited, "too many failed authentications")
	if err := analystClient(t, analystURI(addr, db, reader)).Ping(ctx, nil); err != nil {
		t.Errorf("another user during the limit: %v", err)
	}

	// mongosh, unchanged, with the documented connection string.
	if !haveMongosh(t) {
		return
	}
	mongosh := func(uri, eval string) (string, error) { return mongoshEval(ctx, uri, eval) }
	out, err := mongosh(analystURI(addr, db, reader), `db.outlets.find({}, {name: 1}).toArray().map(o => o.name).join(",")`)
	if err != nil || strings.TrimSpace(out) != "The Example Times" {
		t.Errorf("mongosh with a read key: %v\n%s", err, out)
	}
	out, err = mongosh(analystURI(addr, db, analystKey{}), `db.outlets.countDocuments()`)
	if err == nil || !strings.Contains(out, "requires authentication") {
		t.Errorf("mongosh without credentials: %v\n%s", err, out)
	}
	out, err = mongosh(analystURI(addr, db, analystKey{reader.ID, writer.Key}), `db.outlets.countDocuments()`)
	if err == nil || !strings.Contains(out, "Authentication failed") {
		t.Errorf("mongosh with a wrong password: %v\n%s", err, out)
	}
}

// rssKB is the resident size of process pid.
func rssKB(t *testing.T, pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1 // exited
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return -1
}

// rssBoundKB is how much the server may grow while it answers the hostile
// requests below: the whole demo store is a few megabytes, so a quarter of
// a gigabyte means work the endpoint did not bound.
const rssBoundKB = 256 << 10

// TestAnalystBoundedWork sends the analyst endpoint the shapes that made
// the server grow without bound or run unbounded work: a batch of 2^31-1
// documents, a huge skip or negative limit, code run in the server, deep
// and long pipelines, more cursors than allowed, and another key's cursor,
// while a watcher samples the process's resident size; it must stay within
// rssBoundKB of where it began, and the server must still stop on SIGTERM.
func TestAnalystBoundedWork(t *testing.T) {
	needsAnalystEndpoint(t)
	ctx := context.Background()
	data := dataDir(t)
	seedDemoCLI(t, data)
	srv, addr, db := analystServer(t, data)
	admin := mustDial(t, srv.URL, srv.FirstKey)
	one := newAgentKey(t, admin, "analyst one", "read")
	two := newAgentKey(t, admin, "analyst two", "read")

	pid := srv.cmd.Process.Pid
	base := rssKB(t, pid)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		peak = base
	)
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			kb := rssKB(t, pid)
			mu.Lock()
			peak = max(peak, kb)
			mu.Unlock()
			if kb > base+rssBoundKB {
				srv.cmd.Process.Kill() // spare the machine; the check below fails
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()

	c1 := analystClient(t, analystURI(addr, db, one), options.Client().SetMaxPoolSize(1))
	d1 := c1.Database(db)
	run := func(cmd bson.D) (bson.Raw, error) {
		return d1.RunCommand(ctx, cmd).Raw()
	}
	entries, err := d1.Collection("change_log").CountDocuments(ctx, bson.M{})
	if err != nil || entries < 150 {
		t.Fatalf("change_log holds %d entries (%v); the shapes need more than a default batch", entries, err)
	}
	res, err := run(bson.D{{Key: "find", Value: "change_log"}, {Key: "batchSize", Value: int32(2147483647)}})
	if err != nil {
		t.Fatalf("find with batchSize 2147483647: %v", err)
	}
	if batch, _ := res.Lookup("cursor", "firstBatch").Array().Values(); int64(len(batch)) != min(entries, 1000) {
		t.Errorf("first batch of %d documents, want %d", len(batch), min(entries, 1000))
	}
	if _, err := run(bson.D{{Key: "find", Value: "change_log"}, {Key: "batchSize", Value: 2147483647.0}, {Key: "singleBatch", Value: true}}); err != nil {
		t.Errorf("find with a double batchSize: %v", err)
	}

	deep := bson.D{{Key: "x", Value: 1}}
	for range 40 {
		deep = bson.D{{Key: "$and", Value: bson.A{deep}}}
	}
	long := bson.A{}
	for range 60 {
		long = append(long, bson.D{{Key: "$match", Value: bson.D{}}})
	}
	refusals := []struct {
		name string
		cmd  bson.D
		code int
		want string
	}{
		{"huge skip", bson.D{{Key: "find", Value: "change_log"}, {Key: "skip", Value: int64(1) << 40}}, 2, "skip"},
		{"huge $skip", bson.D{{Key: "aggregate", Value: "change_log"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$skip", Value: int64(1) << 40}}}}, {Key: "cursor", Value: bson.D{}}}, 2, "$skip"},
		{"negative limit of 2^31-1", bson.D{{Key: "find", Value: "change_log"}, {Key: "limit", Value: int32(-2147483647)}}, 2, "negative limit"},
		{"$where", bson.D{{Key: "find", Value: "change_log"}, {Key: "filter", Value: bson.D{{Key: "$where", Value: "while(true){}"}}}}, 2, "runs code"},
		{"$function", bson.D{{Key: "aggregate", Value: "notes"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$addFields", Value: bson.D{{Key: "x", Value: bson.D{{Key: "$function", Value: bson.D{{Key: "body", Value: "function(){}"}, {Key: "args", Value: bson.A{}}, {Key: "lang", Value: "js"}}}}}}}}}}, {Key: "cursor", Value: bson.D{}}}, 2, "runs code"},
		{"$accumulator", bson.D{{Key: "aggregate", Value: "notes"}, {Key: "pipeline", Value: bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "x", Value: bson.D{{Key: "$accumulator", Value: bson.D{}}}}}}}}}, {Key: "cursor", Value: bson.D{}}}, 2, "runs code"},
		{"a filter 40 levels deep", bson.D{{Key: "find", Value: "change_log"}, {Key: "filter", Value: deep}}, 2, "deeper than"},
		{"a pipeline of 60 stages", bson.D{{Key: "aggregate", Value: "change_log"}, {Key: "pipeline", Value: long}, {Key: "cursor", Value: bson.D{}}}, 2, "stages"},
		{"an unknown cursor (the service's own, say)", bson.D{{Key: "getMore", Value: int64(4242)}, {Key: "collection", Value: "change_log"}}, 43, "not found"},
	}
	for _, r := range refusals {
		if _, err := run(r.cmd); serverCode(err) != r.code || !strings.Contains(err.Error(), r.want) {
			t.Errorf("%s: %v; want code %d naming %q", r.name, err, r.code, r.want)
		}
	}

	// Cursors: at most 16 open on a connection (the pool holds one here);
	// another key cannot continue or kill them.
	var open []*mongo.Cursor
	for i := 0; i < 16; i++ {
		cur, err := d1.Collection("change_log").Find(ctx, bson.M{}, options.Find().SetBatchSize(1))
		if err != nil {
			t.Fatalf("cursor %d: %v", i+1, err)
		}
		open = append(open, cur)
	}
	if _, err := d1.Collection("change_log").Find(ctx, bson.M{}, options.Find().SetBatchSize(1)); serverCode(err) != 2 || !strings.Contains(err.Error(), "open cursors") {
		t.Errorf("a 17th open cursor: %v; want code 2", err)
	}
	d2 := analystClient(t, analystURI(addr, db, two)).Database(db)
	id := open[0].ID()
	if err := d2.RunCommand(ctx, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "change_log"}}).Err(); serverCode(err) != 43 {
		t.Errorf("getMore on another key's cursor: %v; want code 43", err)
	}
	if err := d2.RunCommand(ctx, bson.D{{Key: "killCursors", Value: "change_log"}, {Key: "cursors", Value: bson.A{id}}}).Err(); serverCode(err) != 43 {
		t.Errorf("killCursors on another key's cursor: %v; want code 43", err)
	}
	if !open[0].Next(ctx) || !open[0].Next(ctx) {
		t.Errorf("the owner's cursor after another key's attempts: %v", open[0].Err())
	}
	for _, cur := range open {
		cur.Close(ctx)
	}
	if cur, err := d1.Collection("change_log").Find(ctx, bson.M{}, options.Find().SetBatchSize(1)); err != nil {
		t.Errorf("a cursor once the others were closed: %v", err)
	} else {
		cur.Close(ctx)
	}
	// Every document of the log, in batches the endpoint bounds.
	cur, err := d1.Collection("change_log").Find(ctx, bson.M{}, options.Find().SetBatchSize(2147483647))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for cur.Next(ctx) {
		n++
	}
	if cur.Err() != nil || int64(n) != entries {
		t.Errorf("read %d of %d entries: %v", n, entries, cur.Err())
	}

	close(stop)
	wg.Wait()
	stop = make(chan struct{})
	if last := rssKB(t, pid); peak > base+rssBoundKB || last < 0 {
		t.Fatalf("resident size went from %d kB to %d kB (now %d), more than %d kB over", base, peak, last, rssBoundKB)
	}
	t.Logf("resident size %d kB at the start, %d kB at most", base, peak)
	if code := srv.term(30 * time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
}

// TestAnalystKeyOfAnOlderKey: a key stored before keys carried a SCRAM
// verifier still works over MCP, but the analyst endpoint refuses it,
// saying to create a new read key; a key without the read scope and a
// revoked one are refused too, each with its reason for the server's log.
func TestAnalystKeyOfAnOlderKey(t *testing.T) {
	env := testenv.New(t)
	ctx := audit.WithActor(context.Background(), repo.SystemActor("test"))
	old := access.NewKey()
	sum := sha256.Sum256([]byte(old))
	id, err := env.Store.Fixture(ctx, "agent_keys", map[string]any{"user_id": env.AdminUserID, "name": "older key", "agent_type": "other",
		"scopes": []string{"read"}, "key_hash": hex.EncodeToString(sum[:]), "display_prefix": old[:15] + "…", "expires_at": nil, "revoked_at": nil})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := access.Of(env.Store).Authenticate(ctx, old); err != nil {
		t.Fatalf("the older key over MCP: %v", err)
	}
	var made struct {
		AgentKey struct{ ID string } `json:"agent_key"`
	}
	env.Admin().Must("create_agent_key", M{"name": "reader", "scopes": []string{"read"}}, &made)
	var writer struct {
		AgentKey struct{ ID string } `json:"agent_key"`
	}
	env.Admin().Must("create_agent_key", M{"name": "writer", "scopes": []string{"write"}}, &writer)
	if k, err := access.Of(env.Store).AnalystKey(ctx, made.AgentKey.ID); err != nil || k.SCRAM == nil || k.SCRAM.Iterations < 4096 || len(k.SCRAM.StoredKey) != 32 {
		t.Fatalf("a new read key: %+v %v; want its verifier", k, err)
	}
	for what, c := range map[string]struct{ id, want string }{
		"an older key":           {id, "create a new key with the read scope"},
		"a key without read":     {writer.AgentKey.ID, "no read scope"},
		"an id that is no key's": {"0b9d5c55-6a7e-4a55-9a63-0c1c1c0a0a01", "no agent key"},
	} {
		if _, err := access.Of(env.Store).AnalystKey(ctx, c.id); !errors.Is(err, repo.ErrBadKey) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", what, err, c.want)
		}
	}
	env.Admin().Must("revoke_agent_key", M{"id": made.AgentKey.ID}, nil)
	if _, err := access.Of(env.Store).AnalystKey(ctx, made.AgentKey.ID); !errors.Is(err, repo.ErrBadKey) || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("a revoked key: %v", err)
	}
}
