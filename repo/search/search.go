package search

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"outreach/repo"
	"outreach/textfold"
)

// SearchTypes are the kinds of record search looks through, in the order
// ties are broken.
var SearchTypes = []string{"outlet", "contact", "opportunity", "coverage", "note", "email"}

// SearchQuery is what search takes, already checked.
type SearchQuery struct {
	Query           string
	Types           []string // empty: every kind
	IncludeArchived bool
	Limit, Offset   int
}

// SearchHit is one record found.
type SearchHit struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Title   string `json:"title"`
	Snippet string `json:"snippet"`
	// Score orders the hits: 4 for a match in the name or title, 2 for a
	// match of whole words, plus a recency term in (0, 1].
	Score float64 `json:"score"`
	// InTitle: the query matched in the name or title. WholeWord: some
	// match stands as whole words (no letter or digit right before or after).
	InTitle   bool      `json:"in_title"`
	WholeWord bool      `json:"whole_word"`
	MatchedIn []string  `json:"matched_in"`
	Date      time.Time `json:"date"`
	Archived  bool      `json:"archived"`
}

// SearchResult is one page of hits, best first.
type SearchResult struct {
	Total int `json:"total"`
	Hits  []SearchHit
	// Path is "text" when the text indexes found the candidates, "literal"
	// when a literal, case- and diacritics-insensitive match did.
	Path string
}

// MaxSearchQuery is the longest query, in characters.
const MaxSearchQuery = 200

// Search finds records of the given kinds holding the query: literally,
// ignoring case and diacritics. On a server with text search, and for a
// query of whole words only, the text indexes narrow the candidates; the
// literal match in Go decides every hit on both paths, so both give the same
// hits for whole words. Each collection is read once.
//
// Elsewhere (the embedded store) the service's word index (words.go) names
// the records that may hold the query, and only those are read; for a
// query of one word it decides the hits and their order itself, and only
// the page shown is read.
func (s *Store) Search(ctx context.Context, q SearchQuery) (*SearchResult, error) {
	if s.Capabilities().TextSearch && textfold.WordsOnly(q.Query) {
		return s.search(ctx, q, pathText, repo.Now())
	}
	return s.searchWords(ctx, q)
}

// SearchLiteral always asks the store for a pattern (for comparing the paths).
func (s *Store) SearchLiteral(ctx context.Context, q SearchQuery) (*SearchResult, error) {
	return s.search(ctx, q, pathStore, repo.Now())
}

// searchPath is how a search finds its candidates.
type searchPath int

const (
	// pathStore asks the store for a pattern matching at least every hit.
	pathStore searchPath = iota
	// pathText asks the store's text indexes (whole words only).
	pathText
	// pathWords asks the service's word index where it answers, the
	// store for a pattern elsewhere.
	pathWords
)

// errWordsRaced: a hit the word index decided was not confirmed by its
// record as read (a write landed between the two): the search is asked
// again of the store.
var errWordsRaced = errors.New("a record changed while search read it")

