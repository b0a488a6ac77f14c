package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/xdg-go/scram"
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
	c, err := mongo.Connect(options.Client().ApplyURI(uri).SetTimeout(20 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(context.Background()) })
	return c.Database("outreach")
}

// testUsers is an Authenticator over fixed passwords.
func testUsers(passwords map[string]string) Authenticator {
	return func(_ context.Context, user string) (Credential, error) {
		pw, ok := passwords[user]
		if !ok {
			return Credential{}, errors.New("unknown user")
		}
		client, err := scram.SHA256.NewClient(user, pw, "")
		if err != nil {
			return Credential{}, err
		}
		c := client.GetStoredCredentials(scram.KeyFactors{Salt: "0123456789abcdef", Iters: 4096})
		return Credential{Salt: []byte(c.Salt), Iterations: c.Iters, StoredKey: c.StoredKey, ServerKey: c.ServerKey}, nil
	}
}

// TestAnalystEndpoint opens the analyst endpoint as serve --mongo-listen
// does and talks to it with the official driver: without credentials only
// the handshake answers; with them reads pass, every kind of write is
// refused with code 13 naming the tools, hidden collections are neither
// listed nor read, and the store is unchanged behind it.
func TestAnalystEndpoint(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Options{Dir: t.TempDir(), TCP: freeAddr(t), Auth: testUsers(map[string]string{"ann": "secret-ann"}), Hidden: []string{"agent_keys"},
		HiddenFields: map[string][]string{"contacts": {"sealed"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close) // after the clients' disconnects, registered later
	if strings.Contains(s.URI, "127.0.0.1") || !strings.Contains(s.URI, ".sock") {
		t.Fatalf("service endpoint %q: want the Unix socket", s.URI)
	}
	service := connect(t, s.URI)
	if _, err := service.Collection("contacts").InsertOne(ctx, bson.D{{Key: "_id", Value: "c1"}, {Key: "name", Value: "Ada"}, {Key: "sealed", Value: bson.D{{Key: "key_hash", Value: "h"}}}}); err != nil {
		t.Fatalf("the service's own endpoint refused a write: %v", err)
	}
	if _, err := service.Collection("agent_keys").InsertOne(ctx, bson.D{{Key: "_id", Value: "k1"}, {Key: "key_hash", Value: "h"}}); err != nil {
		t.Fatal(err)
	}

	anon := connect(t, s.PublicURI)
	if err := anon.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err(); err != nil {
		t.Errorf("ping without credentials: %v", err)
	}
	err = anon.Collection("contacts").FindOne(ctx, bson.D{}).Err()
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(13) || !strings.Contains(err.Error(), "requires authentication") {
		t.Errorf("find without credentials: %v; want code 13, authentication required", err)
	}

	u := strings.Replace(s.PublicURI, "mongodb://", "mongodb://ann:secret-ann@", 1) + "outreach?authMechanism=SCRAM-SHA-256"
	db := connect(t, u)
	var got bson.M
	if err := db.Collection("contacts").FindOne(ctx, bson.D{{Key: "_id", Value: "c1"}}).Decode(&got); err != nil || got["name"] != "Ada" {
		t.Fatalf("find through the analyst endpoint: %v %v", got, err)
	}
	if n, err := db.Collection("contacts").CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Fatalf("count: %d %v", n, err)
	}
	cur, err := db.Collection("contacts").Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{}}}, {{Key: "$count", Value: "n"}}})
	if err != nil {
		t.Fatalf("aggregate: %v", err)
	}
	var counted []bson.M
	if err := cur.All(ctx, &counted); err != nil || len(counted) != 1 {
		t.Fatalf("aggregate result %v %v", counted, err)
	}
	if names, err := db.ListCollectionNames(ctx, bson.D{}); err != nil || fmt.Sprint(names) != "[contacts]" {
		t.Errorf("listCollections: %v %v; want contacts alone (agent_keys hidden)", names, err)
	}
	if err := db.Collection("agent_keys").FindOne(ctx, bson.D{}).Err(); !errors.As(err, &se) || !se.HasErrorCode(13) || !strings.Contains(err.Error(), "secrets") {
		t.Errorf("find on a hidden collection: %v; want code 13", err)
	}
	if _, err := db.Collection("contacts").Aggregate(ctx, mongo.Pipeline{{{Key: "$lookup", Value: bson.D{{Key: "from", Value: "agent_keys"}, {Key: "localField", Value: "_id"}, {Key: "foreignField", Value: "_id"}, {Key: "as", Value: "k"}}}}}); !errors.As(err, &se) || !se.HasErrorCode(13) {
		t.Errorf("$lookup of a hidden collection: %v; want it refused", err)
	}

	// A hidden field is in no answer, and a command naming it is refused.
	for name, read := range map[string]func() ([]bson.M, error){
		"find": func() ([]bson.M, error) {
			var out []bson.M
			cur, err := db.Collection("contacts").Find(ctx, bson.D{})
			if err == nil {
				err = cur.All(ctx, &out)
			}
			return out, err
		},
		"find excluding name": func() ([]bson.M, error) {
			var out []bson.M
			cur, err := db.Collection("contacts").Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "name", Value: 0}}))
			if err == nil {
				err = cur.All(ctx, &out)
			}
			return out, err
		},
		"aggregate": func() ([]bson.M, error) {
			var out []bson.M
			cur, err := db.Collection("contacts").Aggregate(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{}}}})
			if err == nil {
				err = cur.All(ctx, &out)
			}
			return out, err
		},
	} {
		docs, err := read()
		if err != nil || len(docs) != 1 || docs[0]["sealed"] != nil {
			t.Errorf("%s: %v %v; want the document without its hidden field", name, docs, err)
		}
	}
	for name, read := range map[string]func() error{
		"projection": func() error {
			return db.Collection("contacts").FindOne(ctx, bson.D{}, options.FindOne().SetProjection(bson.D{{Key: "sealed", Value: 1}})).Err()
		},
		"filter": func() error {
			return db.Collection("contacts").FindOne(ctx, bson.D{{Key: "sealed.key_hash", Value: "h"}}).Err()
		},
		"distinct": func() error { return db.Collection("contacts").Distinct(ctx, "sealed", bson.D{}).Err() },
		"aggregate": func() error {
			_, err := db.Collection("contacts").Aggregate(ctx, mongo.Pipeline{{{Key: "$project", Value: bson.D{{Key: "x", Value: "$sealed"}}}}})
			return err
		},
	} {
		if err := read(); !errors.As(err, &se) || !se.HasErrorCode(13) || !strings.Contains(err.Error(), "not shown") {
			t.Errorf("%s naming a hidden field: %v; want code 13", name, err)
		}
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
		if !errors.As(err, &se) || !se.HasErrorCode(13) || !strings.Contains(err.Error(), "read-only") && !strings.Contains(err.Error(), "explain") {
			t.Errorf("%s through the analyst endpoint: %v; want code 13", name, err)
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
	if names, err := service.ListCollectionNames(ctx, bson.D{}); err != nil || len(names) != 2 {
		t.Errorf("collections after refused writes: %v %v", names, err)
	}
	if specs, err := service.Collection("contacts").Indexes().ListSpecifications(ctx); err != nil || len(specs) != 1 {
		t.Errorf("indexes after refused writes: %v %v", specs, err)
	}
}
