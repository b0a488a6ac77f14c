package ledger

import (
	"context"
	"time"

	"outreach/ledger/index"
)

// TextCandidates asks the word index of coll (index.Spec.Words) which
// records may hold needle, folded as the spec's Words.Texts folds: exact,
// they are the records holding it, with whether it is in the title and
// stands as whole words; otherwise a superset to read and decide. size is
// the number of records held. ok is false when the index cannot answer
// (stale, being built, no word index for coll, a needle without a word):
// the caller then asks the store.
func (s *Engine) TextCandidates(coll, needle string) (recs []index.TextRecord, exact bool, size int, ok bool) {
	return s.textCandidates(coll, func(mc *index.Coll) ([]index.TextRecord, bool, bool) { return mc.Text(needle) })
}

// ListTextCandidates is TextCandidates over the texts a list's free-text
// filter reads (index.Coll.ListText).
func (s *Engine) ListTextCandidates(coll, needle string) (recs []index.TextRecord, exact bool, size int, ok bool) {
	return s.textCandidates(coll, func(mc *index.Coll) ([]index.TextRecord, bool, bool) { return mc.ListText(needle) })
}

func (s *Engine) textCandidates(coll string, text func(*index.Coll) ([]index.TextRecord, bool, bool)) (recs []index.TextRecord, exact bool, size int, ok bool) {
	mi := s.mirror
	if mi != nil && mi.follow != nil {
		ctx, cancel := context.WithTimeout(context.Background(), mi.follow.wait+time.Second)
		live := s.mirrorLive(ctx)
		cancel()
		if !live {
			return nil, false, 0, false
		}
	} else if !s.written() || mi.stale.Load() {
		return nil, false, 0, false
	}
	mi.mu.RLock()
	defer mi.mu.RUnlock()
	mc := mi.colls[coll]
	if mc == nil {
		return nil, false, 0, false
	}
	recs, exact, ok = text(mc)
	return recs, exact, mc.Len(), ok
}

// IndexChecked reports whether every answer of the engine's own indexes is
// compared with the store's (Options.IndexCheck, in tests): a caller that
// answers from them on its own (search) compares as well.
func (s *Engine) IndexChecked() bool { return s.mirror != nil && s.mirror.check }

// IndexFromCheckpoint reports whether the first build loaded the index
// checkpoint (tests).
func (in Internals) IndexFromCheckpoint() bool { return in.e.mirror.fromCheckpoint.Load() }
