package textlist

import (
	"maps"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"outreach/ledger/index"
	"outreach/repo"
	"outreach/textfold"
)

// The core's schema takes the word index's specs from here, registered at
// start as the areas register their rules.
func init() { repo.RegisterWords(withWords) }

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
	for _, k := range repo.SearchKinds {
		spec := out[k.Coll]
		spec.Words = &index.Words{Name: wordsExtraction, Fields: k.Fields, Texts: func(d bson.M) index.Texts { return texts(k, d) }, Listed: listedApart(k)}
		out[k.Coll] = spec
	}
	for coll, fields := range listTexts {
		if spec := out[coll]; spec.Words == nil {
			k := repo.SearchKind{Coll: coll, Fields: fields}
			spec.Words = &index.Words{Name: wordsExtraction, Fields: fields, Texts: func(d bson.M) index.Texts { return texts(k, d) }}
			out[coll] = spec
		}
	}
	return out
}

// listedApart reports whether the fields a list's free-text filter reads
// in k's collection differ from those search reads: the word index then
// holds their words apart.
func listedApart(k repo.SearchKind) bool {
	fields, ok := listTexts[k.Coll]
	return ok && !slices.Equal(fields, k.Fields)
}

// texts is what the word index holds of a record of k: the folded text of
// every searched field, and of its title as shown (the first field, and an
// untitled note's first line), exactly as matchDoc reads them; the folded
// texts of the list's fields when they differ; and whether those a list
// reads are plain (textfold.Plain).
func texts(k repo.SearchKind, d bson.M) index.Texts {
	var t index.Texts
	for i, f := range k.Fields {
		for _, v := range repo.Values(d, f) {
			t.All = append(t.All, textfold.Fold(v))
			if i == 0 && k.Kind != "" {
				t.Title = append(t.Title, t.All[len(t.All)-1])
			}
		}
	}
	if line, ok := repo.UntitledLine(k, d); ok {
		t.Title = append(t.Title, textfold.Fold(line))
	}
	listed := k.Fields
	if listedApart(k) {
		listed = listTexts[k.Coll]
		for _, f := range listed {
			for _, v := range repo.Values(d, f) {
				t.List = append(t.List, textfold.Fold(v))
			}
		}
	}
	t.Plain = true
	for _, f := range listed {
		for _, v := range repo.Values(d, f) {
			if !textfold.Plain(v) {
				t.Plain = false
			}
		}
	}
	return t
}

// MaxReadShare: when the word index names more than this share of a
// collection's records for a query it does not decide, the store's
// pattern (one pass over the collection) is asked instead of reading each.
const MaxReadShare = 5
