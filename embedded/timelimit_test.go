package embedded

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// fakeStore stands for the store behind the gate: it answers every command
// at once with ok, except a distinct, whose answer waits until release is
// closed, and it keeps what it was sent.
type fakeStore struct {
	mu      sync.Mutex
	got     []bson.D
	release chan struct{}
}

func (f *fakeStore) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			for {
				msg, err := readMessage(c, maxReply)
				if err != nil {
					return
				}
				req, ok := parseRequest(msg)
				if !ok {
					return
				}
				f.mu.Lock()
				f.got = append(f.got, req.cmd)
				f.mu.Unlock()
				answer := bson.D{{Key: "ok", Value: 1.0}}
				switch strings.ToLower(req.cmd[0].Key) {
				case "hello", "ismaster":
					answer = bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "maxWireVersion", Value: int32(17)}, {Key: "minWireVersion", Value: int32(0)}, {Key: "ok", Value: 1.0}}
				case "distinct":
					<-f.release
					answer = bson.D{{Key: "values", Value: bson.A{"late"}}, {Key: "ok", Value: 1.0}}
				case "count":
					answer = bson.D{{Key: "n", Value: int32(7)}, {Key: "ok", Value: 1.0}}
				}
				if _, err := c.Write(replyDoc(req, answer)); err != nil {
					return
				}
			}
		}()
	}
}

// last is the last command the store was sent named name.
func (f *fakeStore) last(name string) bson.D {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.got) - 1; i >= 0; i-- {
		if f.got[i][0].Key == name {
			return f.got[i]
		}
	}
	return nil
}

// gateOnFakeStore opens the analyst endpoint in front of a fake store and
// connects to it as user ann, on one connection.
func gateOnFakeStore(t *testing.T) (*mongo.Database, *fakeStore) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "store.sock")
	storeLn, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	store := &fakeStore{release: make(chan struct{})}
	go store.serve(storeLn)
	gateLn, err := net.Listen("tcp", freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(gateLn, sock, testUsers(map[string]string{"ann": "pw-ann"}), nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go g.serve()
	// Cleanups run last first: the client disconnects, the distinct still
	// held is answered, the gate closes, then the store.
	t.Cleanup(func() { storeLn.Close() })
	t.Cleanup(g.close)
	t.Cleanup(func() {
		select {
		case <-store.release:
		default:
			close(store.release)
		}
	})
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://ann:pw-ann@" + gateLn.Addr().String() + "/outreach?authMechanism=SCRAM-SHA-256").SetMaxPoolSize(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Disconnect(context.Background()) })
	return client.Database("outreach"), store
}

// TestAnalystTimeLimitReachesTheStore: every command the endpoint forwards
// carries to the store the time limit the store enforces itself (find and
// aggregate: the client's maxTimeMS when below MaxTime, else MaxTime), and
// no maxTimeMS where the gate enforces it (the embedded store refuses it on
// distinct and ignores it on count).
func TestAnalystTimeLimitReachesTheStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, store := gateOnFakeStore(t)
	close(store.release) // distinct answers at once here
	max := MaxTime.Milliseconds()
	commands := []bson.D{
		{{Key: "find", Value: "c"}},
		{{Key: "aggregate", Value: "c"}, {Key: "pipeline", Value: bson.A{}}, {Key: "cursor", Value: bson.D{}}},
		{{Key: "count", Value: "c"}},
		{{Key: "distinct", Value: "c"}, {Key: "key", Value: "stage"}},
		{{Key: "explain", Value: bson.D{{Key: "distinct", Value: "c"}, {Key: "key", Value: "stage"}}}},
		{{Key: "listCollections", Value: 1}},
		{{Key: "listIndexes", Value: "c"}},
		{{Key: "dbStats", Value: 1}},
		{{Key: "collStats", Value: "c"}},
		{{Key: "dataSize", Value: "outreach.c"}},
		{{Key: "listDatabases", Value: 1}},
		{{Key: "serverStatus", Value: 1}},
	}
	for _, cmd := range commands {
		name := cmd[0].Key
		want := map[string]any{"none": nil, "500": nil, "0": nil, "120000": nil}
		if engineBounded[strings.ToLower(name)] {
			want = map[string]any{"none": max, "500": int64(500), "0": max, "120000": max}
		}
		for client, ms := range map[string]any{"none": nil, "500": int32(500), "0": int32(0), "120000": 120000.0} {
			send := append(bson.D(nil), cmd...)
			if ms != nil {
				send = append(send, bson.E{Key: "maxTimeMS", Value: ms})
			}
			if err := db.RunCommand(ctx, send).Err(); err != nil {
				t.Errorf("%s, client's maxTimeMS %s: %v", name, client, err)
				continue
			}
			got := lookup(store.last(name), "maxTimeMS")
			if diff := cmp.Diff(want[client], got); diff != "" {
				t.Errorf("%s, client's maxTimeMS %s: the store's maxTimeMS (-want +got):\n%s", name, client, diff)
			}
		}
	}
}

