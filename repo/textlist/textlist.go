// Package textlist holds the lists' free-text filters (list_notes,
// list_contacts, list_outlets, list_campaigns, list_opportunities,
// list_coverage `search`, search_emails `query`) and what the word index
// extracts of the searched kinds and of those lists (words.go), which it
// registers with the core at start (repo.RegisterWords). It sits between
// the core and the areas: every area's list reads it, and it reads the
// core alone.
package textlist

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/ledger"
	"outreach/ledger/index"
	"outreach/repo"
	"outreach/textfold"
)

// The lists' free-text filters (list_notes, list_contacts, list_outlets,
// list_campaigns, list_opportunities and list_coverage `search`,
// search_emails `query`) match their text literally and in any case in
// the fields each names (listTexts). On the embedded store the word index
// (words.go) names the records that may hold the text, folded as
// search folds it, so the store is not scanned:
//   - a text of one word (letters and digits only) is decided there, for
//     every record whose listed texts are plain (textfold.Plain: they fold as
//     case folding alone folds them): such a record holds the text in any
//     case exactly when its fold holds the text's fold;
//   - any other record the index names (a phrase, signs, an accented text)
//     is decided by the filter itself: on the record as the index holds it
//     where it holds the fields whole, else on the record read by _id.
//
// The records found become an _id filter beside the list's others, which
// the index answers with its order and total. Where the index cannot
// answer (being built, stale, a text without a letter or digit, on a
// server) or would have too many records read, the store is asked for the
// pattern, bounded by the core's repo.TextPatternBound.

// listTexts are the fields each list's free-text filter reads.
var listTexts = map[string][]string{
	repo.CollNotes:         {"title", "content"},
	repo.CollContacts:      {"name", "email"},
	repo.CollOutlets:       {"name", "website"},
	repo.CollCampaigns:     {"name", "description", "goals"},
	repo.CollOpportunities: {"title", "description", "next_action"},
	repo.CollCoverage:      {"title", "summary", "url"},
	repo.CollEmails:        {"messages.subject", "messages.body_text", "messages.from"},
}

// maxTextReads is the most records a free-text filter reads by _id to
// decide what the word index did not; beyond it (or beyond a
// MaxReadShare-th of the collection) one pass of the store's pattern is
// cheaper.
const maxTextReads = 2000

// Filter is a list's free-text filter.
type Filter struct {
	Coll, Text string
	// textIndex: on a server with text search, the collection's text
	// index covers the fields, and a $text narrows the pattern's scan.
	TextIndex bool
}

// Page lists the records of coll matching filter and holding t's
// text, in sort order, with their total.
func Page[T any](ctx context.Context, s *repo.Store, t Filter, filter bson.M, sort bson.D, limit, offset int) (repo.Page[T], error) {
	ids, ok, err := IDs(ctx, s, t)
	if err != nil {
		return repo.Page[T]{}, err
	}
	if ok {
		page, answered, err := ledger.ListAmong[T](ctx, s.Engine, t.Coll, ids, filter, sort, limit, offset)
		if err != nil || answered {
			return page, err
		}
	}
	bounded, cancel := ByPattern(ctx, s, t, filter)
	defer cancel()
	page, err := repo.ListPage[T](bounded, s, t.Coll, filter, sort, limit, offset)
	return page, BoundErr(ctx, bounded, t, err)
}

// ByPattern adds t to filter as the store's pattern, and bounds the
// context of the read that follows by repo.TextPatternBound.
func ByPattern(ctx context.Context, s *repo.Store, t Filter, filter bson.M) (context.Context, context.CancelFunc) {
	for k, v := range repo.AnyField(t.Text, listTexts[t.Coll]...) {
		filter[k] = v
	}
	if t.TextIndex && s.Capabilities().TextSearch {
		filter["$text"] = bson.M{"$search": textPhrase(t.Text)}
	}
	return context.WithTimeout(ctx, repo.TextPatternBound())
}

