package integration

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/search"
)

type searchResult struct {
	Total      int    `json:"total"`
	Showing    int    `json:"showing"`
	SearchPath string `json:"search_path"`
	Hits       []struct {
		Type      string    `json:"type"`
		ID        string    `json:"id"`
		Title     string    `json:"title"`
		Snippet   string    `json:"snippet"`
		Score     float64   `json:"score"`
		MatchedIn []string  `json:"matched_in"`
		Date      time.Time `json:"date"`
		Archived  bool      `json:"archived"`
	} `json:"hits"`
}

// searchWorld makes records of every kind through their tools (email
// threads, which have no tools yet, through Store.Fixture) and returns the
// id of each by a short name.
func searchWorld(t *testing.T, env *testenv.Env) map[string]string {
	t.Helper()
	c := env.Admin()
	ids := map[string]string{}
	ids["outlet-launch"] = mk(t, c, "create_outlet", M{"name": "Launch Daily", "description": "A daily paper"})
	ids["outlet-cafe"] = mk(t, c, "create_outlet", M{"name": "Café Weekly", "description": "Coffee news"})
	ids["outlet-decomposed"] = mk(t, c, "create_outlet", M{"name": "Cre\u0301me Monthly"}) // é as e + a combining accent
	ids["contact-editor"] = mk(t, c, "create_contact", M{"first_name": "Zoë", "last_name": "Kent", "title": "Relaunches editor"})
	ids["opp-launch"] = mk(t, c, "create_opportunity", M{"title": "Launch feature", "description": "The big one"})
	ids["opp-archived"] = mkArchived(t, c, "opportunity", M{"title": "Launch archived"})
	ids["note-relaunch"] = mk(t, c, "create_note", M{"title": "Relaunch", "content": "plans", "occurred_at": "2026-03-01", "outlet_ids": []string{ids["outlet-cafe"]}})
	ids["note-body"] = mk(t, c, "create_note", M{"title": "Call", "content": "We talked.\nAbout the launch plan, at length.", "occurred_at": "2026-04-03", "outlet_ids": []string{ids["outlet-cafe"]}})
	ids["cov-fragment"] = mk(t, c, "create_coverage", M{"title": "Product story", "summary": "They relaunched the product", "published_at": "2026-04-04"})
	ids["note-dot"] = mk(t, c, "create_note", M{"title": "Version a.b notes", "content": "C++ (guide) for $x", "occurred_at": "2026-02-01", "outlet_ids": []string{ids["outlet-cafe"]}})
	ids["note-axb"] = mk(t, c, "create_note", M{"title": "Version axb notes", "content": "C guide for x", "occurred_at": "2026-02-02", "outlet_ids": []string{ids["outlet-cafe"]}})
	ctx := audit.WithActor(context.Background(), repo.SystemActor("fixtures"))
	id, err := env.Store.Fixture(ctx, "email_threads", map[string]any{"subject": "Re: launch kit", "contact_ids": []string{}, "opportunity_links": []any{},
		"last_message_at": time.Date(2026, 4, 2, 10, 0, 0, 0, time.UTC),
		"messages": []map[string]any{{"id": uuid.NewString(), "message_id": "<kit@mail>", "from": "a@example.com", "to": []string{"b@example.com"},
			"subject": "Re: launch kit", "date": time.Date(2026, 4, 2, 10, 0, 0, 0, time.UTC), "body_text": "Here is the kit", "contact_ids": []string{}}}})
	if err != nil {
		t.Fatal(err)
	}
	ids["email-kit"] = id
	return ids
}

