package repo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/text/unicode/norm"
)

// SearchTypes are the kinds of record search looks through, in the order
// ties are broken.
var SearchTypes = []string{"outlet", "contact", "opportunity", "coverage", "note", "email"}

// searchKind says where a kind of record is stored, which fields are
// searched (the title field first) and which date measures its recency.
type searchKind struct {
	kind, coll string
	fields     []string
	date       string
	// project lists the stored top-level fields a hit needs.
	project []string
}

var searchKinds = []searchKind{
	{kind: "outlet", coll: CollOutlets, fields: []string{"name", "website", "description", "topics"}, date: "updated_at"},
	{kind: "contact", coll: CollContacts, fields: []string{"name", "email", "title", "bio", "beats", "location"}, date: "updated_at"},
	{kind: "opportunity", coll: CollOpportunities, fields: []string{"title", "description", "next_action"}, date: "updated_at"},
	{kind: "coverage", coll: CollCoverage, fields: []string{"title", "summary", "url", "full_text"}, date: "published_at"},
	{kind: "note", coll: CollNotes, fields: []string{"title", "content"}, date: "occurred_at"},
	{kind: "email", coll: CollEmails, fields: []string{"subject", "messages.subject", "messages.body_text", "messages.from"}, date: "last_message_at",
		project: []string{"subject", "messages", "last_message_at"}},
}

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
	if s.Capabilities().TextSearch && wordsOnly(q.Query) {
		return s.search(ctx, q, pathText, Now())
	}
	return s.searchWords(ctx, q)
}

