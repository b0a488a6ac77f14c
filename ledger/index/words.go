package index

import (
	"bytes"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"unicode"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// The word index: per collection that has one (Spec.Words), the words of
// every record's searched text, folded as the search folds it, with the
// numbers of the records holding each word. It answers which records may
// hold a literal text, so that search reads those records instead of
// asking the store for a pattern (which the embedded store answers by
// decoding every document).
//
// A word is a maximal run of letters and digits of the folded text. A text
// of letters and digits only (one word of a query) is held by a record
// exactly when one of the record's words contains it, and stands there as
// whole words exactly when it is one of them: for such a text the answer is
// exact, title and whole words included. For any other text (several
// words, signs) the answer is a superset: every word of the text bounded
// by other characters on both sides inside it must be a word of the
// record, the first may end one, the last may begin one, and the caller
// reads the candidates to decide.
//
// The words are derived from the stored record (Held) and kept in the
// record as held, under wordsField, so the index of a checkpoint, or of
// any record Put, is rebuilt from the records alone, and a replaced
// record's old words are known.

// Words says what the word index holds of a collection's records.
type Words struct {
	// Name names the extraction in the checkpoint's fingerprint: a
	// checkpoint of another extraction is not used.
	Name string
	// Fields are the paths the texts come from: the index's build reads
	// them even where Drop leaves them out of the record held.
	Fields []string
	// Texts returns the texts of the whole stored record (decoded with
	// documents as bson.M), already folded (Texts).
	Texts func(doc bson.M) Texts
	// Listed says that Texts gives a list's texts of its own (Texts.List):
	// the fields a list's free-text filter reads are fewer than Fields.
	Listed bool
}

// Texts are the folded texts of one record the word index holds.
type Texts struct {
	// All: every searched text; Title: the texts of its title as shown;
	// List: the texts a list's free-text filter reads (Words.Listed only;
	// else All).
	All, Title, List []string
	// Plain: every character of the texts a list reads folds as case
	// folding alone folds it (no accent taken off, no mark dropped): a
	// word the index finds in such a record is there in any case, exactly.
	Plain bool
}

// wordsField holds a record's words in the record as held (no stored
// field can be named so): "a" its words, "t" the words of its title, "l"
// those of its list's texts (Words.Listed), each distinct, sorted and
// separated by spaces; "x" is there (true) when the record is not plain
// (Texts.Plain).
const wordsField = "$words"

// wordPosting is the records holding a word: anywhere in their texts
// (all), in their title (title), in their list's texts (list), as entries
// of the word index's slab (postings.go; most words are in one record,
// held inline).
type wordPosting struct {
	all, title, list int32
}

var noPosting = wordPosting{all: noRecords, title: noRecords, list: noRecords}

// wordGroup names the texts of a record a posting counts: all, title or list.
type wordGroup int

const (
	groupAll wordGroup = iota
	groupTitle
	groupList
)

// entry is the posting's entry of group g.
func (p *wordPosting) entry(g wordGroup) *int32 {
	switch g {
	case groupTitle:
		return &p.title
	case groupList:
		return &p.list
	}
	return &p.all
}

// wordIndex is a collection's word index.
type wordIndex struct {
	// vocab: word → its place in postings (no pointer, no allocation of
	// its own per word: most words, numbers and names, are in one record);
	// free: places of words no record holds any more.
	vocab    map[string]int32
	postings []wordPosting
	lists    slab
	free     []int32
	// list is every word, each after a 0 byte, in the order they came
	// (a word no record holds any more is blanked to 0 bytes until the
	// list is compacted); starts[i] is where the i-th begins (its 0 byte)
	// and places[i] its place in postings. A piece of a word is looked
	// for in list with one bytes.Index per occurrence, not word by word.
	list    []byte
	starts  []int32
	places  []int32
	blanked int
	// entries: place in postings → its word's index in starts.
	entries []int32
	// unindexed counts the records held without their words (put by a
	// caller that did not derive them): while any is, nothing is answered.
	unindexed int
}

// Held is the record as the index is given it: where the spec has a word
// index, the stored record with the words of its texts appended (under
// wordsField); Put then keeps what the spec holds of it. full is the whole
// stored record (at least the fields of Drop that Words.Fields names).
func (sp Spec) Held(full bson.Raw) (bson.Raw, error) {
	if sp.Words == nil {
		return full, nil
	}
	var m bson.M
	if err := decodeRaw(full, &m); err != nil {
		return nil, err
	}
	texts := sp.Words.Texts(m)
	held := bson.D{{Key: "a", Value: joinWords(texts.All)}, {Key: "t", Value: joinWords(texts.Title)}}
	if sp.Words.Listed {
		held = append(held, bson.E{Key: "l", Value: joinWords(texts.List)})
	}
	if !texts.Plain {
		held = append(held, bson.E{Key: "x", Value: true})
	}
	words, err := bson.Marshal(held)
	if err != nil {
		return nil, err
	}
	at, out := bsoncore.AppendDocumentStart(make([]byte, 0, len(full)+len(words)+16))
	elems, err := bsoncore.Document(full).Elements()
	if err != nil {
		return nil, err
	}
	for _, e := range elems {
		if e.Key() != wordsField {
			out = append(out, e...)
		}
	}
	out = bsoncore.AppendDocumentElement(out, wordsField, words)
	return bsoncore.AppendDocumentEnd(out, at)
}

// ReadProjection is the projection a build reads the collection with:
// the dropped fields left out, but for those the word index reads (nil:
// the whole record).
func (sp Spec) ReadProjection() bson.M {
	var proj bson.M
	for _, f := range sp.Drop {
		if sp.Words != nil && slices.ContainsFunc(sp.Words.Fields, func(w string) bool {
			return w == f || strings.HasPrefix(w, f+".") || strings.HasPrefix(f, w+".")
		}) {
			continue
		}
		if proj == nil {
			proj = bson.M{}
		}
		proj[f] = 0
	}
	return proj
}

// joinWords is the distinct words of texts, sorted, separated by spaces.
func joinWords(texts []string) string {
	var words []string
	for _, t := range texts {
		words = append(words, wordsOf(t)...)
	}
	slices.Sort(words)
	return strings.Join(slices.Compact(words), " ")
}

func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// wordsOf splits a folded text into its words.
func wordsOf(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return !wordRune(r) })
}