func TestSearch(t *testing.T) {
	env := testenv.New(t)
	ids := searchWorld(t, env)
	names := map[string]string{}
	for k, v := range ids {
		names[v] = k
	}
	c := env.Admin()
	run := func(args M) (searchResult, []string) {
		t.Helper()
		var r searchResult
		c.Must("search", args, &r)
		got := []string{}
		for _, h := range r.Hits {
			got = append(got, names[h.ID])
		}
		if r.Showing != len(r.Hits) {
			t.Errorf("showing %d for %d hits", r.Showing, len(r.Hits))
		}
		return r, got
	}

	// Ranking: a match in the name or title first, then whole words, then
	// the most recent. "launch" is a whole word in the titles of the
	// opportunity (made after the outlet, so more recent), the outlet and
	// the email (dated April); a fragment in the title "Relaunch"; a whole
	// word in a note's content; a fragment in the contact's job title
	// (updated now) and the coverage summary (published in April).
	all := []string{"opp-launch", "outlet-launch", "email-kit", "note-relaunch", "note-body", "contact-editor", "cov-fragment"}
	r, got := run(M{"query": "LAUNCH"})
	if diff := cmp.Diff(all, got); diff != "" {
		t.Errorf("ranking (-want +got):\n%s", diff)
	}
	if r.Total != len(all) {
		t.Errorf("total %d, want %d", r.Total, len(all))
	}
	// Each score is 4 (title) + 2 (whole words) + recency, recency = 1/(1 + age in days/30).
	now := time.Now()
	for _, h := range r.Hits {
		tier := map[string]float64{"opp-launch": 6, "outlet-launch": 6, "email-kit": 6, "note-relaunch": 4, "note-body": 2, "contact-editor": 0, "cov-fragment": 0}[names[h.ID]]
		want := tier + 1/(1+math.Max(now.Sub(h.Date).Hours()/24, 0)/30)
		if math.Abs(h.Score-want) > 0.002 {
			t.Errorf("%s: score %v, want %v", names[h.ID], h.Score, want)
		}
	}
	byName := map[string]int{}
	for i, h := range r.Hits {
		byName[names[h.ID]] = i
	}
	hit := func(name string) any {
		h := r.Hits[byName[name]]
		return []any{h.Type, h.Title, h.Snippet, h.MatchedIn}
	}
	for _, tc := range []struct {
		name string
		want []any
	}{
		{"note-body", []any{"note", "Call", "We talked. About the launch plan, at length.", []string{"content"}}},
		{"cov-fragment", []any{"coverage", "Product story", "They relaunched the product", []string{"summary"}}},
		{"contact-editor", []any{"contact", "Zoë Kent", "Relaunches editor", []string{"title"}}},
		{"email-kit", []any{"email", "Re: launch kit", "Re: launch kit", []string{"subject", "messages.subject"}}},
		{"opp-launch", []any{"opportunity", "Launch feature", "Launch feature", []string{"title"}}},
	} {
		if diff := cmp.Diff(tc.want, hit(tc.name)); diff != "" {
			t.Errorf("%s hit (-want +got):\n%s", tc.name, diff)
		}
	}

	// Paging keeps the ranking; types restrict the kinds.
	if _, got := run(M{"query": "launch", "limit": 2, "offset": 2}); !cmp.Equal(got, all[2:4]) {
		t.Errorf("page 2 of 2: %v, want %v", got, all[2:4])
	}
	if _, got := run(M{"query": "launch", "types": []string{"note", "coverage"}}); !cmp.Equal(got, []string{"note-relaunch", "note-body", "cov-fragment"}) {
		t.Errorf("types note, coverage: %v", got)
	}
	// Archived records are left out unless asked for.
	r, got = run(M{"query": "launch archived", "include_archived": true})
	if !cmp.Equal(got, []string{"opp-archived"}) || !r.Hits[0].Archived {
		t.Errorf("include_archived: %v %+v", got, r.Hits)
	}
	if _, got := run(M{"query": "launch archived"}); len(got) != 0 {
		t.Errorf("archived record found without include_archived: %v", got)
	}

	// The query is literal: pattern characters are characters.
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"a.b", []string{"note-dot"}},
		{"C++", []string{"note-dot"}},
		{"(guide)", []string{"note-dot"}},
		{"$x", []string{"note-dot"}},
		{".*", []string{}},
		{"a|x", []string{}},
		{"[ab]", []string{}},
		{"axb", []string{"note-axb"}},
		// Inside an email's messages.
		{"HERE IS THE KIT", []string{"email-kit"}},
		// Case and accents are ignored both ways.
		{"cafe", []string{"outlet-cafe"}},
		{"CAFÉ WEEKLY", []string{"outlet-cafe"}},
		{"zoe", []string{"contact-editor"}},
		{"ZOË KENT", []string{"contact-editor"}},
		{"creme monthly", []string{"outlet-decomposed"}},
		{"CRÈME", []string{"outlet-decomposed"}},
	} {
		if _, got := run(M{"query": tc.query}); !cmp.Equal(got, tc.want) {
			t.Errorf("query %q: %v, want %v", tc.query, got, tc.want)
		}
	}

	for _, tc := range []struct {
		args  M
		field string
	}{
		{M{"query": "  "}, "query"},
		{M{}, "query"},
		{M{"query": "x", "types": []string{"planet"}}, "types"},
		{M{"query": "x", "limit": 201}, "limit"},
		{M{"query": string(make([]byte, 201))}, "query"},
		{M{"query": "x", "kinds": []string{"note"}}, "kinds"},
	} {
		if e := c.Fail("search", tc.args, "invalid_argument"); e.Field != tc.field {
			t.Errorf("%v: field %q, want %q (%s)", tc.args, e.Field, tc.field, e.Message)
		}
	}
}

