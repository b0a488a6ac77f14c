package search

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/ledger/index"
	"outreach/repo"
	"outreach/repo/textlist"
)

// wordHits are k's hits as the word index finds them: exact, decided by
// the index with their date from the record it holds (to be completed by
// completeHits once paged); otherwise read and decided by matchDoc. ok is
// false when the index does not answer: the store is asked.
func (s *Store) wordHits(ctx context.Context, k repo.SearchKind, q SearchQuery, needle string, t time.Time) (hits []SearchHit, exact, ok bool, err error) {
	recs, exact, size, ok := s.TextCandidates(k.Coll, needle)
	if !ok {
		return nil, false, false, nil
	}
	if !exact {
		if len(recs)*textlist.MaxReadShare > size {
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
		h := SearchHit{Type: k.Kind, ID: r.ID, InTitle: r.Title, WholeWord: r.Whole}
		if v, err := r.Raw.LookupErr(k.Date); err == nil && v.Type == bson.TypeDateTime {
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
	for _, k := range repo.SearchKinds {
		if len(ids[k.Kind]) == 0 {
			continue
		}
		hits, err := s.readHits(ctx, k, bson.M{"_id": bson.M{"$in": ids[k.Kind]}}, q.IncludeArchived, needle, t)
		if err != nil {
			return fmt.Errorf("search %s: %w", k.Kind, err)
		}
		for _, h := range hits {
			read[k.Kind+"/"+h.ID] = h
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
		t := repo.Now()
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
