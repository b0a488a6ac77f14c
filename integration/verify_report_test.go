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

// TestWireEndpointAndVerifyReport serves with --mongo-listen: a write
// through the analyst endpoint is refused, even with an admin key, and
// `outreach verify --json` reports a clean store with its counts; a server
// asked for --mongo-allow-writes (removed) refuses to start, saying why.
func TestWireEndpointAndVerifyReport(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("the analyst endpoint is the embedded store's; on MongoDB analysts connect to the server itself with a read-only user (docs/analyst-queries.md)")
	}
	ctx := context.Background()
	data := dataDir(t)
	addr := freeTCP(t)
	srv := startServer(t, data, "OUTREACH_MONGO_LISTEN="+addr)
	admin := mustDial(t, srv.URL, srv.FirstKey)
	var outlet struct{ ID string }
	admin.must(t, "create_outlet", map[string]any{"name": "The Example Times", "tier": 1}, &outlet)
	var me whoami
	admin.must(t, "whoami", nil, &me)

	client, err := mongo.Connect(options.Client().ApplyURI(analystURI(addr, "", analystKey{me.KeyID, srv.FirstKey})).SetTimeout(10 * time.Second))
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
	if !errors.As(err, &se) || !se.HasErrorCode(13) || !strings.Contains(err.Error(), "read-only") || !strings.Contains(err.Error(), "MCP tools") {
		t.Fatalf("a write through the analyst endpoint with an admin key: %v; want it refused (13) naming the MCP tools", err)
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

	_, stderr, err := runCLI(t, "serve", "--data", data, "--addr", "127.0.0.1:0", "--mongo-listen", addr, "--mongo-allow-writes")
	if err == nil || !strings.Contains(stderr, "--mongo-allow-writes") || !strings.Contains(stderr, "removed") || !strings.Contains(stderr, "change-log") {
		t.Errorf("serve --mongo-allow-writes: %v\n%s; want a refusal saying it was removed and why", err, stderr)
	}
}