// TestSearchPathsAgree compares the text-index path with the literal path on
// the same records, where the server has text search (MongoDB): the same
// hits for whole words.
func TestSearchPathsAgree(t *testing.T) {
	env := testenv.New(t)
	if !env.Store.Capabilities().TextSearch {
		t.Skip("this server's text search did not pass its probe (none on the embedded store; on FerretDB v2 the text index does not fold accents, see TestSearchTextPathAgreesWithoutAccents): compared where MongoDB runs")
	}
	comparePaths(t, env, []string{"launch", "LAUNCH", "cafe", "Café Weekly", "zoe", "kit", "launch plan", "guide", "product story", "nothing here"})
}

// TestSearchTextPathAgreesWithoutAccents runs the text-index path where the
// server has a text index that folds case but not accents (FerretDB v2 on
// DocumentDB), so the probe keeps search on the literal path: forced on, the
// text path must find exactly the literal path's whole-word hits for words
// without accents. Where text search passes its probe, TestSearchPathsAgree
// covers this and accents too.
func TestSearchTextPathAgreesWithoutAccents(t *testing.T) {
	probe := testenv.New(t)
	switch caps := probe.Store.Capabilities(); {
	case caps.TextSearch:
		t.Skip("this server's text search passes its probe: TestSearchPathsAgree compares the paths, accents included")
	case !caps.TextIndex:
		t.Skip("this server has no text index (the embedded store): only the literal path runs")
	}
	env := testenv.NewWith(t, testenv.Options{TextSearch: "on"})
	if !env.Store.Capabilities().TextSearch {
		t.Fatal("text search forced on, but the service's own text indexes failed their probe")
	}
	comparePaths(t, env, []string{"launch", "LAUNCH", "kit", "launch plan", "guide", "product story", "weekly", "nothing here"})
}