// SearchLiteral always asks the store for a pattern (for comparing the paths).
func (s *Store) SearchLiteral(ctx context.Context, q SearchQuery) (*SearchResult, error) {
	return s.search(ctx, q, pathStore, Now())
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
	needle := fold(q.Query).text
	if strings.TrimSpace(needle) == "" {
		return nil, Invalid("query", "must hold at least one letter, digit or sign")
	}
	res := &SearchResult{Path: "literal"}
	if path == pathText {
		res.Path = "text"
	}
	var hits []SearchHit
	// decided: the hits the word index decided, to be read and completed
	// once paged (by type, then id).
	decided := map[string]map[string]bool{}
	for _, k := range searchKinds {
		if len(q.Types) > 0 && !slices.Contains(q.Types, k.kind) {
			continue
		}
		if path == pathWords {
			kh, exact, ok, err := s.wordHits(ctx, k, q, needle, t)
			if err != nil {
				return nil, fmt.Errorf("search %s: %w", k.kind, err)
			}
			if ok {
				if exact {
					decided[k.kind] = map[string]bool{}
					for _, h := range kh {
						decided[k.kind][h.ID] = true
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
			pattern := bson.M{"$regex": foldPattern(needle)}
			or := bson.A{}
			for _, f := range k.fields {
				or = append(or, bson.M{f: pattern})
			}
			filter["$or"] = or
		}
		kh, err := s.readHits(ctx, k, filter, q.IncludeArchived, needle, t)
		if err != nil {
			return nil, fmt.Errorf("search %s: %w", k.kind, err)
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
func (s *Store) readHits(ctx context.Context, k searchKind, filter bson.M, includeArchived bool, needle string, t time.Time) ([]SearchHit, error) {
	Active(filter, includeArchived)
	fields := k.project
	if fields == nil {
		fields = k.fields
	}
	proj := bson.M{"archived_at": 1, k.date: 1}
	for _, f := range fields {
		proj[f] = 1
	}
	var docs []bson.M
	if err := s.findAll(ctx, k.coll, filter, options.Find().SetProjection(proj), &docs); err != nil {
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
func matchDoc(k searchKind, d bson.M, needle string, t time.Time) (SearchHit, bool) {
	h := SearchHit{Type: k.kind, ID: fmt.Sprint(d["_id"]), MatchedIn: []string{}, Archived: d["archived_at"] != nil}
	if dt, ok := d[k.date].(bson.DateTime); ok {
		h.Date = dt.Time().UTC()
	}
	// The snippet comes from the first field after the title that matched
	// (the title is shown already), else from the title.
	var titleSnippet string
	for i, f := range k.fields {
		for _, v := range values(d, f) {
			at, end, whole := locate(v, needle)
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
				titleSnippet = snippet(v, at, end)
			case i > 0 && h.Snippet == "":
				h.Snippet = snippet(v, at, end)
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
	if line, ok := untitledLine(k, d); ok && !h.InTitle {
		if at, _, _ := locate(line, needle); at >= 0 {
			h.InTitle = true
		}
	}
	h.Score = math.Round((4*float64(b2i(h.InTitle))+2*float64(b2i(h.WholeWord))+recency(h.Date, t))*1000) / 1000
	return h, true
}

// untitledLine is the title an untitled note is shown with, its
// content's first line: a match there is a match in the title the agent
// sees, and ranks so.
func untitledLine(k searchKind, d bson.M) (string, bool) {
	if title, _ := d["title"].(string); k.kind != "note" || title != "" {
		return "", false
	}
	content, _ := d["content"].(string)
	line := FirstLine(content)
	return line, line != ""
}

func hitTitle(k searchKind, d bson.M) string {
	str := func(f string) string { v, _ := d[f].(string); return v }
	switch k.kind {
	case "note":
		if t := str("title"); t != "" {
			return t
		}
		if line := FirstLine(str("content")); line != "" {
			return line
		}
		return "(untitled note)"
	case "email":
		return str("subject")
	default:
		return str(k.fields[0])
	}
}

// values returns the strings at path in d, walking into arrays.
func values(d any, path string) []string {
	head, rest, nested := strings.Cut(path, ".")
	switch x := d.(type) {
	case bson.M:
		if !nested {
			return strs(x[head])
		}
		return values(x[head], rest)
	case bson.A:
		var out []string
		for _, e := range x {
			out = append(out, values(e, path)...)
		}
		return out
	}
	return nil
}

func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case bson.A:
		var out []string
		for _, e := range x {
			out = append(out, strs(e)...)
		}
		return out
	}
	return nil
}

// folded is a text lower-cased and without diacritics, with the offset in
// the original of each of its bytes.
type folded struct {
	text string
	orig []int // orig[i]: where folded byte i comes from; orig[len(text)] = len(original)
}

// fold lower-cases s and strips its diacritics ("Café" → "cafe"), keeping
// track of offsets so a match can be shown in the original text.
func fold(s string) folded {
	var b strings.Builder
	orig := make([]int, 0, len(s)+1)
	for i, r := range s {
		f := foldRune(r)
		b.WriteString(f)
		for range len(f) {
			orig = append(orig, i)
		}
	}
	orig = append(orig, len(s))
	return folded{text: b.String(), orig: orig}
}

// foldText is fold(s).text, without the offsets (the word index folds
// every searched text of every record it holds).
func foldText(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		b.WriteString(foldRune(r))
	}
	return b.String()
}

// foldRune is r lower-cased without its accents: a letter of the Latin,
// Greek or Cyrillic blocks whose canonical decomposition is one letter and
// accents becomes that letter ("É" → "e", "й" → "и"); an accent alone (a
// combining mark written after its letter) becomes "". Other characters are
// only lower-cased, so scripts whose decompositions are not accents (Hangul
// syllables, Indic nukta forms) are compared as they are.
//
// Every character folds as the others of its case class do (unicode's
// simple folding: "ſ" as "s", "K" (Kelvin) as "k", "ς" as "σ"), so that
// a text holding a query in any case holds its fold: the word index may
// then name the records of a case-insensitive match (lists).
func foldRune(r rune) string {
	if r >= utf8.RuneSelf {
		r = caseRep(r)
	}
	switch {
	case r < utf8.RuneSelf:
		return string(unicode.ToLower(r))
	case accent(r):
		return ""
	case accented(r):
		var base []rune
		for _, x := range norm.NFD.String(string(r)) {
			if !accent(x) {
				base = append(base, x)
			}
		}
		if len(base) == 1 {
			return string(unicode.ToLower(base[0]))
		}
	}
	return string(unicode.ToLower(r))
}

// caseRep is the character r's case class folds as: the lowest letter of
// the class (r itself when none is a letter, or r is alone in it).
func caseRep(r rune) rune {
	rep := r
	if !unicode.IsLetter(rep) {
		rep = utf8.MaxRune + 1
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < rep && unicode.IsLetter(f) {
			rep = f
		}
	}
	if rep > utf8.MaxRune {
		return r
	}
	return rep
}

// plainText reports whether s folds as case folding alone folds it: each
// character folds to one character of its own case class (no accent taken
// off, no mark dropped). Where a text and a query are plain, the text holds
// the query in any case exactly when its fold holds the query's.
func plainText(s string) bool {
	for _, r := range s {
		if r < utf8.RuneSelf {
			continue
		}
		f := foldRune(r)
		c, size := utf8.DecodeRuneInString(f)
		if size == 0 || size != len(f) || !sameCase(r, c) {
			return false
		}
	}
	return true
}

// sameCase reports whether a and b are of one case class.
func sameCase(a, b rune) bool {
	for f := a; ; {
		if f == b {
			return true
		}
		if f = unicode.SimpleFold(f); f == a {
			return false
		}
	}
}

// foldBlocks are the blocks of letters that may carry accents: Latin-1,
// Latin Extended-A and B, Greek, Cyrillic, Latin Extended Additional, Greek
// Extended.
var foldBlocks = [][2]rune{{0xC0, 0x24F}, {0x370, 0x4FF}, {0x1E00, 0x1FFF}}

func accented(r rune) bool {
	for _, b := range foldBlocks {
		if r >= b[0] && r <= b[1] {
			return true
		}
	}
	return false
}

// accent reports whether r is a combining diacritical mark (the blocks
// accents are written with).
func accent(r rune) bool {
	return r >= 0x300 && r <= 0x36F || r >= 0x1AB0 && r <= 0x1AFF || r >= 0x1DC0 && r <= 0x1DFF ||
		r >= 0x20D0 && r <= 0x20FF || r >= 0xFE20 && r <= 0xFE2F
}

// nonASCII is the class range of every character beyond ASCII.
const nonASCII = `\x{80}-\x{10FFFF}`

// foldPattern is a regular expression matching at least every text whose
// fold contains needle; the match in Go then decides. An ASCII letter
// becomes the class of its two cases and of every non-ASCII character (its
// accented forms among them); another ASCII character is quoted, so the
// query is never read as a pattern; a non-ASCII character becomes any
// non-ASCII character; each may be followed by non-ASCII characters
// (accents written apart). It is coarse on purpose: a store may compile the
// pattern for every document it scans (the embedded one does), and exact
// classes of every accented form cost several times as much to compile as
// the scan itself.
func foldPattern(needle string) string {
	var b strings.Builder
	for _, r := range needle {
		switch {
		case r >= utf8.RuneSelf:
			b.WriteString("[" + nonASCII + "]")
		case unicode.IsLetter(r):
			b.WriteString("[" + string(unicode.ToLower(r)) + string(unicode.ToUpper(r)) + nonASCII + "]")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
		b.WriteString("[" + nonASCII + "]*")
	}
	return b.String()
}

// locate returns where in v the first match of needle (folded) starts and
// ends, or -1, and whether some match stands as whole words (no letter or
// digit directly before or after it).
func locate(v, needle string) (int, int, bool) {
	f := fold(v)
	first, end, whole := -1, -1, false
	for from := 0; from <= len(f.text); {
		i := strings.Index(f.text[from:], needle)
		if i < 0 {
			break
		}
		i += from
		if first < 0 {
			first, end = f.orig[i], f.orig[i+len(needle)]
		}
		before, _ := utf8.DecodeLastRuneInString(f.text[:i])
		after, _ := utf8.DecodeRuneInString(f.text[i+len(needle):])
		if !wordRune(before) && !wordRune(after) {
			whole = true
			break
		}
		_, size := utf8.DecodeRuneInString(f.text[i:])
		from = i + size
	}
	return first, end, whole
}

func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// wordsOnly reports whether q is made of whole words (letters, digits,
// spaces): the queries a text index answers exactly. Anything else (a '.',
// a '+', a '"') takes the literal path even where text search exists.
func wordsOnly(q string) bool {
	has := false
	for _, r := range q {
		switch {
		case wordRune(r) || unicode.Is(unicode.Mn, r):
			has = true
		case unicode.IsSpace(r):
		default:
			return false
		}
	}
	return has
}

// snippetContext is how many characters of context a snippet shows on each
// side of the match.
const snippetContext = 60

// snippet is the text around v[at:to], one line, cut at word boundaries,
// with "…" where it was cut.
func snippet(v string, at, to int) string {
	start, end, n := at, to, to-at
	for i := 0; i < snippetContext && start > 0; i++ {
		_, size := utf8.DecodeLastRuneInString(v[:start])
		start -= size
	}
	for i := 0; i < snippetContext && end < len(v); i++ {
		_, size := utf8.DecodeRuneInString(v[end:])
		end += size
	}
	space := func(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }
	if start > 0 && !space(v[start-1]) { // cut inside a word: drop the piece
		if sp := strings.IndexAny(v[start:at], " \n\t\r"); sp >= 0 {
			start += sp + 1
		}
	}
	if end < len(v) && !space(v[end]) {
		if sp := strings.LastIndexAny(v[at:end], " \n\t\r"); sp > n {
			end = at + sp
		}
	}
	out := strings.Join(strings.Fields(v[start:end]), " ")
	if start > 0 {
		out = "…" + out
	}
	if end < len(v) {
		out += "…"
	}
	return out
}

// SummaryLen caps a summary, in characters.
const SummaryLen = 200

// FirstLine is the first line of text, trimmed, at most summaryLen
// characters: the Go twin of the pipeline's firstLineExpr.
func FirstLine(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	line = strings.TrimSpace(line)
	if r := []rune(line); len(r) > SummaryLen {
		line = string(r[:SummaryLen])
	}
	return line
}
