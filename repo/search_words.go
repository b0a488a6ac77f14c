package repo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/ledger/index"
)

// Search on the embedded store: the service's word index (ledger/index,
// words.go) holds the words of every searched field of the six kinds,
// folded as fold folds them, and names the records that may hold a query.
// A query of one word (letters and digits only) is decided there exactly:
// a record holds it when one of its words contains it, in its title when
// a word of the title as shown does, as whole words when it is one of its
// words; the hits are ordered from that and the record's date, and only
// the page shown is read, matchDoc building each hit (its title, snippet
// and score) and confirming what the index decided. Any other query (a
// phrase, signs) reads the records the index names, and matchDoc decides
// every hit, as on the store's path. Where the index cannot answer (being
// built, stale, a query without a letter or digit) or names too many
// records for reading each to pay, the store is asked for the pattern as
// before.

// wordsExtraction names the words the index holds of the searched kinds
// (the fields, fold, the shown title, the lists' texts): change it when
// they change, so a checkpoint of the old ones is not used.
const wordsExtraction = "search 2"

// withWords gives the searched collections' index specs their word index,
// and those of the lists with a free-text filter (listTexts) theirs.
func withWords(specs map[string]index.Spec) map[string]index.Spec {
	out := maps.Clone(specs)
	for _, k := range searchKinds {
		spec := out[k.coll]
		spec.Words = &index.Words{Name: wordsExtraction, Fields: k.fields, Texts: k.texts, Listed: listedApart(k)}
		out[k.coll] = spec
	}
	for coll, fields := range listTexts {
		if spec := out[coll]; spec.Words == nil {
			k := searchKind{coll: coll, fields: fields}
			spec.Words = &index.Words{Name: wordsExtraction, Fields: fields, Texts: k.texts}
			out[coll] = spec
		}
	}
	return out
}

// listedApart reports whether the fields a list's free-text filter reads
// in k's collection differ from those search reads: the word index then
// holds their words apart.
func listedApart(k searchKind) bool {
	fields, ok := listTexts[k.coll]
	return ok && !slices.Equal(fields, k.fields)
}

// texts is what the word index holds of a record of k: the folded text of
// every searched field, and of its title as shown (the first field, and an
// untitled note's first line), exactly as matchDoc reads them; the folded
// texts of the list's fields when they differ; and whether those a list
// reads are plain (plainText).
func (k searchKind) texts(d bson.M) index.Texts {
	var t index.Texts
	for i, f := range k.fields {
		for _, v := range values(d, f) {
			t.All = append(t.All, foldText(v))
			if i == 0 && k.kind != "" {
				t.Title = append(t.Title, t.All[len(t.All)-1])
			}
		}
	}
	if line, ok := untitledLine(k, d); ok {
		t.Title = append(t.Title, foldText(line))
	}
	listed := k.fields
	if listedApart(k) {
		listed = listTexts[k.coll]
		for _, f := range listed {
			for _, v := range values(d, f) {
				t.List = append(t.List, foldText(v))
			}
		}
	}
	t.Plain = true
	for _, f := range listed {
		for _, v := range values(d, f) {
			if !plainText(v) {
				t.Plain = false
			}
		}
	}
	return t
}

// maxReadShare: when the word index names more than this share of a
// collection's records for a query it does not decide, the store's
// pattern (one pass over the collection) is asked instead of reading each.
const maxReadShare = 5