// heldWords reads the words of a record as held, by group (the list's
// only where held); ok is false when it has none (a record put without
// Held).
func heldWords(raw bson.Raw) (groups [3][]string, ok bool) {
	if raw == nil {
		return groups, false
	}
	v, err := raw.LookupErr(wordsField)
	if err != nil {
		return groups, false
	}
	doc, isDoc := v.DocumentOK()
	if !isDoc {
		return groups, false
	}
	a, aok := doc.Lookup("a").StringValueOK()
	t, tok := doc.Lookup("t").StringValueOK()
	if !aok || !tok {
		return groups, false
	}
	groups[groupAll], groups[groupTitle] = strings.Fields(a), strings.Fields(t)
	if l, lok := doc.Lookup("l").StringValueOK(); lok {
		groups[groupList] = strings.Fields(l)
	}
	return groups, true
}

// plainHeld reports whether a record as held is plain (Texts.Plain).
func plainHeld(raw bson.Raw) bool {
	v, err := raw.LookupErr(wordsField, "x")
	return err != nil || v.Type != bson.TypeBoolean || !v.Boolean()
}

// putWords moves record n's postings from its old words (old: the record
// it replaces, nil for a new one) to those of raw: only the words that
// differ are touched, so an edit of a title costs its words, not the
// body's.
func (mc *Coll) putWords(n int32, old, raw bson.Raw) {
	wi := mc.words
	if wi == nil {
		return
	}
	oldWords, had := heldWords(old)
	newWords, has := heldWords(raw)
	if old != nil && !had {
		wi.unindexed--
	}
	if !has {
		wi.unindexed++
	}
	post := func(w string) *wordPosting {
		at, ok := wi.vocab[w]
		if !ok {
			if k := len(wi.free); k > 0 {
				at, wi.free = wi.free[k-1], wi.free[:k-1]
			} else {
				at = int32(len(wi.postings))
				wi.postings = append(wi.postings, noPosting)
			}
			wi.vocab[strings.Clone(w)] = at // not the whole record's words
			wi.listWord(w, at)
		}
		return &wi.postings[at]
	}
	unpost := func(w string, g wordGroup) {
		at, ok := wi.vocab[w]
		if !ok {
			return
		}
		p := &wi.postings[at]
		e := p.entry(g)
		*e = wi.lists.remove(*e, n)
		if *p == noPosting {
			delete(wi.vocab, w)
			wi.free = append(wi.free, at)
			wi.blank(w, at)
		}
	}
	for _, g := range []wordGroup{groupAll, groupTitle, groupList} {
		diffSorted(oldWords[g], newWords[g], func(w string) { unpost(w, g) },
			func(w string) { e := post(w).entry(g); *e = wi.lists.insert(*e, n) })
	}
}