// TestAnalystTimeLimitWhereTheStoreHasNone: a distinct the store does not
// answer within the client's maxTimeMS is answered by the gate with
// MaxTimeMSExpired (code 50), and the connection goes on: its next command
// is answered, not the late distinct's answer.
func TestAnalystTimeLimitWhereTheStoreHasNone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, store := gateOnFakeStore(t)
	err := db.RunCommand(ctx, bson.D{{Key: "distinct", Value: "opportunities"}, {Key: "key", Value: "stage"}, {Key: "maxTimeMS", Value: int32(50)}}).Err()
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(codeMaxTimeMSExpired) || !strings.Contains(err.Error(), "operation exceeded time limit") || !strings.Contains(err.Error(), "after 50 ms") {
		t.Fatalf("a distinct past its maxTimeMS: %v; want code 50, operation exceeded time limit after 50 ms", err)
	}
	if got := lookup(store.last("distinct"), "maxTimeMS"); got != nil {
		t.Errorf("the store was sent maxTimeMS %v with distinct; it refuses it", got)
	}
	close(store.release) // the store finishes the distinct late
	var counted struct{ N int }
	if err := db.RunCommand(ctx, bson.D{{Key: "count", Value: "opportunities"}}).Decode(&counted); err != nil || counted.N != 7 {
		t.Errorf("the next command on the connection: %+v %v; want the count's answer, 7", counted, err)
	}
}

// TestAnalystTimeLimit: a client's maxTimeMS is honoured below the
// endpoint's bound and never lifts it.
func TestAnalystTimeLimit(t *testing.T) {
	for _, c := range []struct {
		name string
		cmd  bson.D
		want time.Duration
	}{
		{"none", bson.D{{Key: "distinct", Value: "c"}}, MaxTime},
		{"smaller, int32", bson.D{{Key: "distinct", Value: "c"}, {Key: "maxTimeMS", Value: int32(1500)}}, 1500 * time.Millisecond},
		{"smaller, double", bson.D{{Key: "count", Value: "c"}, {Key: "maxTimeMS", Value: 250.0}}, 250 * time.Millisecond},
		{"the bound itself", bson.D{{Key: "find", Value: "c"}, {Key: "maxTimeMS", Value: MaxTime.Milliseconds()}}, MaxTime},
		{"larger", bson.D{{Key: "distinct", Value: "c"}, {Key: "maxTimeMS", Value: int64(3_600_000)}}, MaxTime},
		{"0, no limit on MongoDB", bson.D{{Key: "distinct", Value: "c"}, {Key: "maxTimeMS", Value: int32(0)}}, MaxTime},
		{"negative", bson.D{{Key: "distinct", Value: "c"}, {Key: "maxTimeMS", Value: int32(-5)}}, MaxTime},
		{"not a number", bson.D{{Key: "distinct", Value: "c"}, {Key: "maxTimeMS", Value: "5"}}, MaxTime},
	} {
		if got := timeLimit(c.cmd); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
