package embedded

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestAnalystCursorAcrossConnections: a cursor belongs to its key, not to
// the connection that opened it, since drivers send getMore on any pooled
// connection; the cursors a connection opened die with it.
func TestAnalystCursorAcrossConnections(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Options{TCP: freeAddr(t), Auth: testUsers(map[string]string{"ann": "pw-ann", "bob": "pw-bob"})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	service := connect(t, s.URI)
	for i := range 5 {
		if _, err := service.Collection("notes").InsertOne(ctx, bson.D{{Key: "n", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	uri := func(user, pw string) string {
		return strings.Replace(s.PublicURI, "mongodb://", "mongodb://"+user+":"+pw+"@", 1) + "outreach?authMechanism=SCRAM-SHA-256"
	}
	one := connect(t, uri("ann", "pw-ann"))
	two := connect(t, uri("ann", "pw-ann"))
	bob := connect(t, uri("bob", "pw-bob"))
	cur, err := one.Collection("notes").Find(ctx, bson.D{}, options.Find().SetBatchSize(1))
	if err != nil {
		t.Fatal(err)
	}
	id := cur.ID()
	getMore := bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "notes"}, {Key: "batchSize", Value: int32(1)}}
	if err := bob.RunCommand(ctx, getMore).Err(); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("getMore by another key: %v; want not found", err)
	}
	var res bson.Raw
	if res, err = two.RunCommand(ctx, getMore).Raw(); err != nil {
		t.Fatalf("getMore by the same key on another connection: %v", err)
	}
	if batch, _ := res.Lookup("cursor", "nextBatch").Array().Values(); len(batch) != 1 {
		t.Errorf("getMore on another connection: %s", res)
	}
	one.Client().Disconnect(ctx)
	// The endpoint learns of the closed connection when its read fails:
	// wait until it has dropped the connection's cursors.
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.gate.mu.Lock()
		_, open := s.gate.cursors[id]
		s.gate.mu.Unlock()
		if !open {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the closed connection's cursor is still open after 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := two.RunCommand(ctx, getMore).Err(); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("getMore once the opening connection closed: %v; want not found", err)
	}
}