// blank takes word w (at place at) out of the list; the list is
// compacted once half of it is blanked.
func (wi *wordIndex) blank(w string, at int32) {
	start := int(wi.starts[wi.entries[at]]) + 1
	clear(wi.list[start : start+len(w)])
	wi.blanked += len(w) + 1
	if wi.blanked*2 <= len(wi.list) {
		return
	}
	wi.list, wi.starts, wi.places, wi.blanked = nil, nil, nil, 0
	for w, at := range wi.vocab {
		wi.listWord(w, at)
	}
}

// listWord adds word w, at place at, to the list.
func (wi *wordIndex) listWord(w string, at int32) {
	for int(at) >= len(wi.entries) {
		wi.entries = append(wi.entries, 0)
	}
	wi.entries[at] = int32(len(wi.starts))
	wi.starts = append(wi.starts, int32(len(wi.list)))
	wi.places = append(wi.places, at)
	wi.list = append(append(wi.list, 0), w...)
}

// diffSorted calls gone for each word of old not in new, and added for
// each of new not in old (both sorted, distinct).
func diffSorted(old, new []string, gone, added func(string)) {
	i, j := 0, 0
	for i < len(old) || j < len(new) {
		switch {
		case j == len(new) || (i < len(old) && old[i] < new[j]):
			gone(old[i])
			i++
		case i == len(old) || new[j] < old[i]:
			added(new[j])
			j++
		default:
			i++
			j++
		}
	}
}

// TextRecord is a record the word index names for a text: its id and the
// record as held. Title and Whole are decided on an exact answer only: the
// text is in its title as shown, and stands as whole words somewhere.
// Plain: the record's list texts are plain (Texts.Plain).
type TextRecord struct {
	ID                  string
	Raw                 bson.Raw
	Title, Whole, Plain bool
}

// textToken is a word of a query's text, and whether other characters
// bound it inside the text on the left and on the right.
type textToken struct {
	word        string
	left, right bool
}

// Text answers which records may hold needle (folded as Words.Texts
// folds), in the order they were first put: exact, they are the records
// holding it, with Title and Whole decided; otherwise a superset the
// caller reads to decide. ok is false when the index cannot answer: the
// collection has no word index, a record is held without its words, or
// needle holds no letter or digit.
func (mc *Coll) Text(needle string) (recs []TextRecord, exact, ok bool) {
	return mc.text(needle, groupAll)
}

// ListText is Text over the texts a list's free-text filter reads (the
// list's own words where Words.Listed, else every text), each record
// saying whether it is plain; Title and Whole are not decided.
func (mc *Coll) ListText(needle string) (recs []TextRecord, exact, ok bool) {
	if mc != nil && mc.words != nil && mc.spec.Words.Listed {
		return mc.text(needle, groupList)
	}
	return mc.text(needle, groupAll)
}

