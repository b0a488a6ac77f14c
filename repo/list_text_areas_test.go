package repo_test

import (
	"context"
	"errors"
	"fmt"
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
	"outreach/repo/directory"
	"outreach/repo/inbox"
	"outreach/repo/notes"
	"outreach/repo/pipeline"
	"outreach/repo/repotest"
	"outreach/textfold"
)

// The lists' free-text filters of every area compared with the store's
// pattern: an external test of the core, which sits above every area.

// listSearchVocabulary is search's (repo/search's tests): case, accents
// (precomposed and written apart), signs, digits and words inside words.
var listSearchVocabulary = []string{"Launch", "relaunch", "LAUNCHED", "plan", "Café", "Cafe\u0301", "cafe", "Zoë", "ZOE", "C++", "a.b", "axb",
	"(guide)", "$x", "q-1", "12", "2026", "über", "Йошкар", "мир", "kit", "@example.org", "a", "the", "Ünïcödé", "x"}

// listTextVocabulary adds to search's the characters whose case classes
// hold more than two (ſ and S, the Kelvin sign and K, ς and Σ), so that a
// match in any case is tested where folding and case differ.
var listTextVocabulary = append(append([]string{}, listSearchVocabulary...), "ſpring", "SPRING", "\u212Aelvin", "kelvin", "ΣΟΦΟΣ", "σοφος",
	"jane@example.org", "JANE", "Ǆemal")

func listText(rng *rand.Rand, words int) string {
	return repotest.TextOf(rng, words, listTextVocabulary)
}

// Every list's free-text filter (list_notes, list_contacts, list_outlets,
// list_campaigns, list_opportunities, list_coverage search; search_emails
// query) answers from the word index what the store's pattern answers:
// the same records, order and total, for one word, pieces of words,
// phrases, signs, any case, accents, with and without archived records,
// page by page; through updates and after a restart from the checkpoint.
// A text of one word asks the store for no pattern.
func TestListTextWordIndexAnswersAsTheStore(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("the service keeps its own indexes for the embedded store only")
	}
	ctx := repotest.Ctx()
	open, patterns := repotest.PatternCountedStore(t, "lists", waitIndexes)
	s := open()
	rng := rand.New(rand.NewPCG(41, 7))
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	day := func() time.Time { return base.Add(time.Duration(rng.IntN(400)) * time.Hour) }
	records := map[string][]string{}
	put := func(coll string, fields map[string]any) {
		if rng.IntN(6) == 0 {
			fields["archived_at"] = base
		}
		fields["created_at"] = day()
		id, err := s.Fixture(ctx, coll, fields)
		if err != nil {
			t.Fatal(err)
		}
		records[coll] = append(records[coll], id)
	}
	for range 30 {
		put(repo.CollOutlets, map[string]any{"name": listText(rng, 3), "website": "https://" + listText(rng, 1) + ".org", "description": listText(rng, 8),
			"topics": []string{listText(rng, 1)}})
		put(repo.CollContacts, map[string]any{"name": listText(rng, 3), "email": listText(rng, 1) + "@example.org", "title": listText(rng, 3),
			"bio": listText(rng, 10), "beats": []string{listText(rng, 1)}, "affiliations": bson.A{}})
		put(repo.CollCampaigns, map[string]any{"name": listText(rng, 3), "description": listText(rng, 8), "goals": listText(rng, 4), "status": "active"})
		put(repo.CollOpportunities, map[string]any{"title": listText(rng, 3), "description": listText(rng, 8), "next_action": listText(rng, 3),
			"stage": "researching", "contact_ids": bson.A{}})
		put(repo.CollCoverage, map[string]any{"title": listText(rng, 3), "summary": listText(rng, 8), "url": "https://x.org/" + listText(rng, 1),
			"full_text": listText(rng, 20), "published_at": day(), "type": "article", "contact_ids": bson.A{}})
		put(repo.CollNotes, map[string]any{"title": listText(rng, 3), "content": listText(rng, 12), "type": "meeting", "occurred_at": day(), "links": bson.A{}})
		var msgs bson.A
		for range rng.IntN(3) + 1 {
			msgs = append(msgs, bson.M{"id": uuid.NewString(), "message_id": uuid.NewString(), "from": listText(rng, 2), "to": bson.A{},
				"subject": listText(rng, 3), "date": day(), "body_text": listText(rng, 12), "contact_ids": bson.A{}})
		}
		put(repo.CollEmails, map[string]any{"subject": listText(rng, 3), "messages": msgs, "contact_ids": bson.A{}, "opportunity_links": bson.A{},
			"last_message_at": day()})
	}
	needles := []string{"launch", "LAUNCH", "aunch", "laun", "launch plan", "h p", "cafe", "CAFÉ", "café", "zoe", "ZOË", "c++", "a.b", "(guide)",
		"$x", "q-1", "12", "2026", "uber", "über", "йошкар", "мир", "kit", "@example.org", "example", "a", "the", "x", "x.org", "nowhere",
		".", "-", "plan.", " plan ", "https://", "spring", "SPRING", "ſpring", "kelvin", "KELVIN", "\u212Aelvin", "σοφος", "ΣΟΦΟΣ", "σοφοσ",
		"jane", "JANE@", "ǅemal", "ǆ", "e\u0301"}
	type lister struct {
		name string
		list func(needle string, archived bool, limit, offset int) (any, error)
	}
	page := func(p any, err error) (any, error) { return p, err }
	listers := []lister{
		{"list_notes", func(n string, a bool, l, o int) (any, error) {
			return page(notes.Of(s).ListNotes(ctx, notes.NoteFilter{Search: n, IncludeArchived: a}, l, o))
		}},
		{"list_contacts", func(n string, a bool, l, o int) (any, error) {
			return page(directory.Of(s).ListContacts(ctx, directory.ContactFilter{Search: n, IncludeArchived: a}, l, o))
		}},
		{"list_outlets", func(n string, a bool, l, o int) (any, error) {
			return page(directory.Of(s).ListOutlets(ctx, directory.OutletFilter{Search: n, IncludeArchived: a}, l, o))
		}},
		{"list_campaigns", func(n string, a bool, l, o int) (any, error) {
			return page(pipeline.Of(s).ListCampaigns(ctx, pipeline.CampaignFilter{Search: n, IncludeArchived: a}, l, o))
		}},
		{"list_opportunities", func(n string, a bool, l, o int) (any, error) {
			return page(pipeline.Of(s).ListOpportunities(ctx, pipeline.OpportunityFilter{Search: n, IncludeArchived: a}, l, o))
		}},
		{"list_coverage", func(n string, a bool, l, o int) (any, error) {
			return page(pipeline.Of(s).ListCoverage(ctx, pipeline.CoverageFilter{Search: n, IncludeArchived: a}, l, o))
		}},
		{"search_emails", func(n string, _ bool, l, _ int) (any, error) {
			total, hits, err := inbox.Of(s).SearchEmails(ctx, n, l)
			return fmt.Sprint(total, hits), err
		}},
	}
	compare := func(stage string) {
		t.Helper()
		for _, needle := range needles {
			words := strings.FieldsFunc(textfold.Fold(needle), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
			oneWord := len(words) == 1 && words[0] == textfold.Fold(needle)
			for _, l := range listers {
				for _, q := range []struct {
					archived      bool
					limit, offset int
				}{{false, 200, 0}, {true, 3, 2}} {
					before := patterns.Load()
					got, err := l.list(needle, q.archived, q.limit, q.offset)
					if err != nil {
						t.Fatalf("%s: %s %q: %v", stage, l.name, needle, err)
					}
					sent := patterns.Load() - before
					repo.TextByPattern(s).Store(true)
					want, err := l.list(needle, q.archived, q.limit, q.offset)
					repo.TextByPattern(s).Store(false)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Errorf("%s: %s %q %+v:\nword index %+v\nstore      %+v", stage, l.name, needle, q, got, want)
					}
					// With the index check on, each answer is asked of the
					// store's pattern as well: one find more.
					if s.IndexChecked() {
						sent--
					}
					if oneWord && sent > 0 {
						t.Errorf("%s: %s %q asked the store for a pattern %d times", stage, l.name, needle, sent)
					}
				}
			}
		}
	}
	compare("created")
	for range 40 { // words leave records and join others
		coll := []string{repo.CollNotes, repo.CollCoverage, repo.CollContacts, repo.CollCampaigns, repo.CollEmails}[rng.IntN(5)]
		id := records[coll][rng.IntN(len(records[coll]))]
		set := bson.M{}
		switch coll {
		case repo.CollNotes:
			set["content"] = listText(rng, 10)
		case repo.CollCoverage:
			set["summary"], set["full_text"] = listText(rng, 6), listText(rng, 10)
		case repo.CollContacts:
			set["name"] = listText(rng, 2)
		case repo.CollCampaigns:
			set["description"] = listText(rng, 6)
		case repo.CollEmails:
			set["messages"] = bson.A{bson.M{"id": uuid.NewString(), "message_id": uuid.NewString(), "from": listText(rng, 2), "to": bson.A{},
				"subject": listText(rng, 3), "date": day(), "body_text": listText(rng, 12), "contact_ids": bson.A{}}}
		}
		repotest.UpdateFixture(t, s, coll, id, set)
	}
	compare("updated")
	s.Close(context.Background())
	s = open()
	defer s.Close(context.Background())
	if !s.Internals().IndexFromCheckpoint() {
		t.Error("the restart did not load the checkpoint")
	}
	needles = needles[:15]
	compare("restarted from the checkpoint")
}

