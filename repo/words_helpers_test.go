package repo

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongoevent "go.mongodb.org/mongo-driver/v2/event"

	"outreach/embedded"
	"outreach/ledger"
)

// Helpers of the core's comparisons of the word index with the store's
// pattern (list_text_test.go). Package repotest holds their twins for the
// areas' tests (repo/search), which the core's own tests cannot import.

// searchVocabulary (twin of repo/search's, which its tests use) mixes case, accents (precomposed and written apart),
// signs, digits and words inside words.
var searchVocabulary = []string{"Launch", "relaunch", "LAUNCHED", "plan", "Café", "Cafe\u0301", "cafe", "Zoë", "ZOE", "C++", "a.b", "axb",
	"(guide)", "$x", "q-1", "12", "2026", "über", "Йошкар", "мир", "kit", "@example.org", "a", "the", "Ünïcödé", "x"}

// textOf is up to words words of vocabulary, drawn at random, joined by
// spaces, signs, line breaks or nothing.
func textOf(rng *rand.Rand, words int, vocabulary []string) string {
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

// patternCountedStore starts an embedded store for a comparison of the
// word index with the store's pattern: open opens the service's store on
// it (its indexes ready, the checkpoint kept across opens), and patterns
// counts the finds and aggregates sent with a pattern.
func patternCountedStore(t *testing.T, db string) (open func() *Store, patterns *atomic.Int64) {
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
	return func() *Store {
		s, err := Open(context.Background(), es.URI, db, Options{Logger: zerolog.Nop(), Exclusive: true, PrepareStore: es.IndexIDs,
			IndexCheckpoint: es.IndexCheckpoint(db), Monitor: monitor})
		if err != nil {
			t.Fatal(err)
		}
		waitIndexes(t, s)
		return s
	}, patterns
}

// updateFixture sets fields of a record through the write path.
func updateFixture(t *testing.T, s *Store, coll, id string, set bson.M) {
	t.Helper()
	var cur bson.M
	if err := s.coll(coll).FindOne(context.Background(), bson.M{"_id": id}).Decode(&cur); err != nil {
		t.Fatal(err)
	}
	v, _ := ledger.AsInt(cur[fieldVersion])
	before, after := ledger.Strip(cur), ledger.Strip(cur)
	for k, x := range set {
		after[k] = x
	}
	if _, err := s.write(testCtx(), mutation{Coll: coll, ID: id, Action: "update", Before: before, After: after, Version: v}); err != nil {
		t.Fatal(err)
	}
}