func (s *Store) search(ctx context.Context, q SearchQuery, path searchPath, t time.Time) (*SearchResult, error) {
	needle := textfold.Fold(q.Query)
	if strings.TrimSpace(needle) == "" {
		return nil, repo.Invalid("query", "must hold at least one letter, digit or sign")
	}
	res := &SearchResult{Path: "literal"}
	if path == pathText {
		res.Path = "text"
	}
	var hits []SearchHit
	// decided: the hits the word index decided, to be read and completed
	// once paged (by type, then id).
	decided := map[string]map[string]bool{}
	for _, k := range repo.SearchKinds {
		if len(q.Types) > 0 && !slices.Contains(q.Types, k.Kind) {
			continue
		}
		if path == pathWords {
			kh, exact, ok, err := s.wordHits(ctx, k, q, needle, t)
			if err != nil {
				return nil, fmt.Errorf("search %s: %w", k.Kind, err)
			}
			if ok {
				if exact {
					decided[k.Kind] = map[string]bool{}
					for _, h := range kh {
						decided[k.Kind][h.ID] = true
					}
				}
				hits = append(hits, kh...)
				continue
			}
		}
		filter := bson.M{}
		if path == pathText {
			filter["$text"] = bson.M{"$search": q.Query}
		} else {
			pattern := bson.M{"$regex": textfold.Pattern(needle)}
			or := bson.A{}
			for _, f := range k.Fields {
				or = append(or, bson.M{f: pattern})
			}
			filter["$or"] = or
		}
		kh, err := s.readHits(ctx, k, filter, q.IncludeArchived, needle, t)
		if err != nil {
			return nil, fmt.Errorf("search %s: %w", k.Kind, err)
		}
		hits = append(hits, kh...)
	}
	slices.SortFunc(hits, func(a, b SearchHit) int {
		if c := cmp.Compare(b2i(b.InTitle), b2i(a.InTitle)); c != 0 {
			return c
		}
		if c := cmp.Compare(b2i(b.WholeWord), b2i(a.WholeWord)); c != 0 {
			return c
		}
		if c := b.Date.Compare(a.Date); c != 0 {
			return c
		}
		if c := cmp.Compare(slices.Index(SearchTypes, a.Type), slices.Index(SearchTypes, b.Type)); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	res.Total = len(hits)
	lo, hi := min(q.Offset, len(hits)), min(q.Offset+q.Limit, len(hits))
	res.Hits = hits[lo:hi]
	if res.Hits == nil {
		res.Hits = []SearchHit{}
	}
	if err := s.completeHits(ctx, q, res.Hits, decided, needle, t); err != nil {
		return nil, err
	}
	return res, nil
}

// readHits reads the records of k matching filter (the archived ones
// left out unless asked for) and keeps those holding needle.
func (s *Store) readHits(ctx context.Context, k repo.SearchKind, filter bson.M, includeArchived bool, needle string, t time.Time) ([]SearchHit, error) {
	repo.Active(filter, includeArchived)
	fields := k.Project
	if fields == nil {
		fields = k.Fields
	}
	proj := bson.M{"archived_at": 1, k.Date: 1}
	for _, f := range fields {
		proj[f] = 1
	}
	var docs []bson.M
	if err := s.FindAll(ctx, k.Coll, filter, options.Find().SetProjection(proj), &docs); err != nil {
		return nil, err
	}
	var hits []SearchHit
	for _, d := range docs {
		if h, ok := matchDoc(k, d, needle, t); ok {
			hits = append(hits, h)
		}
	}
	return hits, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// recency is 1 for a record of now (or the future), 1/2 at 30 days, 1/3 at 60.
func recency(date, now time.Time) float64 {
	days := max(now.Sub(date).Hours()/24, 0)
	return 1 / (1 + days/30)
}

// matchDoc decides whether d holds needle (already folded) and builds its hit.
func matchDoc(k repo.SearchKind, d bson.M, needle string, t time.Time) (SearchHit, bool) {
	h := SearchHit{Type: k.Kind, ID: fmt.Sprint(d["_id"]), MatchedIn: []string{}, Archived: d["archived_at"] != nil}
	if dt, ok := d[k.Date].(bson.DateTime); ok {
		h.Date = dt.Time().UTC()
	}
	// The snippet comes from the first field after the title that matched
	// (the title is shown already), else from the title.
	var titleSnippet string
	for i, f := range k.Fields {
		for _, v := range repo.Values(d, f) {
			at, end, whole := textfold.Locate(v, needle)
			if at < 0 {
				continue
			}
			if !slices.Contains(h.MatchedIn, f) {
				h.MatchedIn = append(h.MatchedIn, f)
			}
			h.WholeWord = h.WholeWord || whole
			switch {
			case i == 0 && titleSnippet == "":
				h.InTitle = true
				titleSnippet = textfold.Snippet(v, at, end)
			case i > 0 && h.Snippet == "":
				h.Snippet = textfold.Snippet(v, at, end)
			}
		}
	}
	if h.Snippet == "" {
		h.Snippet = titleSnippet
	}
	if len(h.MatchedIn) == 0 {
		return SearchHit{}, false
	}
	h.Title = hitTitle(k, d)
	if line, ok := repo.UntitledLine(k, d); ok && !h.InTitle {
		if at, _, _ := textfold.Locate(line, needle); at >= 0 {
			h.InTitle = true
		}
	}
	h.Score = math.Round((4*float64(b2i(h.InTitle))+2*float64(b2i(h.WholeWord))+recency(h.Date, t))*1000) / 1000
	return h, true
}

// untitledLine is the title an untitled note is shown with, its
// content's first line: a match there is a match in the title the agent

func hitTitle(k repo.SearchKind, d bson.M) string {
	str := func(f string) string { v, _ := d[f].(string); return v }
	switch k.Kind {
	case "note":
		if t := str("title"); t != "" {
			return t
		}
		if line := textfold.FirstLine(str("content")); line != "" {
			return line
		}
		return "(untitled note)"
	case "email":
		return str("subject")
	default:
		return str(k.Fields[0])
	}
}