// BoundErr names the bound when the store's pattern outlasted it (and the
// caller's own context did not end first).
func BoundErr(ctx, bounded context.Context, t Filter, err error) error {
	if err == nil || ctx.Err() != nil || !errors.Is(bounded.Err(), context.DeadlineExceeded) {
		return err
	}
	return &repo.Error{Code: repo.CodeUnavailable, Field: searchField(t.Coll), Retryable: true, Message: fmt.Sprintf(
		"%s: the word index cannot answer %q now (it is being built, or the text has no letter or digit), and the store's scan for it "+
			"took longer than %s; try again shortly, add a word of letters or digits, or narrow the list with its other filters",
		searchField(t.Coll), t.Text, repo.TextPatternBound())}
}

// searchField is the parameter a list's free-text filter is given as.
func searchField(coll string) string {
	if coll == repo.CollEmails {
		return "query"
	}
	return "search"
}

// IDs are the ids of the records of t.Coll holding t.Text, from the
// word index; ok is false when the index does not answer (the store's
// pattern is then asked). With the index check on (tests), the answer is
// compared with the store's pattern.
func IDs(ctx context.Context, s *repo.Store, t Filter) (ids []string, ok bool, err error) {
	if s.TextsByPattern() {
		return nil, false, nil
	}
	for attempt := 0; ; attempt++ {
		ids, ok, err = wordIDs(ctx, s, t)
		if err != nil || !ok || !s.IndexChecked() {
			return ids, ok, err
		}
		var docs []struct {
			ID string `bson:"_id"`
		}
		err := s.FindAll(ctx, t.Coll, repo.AnyField(t.Text, listTexts[t.Coll]...), options.Find().SetProjection(bson.M{"_id": 1}), &docs)
		if err != nil {
			return nil, false, err
		}
		want := make([]string, len(docs))
		for i, d := range docs {
			want[i] = d.ID
		}
		got := slices.Clone(ids)
		slices.Sort(got)
		slices.Sort(want)
		if slices.Equal(got, want) {
			return ids, true, nil
		}
		// A write may have landed between the two: ask again.
		if attempt == 3 {
			return nil, false, fmt.Errorf("%s %q: the word index found %d records %v, the store %d %v", t.Coll, t.Text,
				len(got), got[:min(5, len(got))], len(want), want[:min(5, len(want))])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wordIDs is IDs from the word index alone.
func wordIDs(ctx context.Context, s *repo.Store, t Filter) (ids []string, ok bool, err error) {
	fields := listTexts[t.Coll]
	recs, exact, size, ok := s.ListTextCandidates(t.Coll, textfold.Fold(t.Text))
	if !ok {
		return nil, false, nil
	}
	decides := exact && textfold.Plain(t.Text)
	match := repo.AnyField(t.Text, fields...)
	held := !slices.ContainsFunc(fields, func(f string) bool { return !repo.IndexSpec(t.Coll).Keeps(f) })
	ids = []string{}
	var read []string
	for _, r := range recs {
		switch {
		case decides && r.Plain:
			ids = append(ids, r.ID)
			continue
		case held:
			if m, decided := index.Match(r.Raw, match); decided {
				if m {
					ids = append(ids, r.ID)
				}
				continue
			}
		}
		read = append(read, r.ID)
	}
	if len(read) > maxTextReads || (len(read) > 64 && len(read)*MaxReadShare > size) {
		return nil, false, nil
	}
	raws, err := s.FetchByID(ctx, t.Coll, read)
	if err != nil {
		return nil, false, err
	}
	for _, raw := range raws {
		m, decided := index.Match(raw, match)
		if !decided {
			return nil, false, nil
		}
		if id, isString := raw.Lookup("_id").StringValueOK(); m && isString {
			ids = append(ids, id)
		}
	}
	return ids, true, nil
}

// textPhrase makes a $text search of the query as one literal phrase.
func textPhrase(q string) string {
	return `"` + strings.ReplaceAll(q, `"`, " ") + `"`
}