// wordHits are k's hits as the word index finds them: exact, decided by
// the index with their date from the record it holds (to be completed by
// completeHits once paged); otherwise read and decided by matchDoc. ok is
// false when the index does not answer: the store is asked.
func (s *Store) wordHits(ctx context.Context, k searchKind, q SearchQuery, needle string, t time.Time) (hits []SearchHit, exact, ok bool, err error) {
	recs, exact, size, ok := s.TextCandidates(k.coll, needle)
	if !ok {
		return nil, false, false, nil
	}
	if !exact {
		if len(recs)*maxReadShare > size {
			return nil, false, false, nil
		}
		if len(recs) == 0 {
			return nil, false, true, nil
		}
		ids := make([]string, len(recs))
		for i, r := range recs {
			ids[i] = r.ID
		}
		hits, err := s.readHits(ctx, k, bson.M{"_id": bson.M{"$in": ids}}, q.IncludeArchived, needle, t)
		return hits, false, err == nil, err
	}
	activeOnly := bson.M{"archived_at": nil}
	for _, r := range recs {
		if !q.IncludeArchived {
			match, decided := index.Match(r.Raw, activeOnly)
			if !decided {
				return nil, false, false, nil
			}
			if !match {
				continue
			}
		}
		h := SearchHit{Type: k.kind, ID: r.ID, InTitle: r.Title, WholeWord: r.Whole}
		if v, err := r.Raw.LookupErr(k.date); err == nil && v.Type == bson.TypeDateTime {
			h.Date = bson.DateTime(v.DateTime()).Time().UTC()
		}
		hits = append(hits, h)
	}
	return hits, true, true, nil
}

// completeHits reads the records of the page's hits the word index decided
// and builds each with matchDoc, which must confirm what the index
// decided (else errWordsRaced: a write landed in between).
func (s *Store) completeHits(ctx context.Context, q SearchQuery, page []SearchHit, decided map[string]map[string]bool, needle string, t time.Time) error {
	ids := map[string][]string{}
	for _, h := range page {
		if decided[h.Type][h.ID] {
			ids[h.Type] = append(ids[h.Type], h.ID)
		}
	}
	read := map[string]SearchHit{}
	for _, k := range searchKinds {
		if len(ids[k.kind]) == 0 {
			continue
		}
		hits, err := s.readHits(ctx, k, bson.M{"_id": bson.M{"$in": ids[k.kind]}}, q.IncludeArchived, needle, t)
		if err != nil {
			return fmt.Errorf("search %s: %w", k.kind, err)
		}
		for _, h := range hits {
			read[k.kind+"/"+h.ID] = h
		}
	}
	for i, h := range page {
		if !decided[h.Type][h.ID] {
			continue
		}
		full, ok := read[h.Type+"/"+h.ID]
		if !ok || full.InTitle != h.InTitle || full.WholeWord != h.WholeWord || !full.Date.Equal(h.Date) {
			return fmt.Errorf("%w: %s %s", errWordsRaced, h.Type, h.ID)
		}
		page[i] = full
	}
	return nil
}

// searchWords is search through the word index. A hit it decided that its
// record does not confirm (a write landed in between) asks the store
// instead. With the index check on (tests), every answer is compared with
// the store's, as the index's other answers are.
func (s *Store) searchWords(ctx context.Context, q SearchQuery) (*SearchResult, error) {
	for attempt := 0; ; attempt++ {
		t := Now()
		res, err := s.search(ctx, q, pathWords, t)
		if errors.Is(err, errWordsRaced) {
			s.Log.Info().Err(err).Msg("search: asking the store")
			return s.search(ctx, q, pathStore, t)
		}
		if err != nil || !s.IndexChecked() {
			return res, err
		}
		want, err := s.search(ctx, q, pathStore, t)
		if err != nil {
			return nil, err
		}
		if reflect.DeepEqual(res, want) {
			return res, nil
		}
		// A write may have landed between the two: ask again.
		if attempt == 3 {
			return nil, fmt.Errorf("search %q: the word index answered %d hits %v, the store %d hits %v", q.Query,
				res.Total, hitIDs(res.Hits), want.Total, hitIDs(want.Hits))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func hitIDs(hits []SearchHit) string {
	var b strings.Builder
	for i, h := range hits {
		if i == 5 {
			b.WriteString(" …")
			break
		}
		fmt.Fprintf(&b, " %s/%s", h.Type, h.ID)
	}
	return b.String()
}
