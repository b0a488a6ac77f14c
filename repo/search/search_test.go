package search_test

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/repo"
	"outreach/repo/repotest"
	"outreach/repo/search"
	"outreach/textfold"
)

// searchVocabulary mixes case, accents (precomposed and written apart),
// signs, digits and words inside words.
var searchVocabulary = []string{"Launch", "relaunch", "LAUNCHED", "plan", "Café", "Cafe\u0301", "cafe", "Zoë", "ZOE", "C++", "a.b", "axb",
	"(guide)", "$x", "q-1", "12", "2026", "über", "Йошкар", "мир", "kit", "@example.org", "a", "the", "Ünïcödé", "x"}

func searchText(rng *rand.Rand, words int) string {
	return repotest.TextOf(rng, words, searchVocabulary)
}

// The word index's search gives what the store's pattern gives (hits,
// order, total, snippets, scores) over records of every kind, for queries
// of one word, pieces of words, phrases across word boundaries, accents,
// case and signs, with and without archived records, by type, page by
// page; through updates that change a record's words, and after a restart
// from the index's checkpoint. A query of one word (the common case) asks
// the store for no pattern, and a phrase none when its words are rare.
func TestSearchWordIndexAnswersAsTheStore(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("the service keeps its own indexes for the embedded store only")
	}
	ctx := repotest.Ctx()
	open, patterns := repotest.PatternCountedStore(t, "words", waitIndexes)
	s := open()
	rng := rand.New(rand.NewPCG(29, 250))
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	day := func() time.Time { return base.Add(time.Duration(rng.IntN(400)) * time.Hour) }
	records := map[string][]string{}
	put := func(coll string, fields map[string]any) {
		if rng.IntN(6) == 0 {
			fields["archived_at"] = base
		}
		id, err := s.Fixture(ctx, coll, fields)
		if err != nil {
			t.Fatal(err)
		}
		records[coll] = append(records[coll], id)
	}
	for range 25 {
		put(repo.CollOutlets, map[string]any{"name": searchText(rng, 3), "website": "https://" + searchText(rng, 1) + ".org", "description": searchText(rng, 8),
			"topics": []string{searchText(rng, 2), searchText(rng, 1)}, "updated_at": day()})
		put(repo.CollContacts, map[string]any{"name": searchText(rng, 3), "email": "x@example.org", "title": searchText(rng, 3), "bio": searchText(rng, 10),
			"beats": []string{searchText(rng, 1)}, "location": searchText(rng, 2), "affiliations": bson.A{}, "updated_at": day()})
		put(repo.CollOpportunities, map[string]any{"title": searchText(rng, 3), "description": searchText(rng, 8), "next_action": searchText(rng, 3),
			"stage": "identified", "contact_ids": bson.A{}, "updated_at": day()})
		put(repo.CollCoverage, map[string]any{"title": searchText(rng, 3), "summary": searchText(rng, 8), "url": "https://x.org/" + searchText(rng, 1),
			"full_text": searchText(rng, 20), "published_at": day(), "type": "article", "contact_ids": bson.A{}})
		title := searchText(rng, 3)
		if rng.IntN(3) == 0 {
			title = "" // an untitled note: its first line is its title
		}
		put(repo.CollNotes, map[string]any{"title": title, "content": searchText(rng, 4) + "\n" + searchText(rng, 10), "type": "call",
			"occurred_at": day(), "links": bson.A{}})
		var msgs bson.A
		for range rng.IntN(3) + 1 {
			msgs = append(msgs, bson.M{"id": uuid.NewString(), "message_id": uuid.NewString(), "from": searchText(rng, 2), "to": bson.A{},
				"subject": searchText(rng, 3), "date": day(), "body_text": searchText(rng, 12), "contact_ids": bson.A{}})
		}
		put(repo.CollEmails, map[string]any{"subject": searchText(rng, 3), "messages": msgs, "contact_ids": bson.A{}, "opportunity_links": bson.A{},
			"last_message_at": day()})
	}
	needles := []string{"launch", "LAUNCH", "aunch", "laun", "launch plan", "h p", "cafe", "CAFÉ", "zoe", "ZOË", "c++", "C+", "a.b", "axb", "(guide)",
		"$x", "q-1", "12", "2026", "uber", "йошкар", "иошкар", "мир", "kit", "@example.org", "example", "a", "the", "unicode", "x", "x.org",
		"nowhere", "é", ".", "++", "-", "plan.", ".plan", " plan ", "https://"}
	for _, texts := range records {
		for range 3 {
			var d bson.M
			if err := s.Collection(repo.CollNotes).FindOne(context.Background(), bson.M{"_id": texts[rng.IntN(len(texts))]}).Decode(&d); err == nil {
				c := []rune(d["content"].(string))
				i := rng.IntN(len(c))
				needles = append(needles, string(c[i:min(len(c), i+1+rng.IntN(10))]))
			}
		}
	}
	compare := func(stage string, needles []string) {
		t.Helper()
		for _, needle := range needles {
			if strings.TrimSpace(needle) == "" {
				continue
			}
			for _, q := range []search.SearchQuery{
				{Query: needle, Limit: 200},
				{Query: needle, Limit: 3, Offset: 2, IncludeArchived: true},
				{Query: needle, Limit: 200, Types: []string{"note", "email"}},
			} {
				before := patterns.Load()
				got, err := search.Of(s).Search(ctx, q)
				if err != nil {
					t.Fatalf("%s: %+v: %v", stage, q, err)
				}
				sent := patterns.Load() - before
				want, err := search.Of(s).SearchLiteral(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if s.IndexChecked() { // every search is asked of the store too
					sent -= patterns.Load() - before - sent
				}
				if got.Total != want.Total || !sameHits(got.Hits, want.Hits) {
					t.Errorf("%s: %+v:\nword index %d %+v\nstore      %d %+v", stage, q, got.Total, got.Hits, want.Total, want.Hits)
				}
				if wordsOf := strings.FieldsFunc(textfold.Fold(needle), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }); len(wordsOf) == 1 && wordsOf[0] == textfold.Fold(needle) && sent > 0 {
					t.Errorf("%s: %q asked the store for a pattern %d times", stage, needle, sent)
				}
			}
		}
	}
	compare("created", needles)
	for range 30 { // words leave records and join others
		coll := []string{repo.CollNotes, repo.CollCoverage, repo.CollOutlets}[rng.IntN(3)]
		ids := records[coll]
		set := bson.M{}
		switch coll {
		case repo.CollNotes:
			set["content"] = searchText(rng, 10)
			if rng.IntN(2) == 0 {
				set["title"] = ""
			}
		case repo.CollCoverage:
			set["title"], set["full_text"] = searchText(rng, 3), searchText(rng, 10)
		default:
			set["name"], set["archived_at"] = searchText(rng, 2), nil
		}
		repotest.UpdateFixture(t, s, coll, ids[rng.IntN(len(ids))], set)
	}
	compare("updated", needles)
	if _, err := s.Fixture(ctx, repo.CollNotes, map[string]any{"title": "Budget", "content": "The zanzibar quarterly numbers", "type": "call", "occurred_at": day(), "links": bson.A{}}); err != nil {
		t.Fatal(err)
	}
	before := patterns.Load()
	phrase := search.SearchQuery{Query: "zanzibar quarterl", Limit: 20}
	r, err := search.Of(s).Search(ctx, phrase)
	if err != nil {
		t.Fatal(err)
	}
	n := patterns.Load() - before
	if s.IndexChecked() {
		before = patterns.Load()
		if _, err := search.Of(s).SearchLiteral(ctx, phrase); err != nil {
			t.Fatal(err)
		}
		n -= patterns.Load() - before
	}
	if n > 0 || r.Total != 1 {
		t.Errorf("a phrase of rare words: %d hits, and asked the store for a pattern %d times", r.Total, n)
	}
	s.Close(context.Background())
	s = open()
	defer s.Close(context.Background())
	if !s.Internals().IndexFromCheckpoint() {
		t.Error("the restart did not load the checkpoint")
	}
	compare("restarted from the checkpoint", needles[:12])
}

// sameHits compares hits; scores within the rounding of two calls' clocks.
func sameHits(a, b []search.SearchHit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if math.Abs(x.Score-y.Score) > 0.0011 {
			return false
		}
		x.Score, y.Score = 0, 0
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// waitIndexes waits until the store's indexes are built and the service's
// indexes are not being rebuilt.
func waitIndexes(t *testing.T, s *repo.Store) {
	t.Helper()
	if err := s.IndexesReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); s.Internals().IndexStale(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the service's indexes were not rebuilt within a minute")
		}
	}
}