// Where the word index cannot answer (a text without a letter or digit),
// the store's pattern is asked, and a scan past its bound is a clear,
// retryable unavailable naming the parameter, not an internal error, on
// a list and on search_emails alike.
func TestListTextPatternIsBounded(t *testing.T) {
	s, ctx := repotest.OpenVerified(t, "directory_test")
	if _, err := s.Fixture(ctx, repo.CollNotes, map[string]any{"title": "a@b", "content": "x", "type": "meeting", "occurred_at": time.Now(), "links": bson.A{}}); err != nil {
		t.Fatal(err)
	}
	waitIndexes(t, s)
	p, err := notes.Of(s).ListNotes(ctx, notes.NoteFilter{Search: "@"}, 10, 0)
	if err != nil || p.Total != 1 {
		t.Fatalf("within the bound: %+v, %v", p, err)
	}
	defer func(d time.Duration) { *repo.PatternBound = d }(*repo.PatternBound)
	*repo.PatternBound = time.Nanosecond
	for name, call := range map[string]func() error{
		"search": func() error { _, err := notes.Of(s).ListNotes(ctx, notes.NoteFilter{Search: "@"}, 10, 0); return err },
		"query":  func() error { _, _, err := inbox.Of(s).SearchEmails(ctx, "@", 10); return err },
	} {
		err := call()
		var e *repo.Error
		if !errors.As(err, &e) || e.Code != repo.CodeUnavailable || e.Field != name || !e.Retryable || !strings.Contains(e.Message, "took longer than 1ns") {
			t.Errorf("%s past the bound: %v", name, err)
		}
	}
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