func (mc *Coll) text(needle string, group wordGroup) (recs []TextRecord, exact, ok bool) {
	if mc == nil || mc.words == nil || mc.words.unindexed > 0 {
		return nil, false, false
	}
	var tokens []textToken
	at := 0
	for _, w := range wordsOf(needle) {
		i := at + strings.Index(needle[at:], w)
		at = i + len(w)
		tokens = append(tokens, textToken{word: w, left: i > 0, right: at < len(needle)})
	}
	if len(tokens) == 0 {
		return nil, false, false
	}
	size := len(mc.locs)
	var cand bitset
	for i, t := range tokens {
		set := mc.words.union(size, t, group)
		if i == 0 {
			cand = set
		} else {
			cand.and(set)
		}
	}
	exact = len(tokens) == 1 && !tokens[0].left && !tokens[0].right
	var title, whole bitset
	if exact && group == groupAll {
		title = mc.words.union(size, tokens[0], groupTitle)
		whole = newBitset(size)
		if at, found := mc.words.vocab[tokens[0].word]; found {
			whole.add(&mc.words.lists, mc.words.postings[at].all)
		}
	}
	cand.each(func(n int32) {
		r := TextRecord{ID: mc.idString(n), Raw: mc.raw(n)}
		r.Plain = plainHeld(r.Raw)
		if title != nil {
			r.Title, r.Whole = title.has(n), whole.has(n)
		}
		recs = append(recs, r)
	})
	return recs, exact, true
}

// union is the records holding a word t may be part of in the texts of
// group: the word itself when others bound it on both sides, else each
// word of the vocabulary it ends, begins or lies in.
func (wi *wordIndex) union(size int, t textToken, group wordGroup) bitset {
	set := newBitset(size)
	add := func(p *wordPosting) { set.add(&wi.lists, *p.entry(group)) }
	if t.left && t.right {
		if at, ok := wi.vocab[t.word]; ok {
			add(&wi.postings[at])
		}
		return set
	}
	// Each occurrence of the word in the list lies in one word of the
	// vocabulary: the one starting last at or before it.
	find := []byte(t.word)
	if t.left { // it must begin a word
		find = append([]byte{0}, find...)
	}
	for from := 0; from < len(wi.list); {
		i := bytes.Index(wi.list[from:], find)
		if i < 0 {
			break
		}
		i += from
		k, _ := slices.BinarySearch(wi.starts, int32(i)+1)
		k-- // the word holding the occurrence
		end := len(wi.list)
		if k+1 < len(wi.starts) {
			end = int(wi.starts[k+1])
		}
		if !t.right || i+len(find) == end { // it must end the word
			add(&wi.postings[wi.places[k]])
			from = end
		} else {
			from = i + 1
		}
	}
	return set
}

// bitset is a set of record numbers.
type bitset []uint64

func newBitset(size int) bitset { return make(bitset, (size+63)/64) }

// add adds the records of entry e of s.
func (b bitset) add(s *slab, e int32) {
	if e < 0 && e != noRecords {
		if d := s.bitmap(-1 - e); d != nil {
			for i, w := range d.bits[:min(len(d.bits), len(b))] {
				b[i] |= w
			}
			return
		}
	}
	s.each(e, func(n int32) { b[n>>6] |= 1 << (n & 63) })
}

func (b bitset) has(n int32) bool { return b[n>>6]&(1<<(n&63)) != 0 }

func (b bitset) and(o bitset) {
	for i := range b {
		b[i] &= o[i]
	}
}

func (b bitset) each(fn func(int32)) {
	for i, w := range b {
		for w != 0 {
			bit := w & -w
			fn(int32(i*64 + bits.TrailingZeros64(bit)))
			w &^= bit
		}
	}
}

// WordsStats is the size of a collection's word index (for the bench).
type WordsStats struct {
	Words, Postings int
}

// WordsStats reports the size of the word index (zero without one).
func (mc *Coll) WordsStats() WordsStats {
	var s WordsStats
	if mc == nil || mc.words == nil {
		return s
	}
	s.Words = len(mc.words.vocab)
	for _, p := range mc.words.postings {
		s.Postings += mc.words.lists.size(p.all) + mc.words.lists.size(p.title) + mc.words.lists.size(p.list)
	}
	return s
}

// wordsFingerprint names a spec's word index in a checkpoint's fingerprint.
func (sp Spec) wordsFingerprint() string {
	if sp.Words == nil {
		return ""
	}
	return fmt.Sprintf(" words=%s%v listed=%t", sp.Words.Name, sp.Words.Fields, sp.Words.Listed)
}