// comparePaths searches each query on both paths over searchWorld's records.
func comparePaths(t *testing.T, env *testenv.Env, queries []string) {
	t.Helper()
	searchWorld(t, env)
	ctx := context.Background()
	for _, q := range queries {
		sq := search.SearchQuery{Query: q, Limit: 200, IncludeArchived: true}
		a, err := search.Of(env.Store).Search(ctx, sq)
		if err != nil {
			t.Fatal(err)
		}
		if a.Path != "text" {
			t.Errorf("%q: took the %s path", q, a.Path)
		}
		b, err := search.Of(env.Store).SearchLiteral(ctx, sq)
		if err != nil {
			t.Fatal(err)
		}
		// A fragment of a word ("launch" in "relaunched") is not a word of
		// the text index: the text path finds exactly the literal path's
		// whole-word hits.
		whole := []search.SearchHit{}
		for _, h := range b.Hits {
			if h.WholeWord {
				whole = append(whole, h)
			}
		}
		b.Hits, b.Total = whole, len(whole)
		a.Path, b.Path = "", ""
		if diff := cmp.Diff(b, a, cmpopts.EquateApprox(0, 0.002)); diff != "" {
			t.Errorf("%q: text path differs from literal path (-literal +text):\n%s", q, diff)
		}
	}
}

// BenchmarkSearch compares a search over the seeded big log (1,000 notes,
// 1,000 coverage, 2,000 email messages in threads) with the least any
// search must do: one literal-match query per collection.
func BenchmarkSearch(b *testing.B) {
	store := testenv.OpenStore(b, testenv.Options{})
	seedBigLog(b, store, 4000)
	ctx := context.Background()
	b.Run("search", func(b *testing.B) {
		for b.Loop() {
			r, err := search.Of(store).Search(ctx, search.SearchQuery{Query: "note", Limit: 20})
			if err != nil || r.Total < 1000 {
				b.Fatal(err, r)
			}
		}
	})
	raw := store.RawCollections()
	b.Run("raw_find_per_collection", func(b *testing.B) {
		for b.Loop() {
			for coll, fields := range map[string][]string{"outlets": {"name", "website", "description", "topics"},
				"contacts": {"name", "email", "title", "bio", "beats", "location"}, "opportunities": {"title", "description", "next_action"},
				"coverage": {"title", "summary", "url", "full_text"}, "notes": {"title", "content"},
				"email_threads": {"subject", "messages.subject", "messages.body_text", "messages.from"}} {
				or := bson.A{}
				for _, f := range fields {
					or = append(or, bson.M{f: bson.M{"$regex": "note", "$options": "i"}})
				}
				cur, err := raw.Database.Collection(coll).Find(ctx, bson.M{"$or": or, "archived_at": nil})
				if err != nil {
					b.Fatal(err)
				}
				var docs []bson.M
				if err := cur.All(ctx, &docs); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// Defect: an untitled note whose first content line matched was shown with
// that line as its title but ranked as a body hit (in_title: false), below
// older notes whose title matched. in_title says the query is in the title
// shown, and ranks it so.
func TestSearchUntitledNoteRanksByItsShownTitle(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	outlet := mk(t, c, "create_outlet", M{"name": "Wire"})
	titled := mk(t, c, "create_note", M{"title": "Embargo calendar", "content": "dates", "occurred_at": "2026-01-01", "outlet_ids": []string{outlet}})
	untitled := mk(t, c, "create_note", M{"content": "Embargo for the spring launch\nsecond line", "occurred_at": "2025-06-01", "outlet_ids": []string{outlet}})
	body := mk(t, c, "create_note", M{"content": "Call notes\nthe embargo moved", "occurred_at": "2026-02-01", "outlet_ids": []string{outlet}})
	type hit struct {
		ID      string `json:"id"`
		Title   string `json:"title"`
		InTitle bool   `json:"in_title"`
	}
	var res struct {
		Hits []hit `json:"hits"`
	}
	c.Must("search", M{"query": "embargo", "types": []string{"note"}}, &res)
	// Both title hits (the newer first), then the body hit.
	want := []hit{
		{ID: titled, Title: "Embargo calendar", InTitle: true},
		{ID: untitled, Title: "Embargo for the spring launch", InTitle: true},
		{ID: body, Title: "Call notes", InTitle: false},
	}
	if diff := cmp.Diff(res.Hits, want); diff != "" {
		t.Errorf("search embargo (-got +want):\n%s", diff)
	}
}
