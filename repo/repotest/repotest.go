// Package repotest holds what the domain's tests share: a store on the
// embedded server with every area registered with the core, as the
// service runs it. An area's tests that need a store are external tests
// (package x_test), since this package links every area and sits above
// them all.
package repotest

import (
	"context"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongoevent "go.mongodb.org/mongo-driver/v2/event"

	"outreach/audit"
	"outreach/embedded"
	"outreach/ledger"
	"outreach/repo"
	_ "outreach/repo/access"
	_ "outreach/repo/directory"
	_ "outreach/repo/dossiers"
	_ "outreach/repo/inbox"
	_ "outreach/repo/mailboxes"
	_ "outreach/repo/notes"
	_ "outreach/repo/notify"
	_ "outreach/repo/outbox"
	_ "outreach/repo/pipeline"
	_ "outreach/repo/pitches"
	_ "outreach/repo/reports"
	_ "outreach/repo/search"
	_ "outreach/repo/textlist"
)

// OpenEmbedded opens a store in ordered mode on a fresh embedded server,
// closed when t ends.
func OpenEmbedded(t *testing.T) *repo.Store {
	t.Helper()
	ctx := context.Background()
	es, err := embedded.Start(ctx, embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(es.Close)
	s, err := repo.Open(ctx, es.URI, "group_test", repo.Options{WriteMode: repo.ModeOrdered, Exclusive: true, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// OpenOrdered opens a store in the ordered protocol, closed when t ends:
// on the server MONGODB_URI names when it is set (a fresh database there,
// as the core's own tests open one: the second engine's pass of the test
// command runs such tests against it), else on a fresh embedded server
// (OpenEmbedded), where a test that drives the ordered protocol switches
// the serial one off itself (the engine's hooks are for tests alone).
func OpenOrdered(t *testing.T) *repo.Store {
	t.Helper()
	uri := os.Getenv("MONGODB_URI")
	if uri == "" {
		return OpenEmbedded(t)
	}
	ctx := context.Background()
	db := "outreach_test_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	s, err := repo.Open(ctx, uri, db, repo.Options{WriteMode: repo.ModeOrdered, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// Ctx is a context with the test actor, as the core's tests write.
func Ctx() context.Context {
	return audit.WithActor(context.Background(), audit.Actor{UserID: "u-test", AgentID: "a-test", SessionID: "s-test", Tool: "test"})
}

// TextOf is up to words words of vocabulary, drawn at random, joined by
// spaces, signs, line breaks or nothing.
func TextOf(rng *rand.Rand, words int, vocabulary []string) string {
	seps := []string{" ", " ", ", ", ".", "-", "\n", "/", ""}
	var b strings.Builder
	for i := range rng.IntN(words + 1) {
		if i > 0 {
			b.WriteString(seps[rng.IntN(len(seps))])
		}
		b.WriteString(vocabulary[rng.IntN(len(vocabulary))])
	}
	return b.String()
}

// PatternCountedStore starts an embedded store for a comparison of the
// word index with the store's pattern: open opens the service's store on
// it (its indexes ready, the checkpoint kept across opens), and patterns
// counts the finds and aggregates sent with a pattern. wait waits for the
// service's indexes to be rebuilt (a test's own: the engine's test hooks
// it reads are called from test files only).
func PatternCountedStore(t *testing.T, db string, wait func(*testing.T, *repo.Store)) (open func() *repo.Store, patterns *atomic.Int64) {
	es, err := embedded.Start(context.Background(), embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(es.Close)
	patterns = &atomic.Int64{}
	monitor := &mongoevent.CommandMonitor{Started: func(_ context.Context, e *mongoevent.CommandStartedEvent) {
		if (e.CommandName == "find" || e.CommandName == "aggregate") && strings.Contains(e.Command.String(), "$regex") {
			patterns.Add(1)
		}
	}}
	return func() *repo.Store {
		s, err := repo.Open(context.Background(), es.URI, db, repo.Options{Logger: zerolog.Nop(), Exclusive: true, PrepareStore: es.IndexIDs,
			IndexCheckpoint: es.IndexCheckpoint(db), Monitor: monitor})
		if err != nil {
			t.Fatal(err)
		}
		wait(t, s)
		return s
	}, patterns
}

// UpdateFixture sets fields of a record through the write path.
func UpdateFixture(t *testing.T, s *repo.Store, coll, id string, set bson.M) {
	t.Helper()
	var cur bson.M
	if err := s.Collection(coll).FindOne(context.Background(), bson.M{"_id": id}).Decode(&cur); err != nil {
		t.Fatal(err)
	}
	v, _ := ledger.AsInt(cur[ledger.FieldVersion])
	before, after := ledger.Strip(cur), ledger.Strip(cur)
	for k, x := range set {
		after[k] = x
	}
	if _, err := s.Write(Ctx(), ledger.Mutation{Coll: coll, ID: id, Action: "update", Before: before, After: after, Version: v}); err != nil {
		t.Fatal(err)
	}
}

// OpenVerified opens a store in the default mode on a fresh embedded
// server, as database db, and returns it with a context of the system
// actor; when t ends, the store's invariants are verified (Verify) and it
// is closed.
func OpenVerified(t *testing.T, db string) (*repo.Store, context.Context) {
	t.Helper()
	ctx := audit.WithActor(context.Background(), repo.SystemActor("directory-test"))
	es, err := embedded.Start(ctx, embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(es.Close)
	s, err := repo.Open(ctx, es.URI, db, repo.Options{Logger: zerolog.Nop(), Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if v, err := s.Verify(context.Background()); err != nil || len(v) > 0 {
			t.Errorf("invariants: %v %+v", err, v)
		}
		s.Close(context.Background())
	})
	return s, ctx
}
