package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

type verifyJSON struct {
	OK         bool             `json:"ok"`
	Checked    map[string]int64 `json:"checked"`
	ChangeLog  int64            `json:"change_log_entries"`
	Invariants []string         `json:"invariants"`
	Violations []struct {
		Collection string `json:"collection"`
		RecordID   string `json:"record_id"`
		Problem    string `json:"problem"`
		Repair     string `json:"repair"`
	} `json:"violations"`
}

func freeTCP(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestWireEndpointAndVerifyReport serves with --mongo-listen: by default a
// write through the wire endpoint is refused and `outreach verify --json`
// reports a clean store with its counts; with --mongo-allow-writes the
// write goes through, bypassing the change log, and verify names the record,
// the problem and its repair, readable and as JSON.
func TestWireEndpointAndVerifyReport(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("the read-only wire endpoint is the embedded store's; on MongoDB analysts connect to the server itself with a read-only user (docs/analyst-queries.md)")
	}
	ctx := context.Background()
	data := dataDir(t)
	addr := freeTCP(t)
	srv := startServer(t, data, "OUTREACH_MONGO_LISTEN="+addr)
	admin := mustDial(t, srv.URL, srv.FirstKey)
	var outlet struct{ ID string }
	admin.must(t, "create_outlet", map[string]any{"name": "The Example Times", "tier": 1}, &outlet)

	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/").SetTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(ctx)
	db := client.Database(storeEnv(data)[0][len("OUTREACH_DB="):])
	var got bson.M
	if err := db.Collection("outlets").FindOne(ctx, bson.M{"_id": outlet.ID}).Decode(&got); err != nil || got["name"] != "The Example Times" {
		t.Fatalf("reading the outlet through the wire endpoint: %v %v", got, err)
	}
	_, err = db.Collection("outlets").UpdateOne(ctx, bson.M{"_id": outlet.ID}, bson.M{"$set": bson.M{"name": "Tampered"}})
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(13) || !strings.Contains(err.Error(), "--mongo-allow-writes") {
		t.Fatalf("a write through the default endpoint: %v; want it refused (13) naming --mongo-allow-writes", err)
	}
	var rep verifyJSON
	if err := json.Unmarshal([]byte(mustCLI(t, "verify", "--json", "--data", data)), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Checked["outlets"] != 1 || rep.Checked["campaigns"] != 1 || rep.ChangeLog < 2 || len(rep.Invariants) == 0 || len(rep.Violations) != 0 {
		t.Errorf("verify --json on a clean store: %+v", rep)
	}
	if code := srv.term(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	client.Disconnect(ctx)

	srv = startServer(t, data, "OUTREACH_MONGO_LISTEN="+addr, "OUTREACH_MONGO_ALLOW_WRITES=true")
	client, err = mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/").SetTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(ctx)
	db = client.Database(storeEnv(data)[0][len("OUTREACH_DB="):])
	if _, err := db.Collection("outlets").UpdateOne(ctx, bson.M{"_id": outlet.ID}, bson.M{"$set": bson.M{"name": "Tampered"}}); err != nil {
		t.Fatalf("a write with --mongo-allow-writes: %v", err)
	}
	out, _, err := runCLI(t, "verify", "--data", data)
	if err == nil || !strings.HasPrefix(out, "FAILED: 1 problems") || !strings.Contains(out, "outlets "+outlet.ID+": differs from the after state") || !strings.Contains(out, "repair: ") {
		t.Errorf("verify after a write around the change log: %v\n%s", err, out)
	}
	out, _, _ = runCLI(t, "verify", "--json", "--data", data)
	rep = verifyJSON{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("verify --json: %v\n%s", err, out)
	}
	if rep.OK || len(rep.Violations) != 1 || rep.Violations[0].Collection != "outlets" || rep.Violations[0].RecordID != outlet.ID ||
		!strings.Contains(rep.Violations[0].Repair, "outside the write path") {
		t.Errorf("verify --json after the write: %+v", rep)
	}
	// Put it back as the repair says, so the test's store ends clean.
	if _, err := db.Collection("outlets").UpdateOne(ctx, bson.M{"_id": outlet.ID}, bson.M{"$set": bson.M{"name": "The Example Times"}}); err != nil {
		t.Fatal(err)
	}
	if out := mustCLI(t, "verify", "--data", data); !strings.HasPrefix(out, "ok") {
		t.Errorf("verify after the repair:\n%s", out)
	}
}
