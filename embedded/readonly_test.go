package embedded

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func connect(t *testing.T, uri string) *mongo.Database {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(context.Background()) })
	return c.Database("outreach")
}

// TestWireEndpointReadOnly opens the people's wire endpoint as serve
// --mongo-listen does, and talks to it with the official driver: reads pass,
// every kind of write is refused with code 13 and a message naming the tools
// and the flag, and the store is unchanged behind it.
func TestWireEndpointReadOnly(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Options{Dir: t.TempDir(), TCP: freeAddr(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.PublicURI == s.URI || s.PublicURI == "" {
		t.Fatalf("public endpoint %q, service endpoint %q: want a separate gated endpoint", s.PublicURI, s.URI)
	}
	service := connect(t, s.URI)
	if _, err := service.Collection("contacts").InsertOne(ctx, bson.D{{Key: "_id", Value: "c1"}, {Key: "name", Value: "Ada"}}); err != nil {
		t.Fatalf("the service's own endpoint refused a write: %v", err)
	}

	db := connect(t, s.PublicURI)
	var got bson.M
	if err := db.Collection("contacts").FindOne(ctx, bson.D{{Key: "_id", Value: "c1"}}).Decode(&got); err != nil || got["name"] != "Ada" {
		t.Fatalf("find through the read-only endpoint: %v %v", got, err)
	}
	if n, err := db.Collection("contacts").CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("count through the read-only endpoint: %d %v", n, err)
	}
	cur, err := db.Collection("contacts").Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{}}}, {{Key: "$count", Value: "n"}}})
	if err != nil {
		t.Fatalf("aggregate through the read-only endpoint: %v", err)
	}
	var counted []bson.M
	if err := cur.All(ctx, &counted); err != nil || len(counted) != 1 {
		t.Fatalf("aggregate result %v %v", counted, err)
	}
	if names, err := db.ListCollectionNames(ctx, bson.D{}); err != nil || len(names) != 1 {
		t.Fatalf("listCollections: %v %v", names, err)
	}

	coll := db.Collection("contacts")
	writes := map[string]func() error{
		"insert": func() error { _, err := coll.InsertOne(ctx, bson.D{{Key: "name", Value: "Eve"}}); return err },
		"update": func() error {
			_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "c1"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "X"}}}})
			return err
		},
		"delete":        func() error { _, err := coll.DeleteMany(ctx, bson.D{}); return err },
		"findAndModify": func() error { return coll.FindOneAndDelete(ctx, bson.D{}).Err() },
		"drop":          func() error { return coll.Drop(ctx) },
		"dropDatabase":  func() error { return db.Drop(ctx) },
		"create":        func() error { return db.CreateCollection(ctx, "other") },
		"createIndexes": func() error {
			_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "name", Value: 1}}})
			return err
		},
		"dropIndexes": func() error { return coll.Indexes().DropAll(ctx) },
		"renameCollection": func() error {
			return db.Client().Database("admin").RunCommand(ctx, bson.D{{Key: "renameCollection", Value: "outreach.contacts"}, {Key: "to", Value: "outreach.x"}}).Err()
		},
		"aggregate with $out": func() error {
			_, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$out", Value: "copy"}}})
			return err
		},
		"aggregate with $merge": func() error {
			_, err := coll.Aggregate(ctx, mongo.Pipeline{{{Key: "$merge", Value: bson.D{{Key: "into", Value: "copy"}}}}})
			return err
		},
		"explain of a delete": func() error {
			return db.RunCommand(ctx, bson.D{{Key: "explain", Value: bson.D{{Key: "delete", Value: "contacts"}, {Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 0}}}}}}}).Err()
		},
	}
	for name, write := range writes {
		err := write()
		var se mongo.ServerError
		if !errors.As(err, &se) || !se.HasErrorCode(ReadOnlyCode) || !strings.Contains(err.Error(), "read-only") ||
			!strings.Contains(err.Error(), "--mongo-allow-writes") || !strings.Contains(err.Error(), "MCP tools") {
			t.Errorf("%s through the read-only endpoint: %v; want code 13 naming the tools and --mongo-allow-writes", name, err)
		}
	}
	var after []bson.M
	cur, err = service.Collection("contacts").Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &after); err != nil || len(after) != 1 || after[0]["name"] != "Ada" {
		t.Errorf("the store after refused writes: %v %v; want Ada alone, unchanged", after, err)
	}
	if names, err := service.ListCollectionNames(ctx, bson.D{}); err != nil || len(names) != 1 {
		t.Errorf("collections after refused writes: %v %v", names, err)
	}
	if specs, err := service.Collection("contacts").Indexes().ListSpecifications(ctx); err != nil || len(specs) != 1 {
		t.Errorf("indexes after refused writes: %v %v", specs, err)
	}
}

// TestWireEndpointAllowWrites: with the explicit flag the endpoint accepts writes.
func TestWireEndpointAllowWrites(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Options{TCP: freeAddr(t), AllowWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db := connect(t, s.PublicURI)
	if _, err := db.Collection("contacts").InsertOne(ctx, bson.D{{Key: "name", Value: "Eve"}}); err != nil {
		t.Fatalf("insert with AllowWrites: %v", err)
	}
}
