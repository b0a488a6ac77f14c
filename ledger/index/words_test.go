package index

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The test's extraction: "body" is searched, "title" is searched and is
// the title; texts are lower-cased (the word index takes them folded).
var testWords = &Words{Name: "test", Fields: []string{"title", "body"}, Texts: func(d bson.M) (t Texts) {
	for _, f := range []string{"title", "body"} {
		if s, ok := d[f].(string); ok {
			t.All = append(t.All, strings.ToLower(s))
			if f == "title" {
				t.Title = append(t.Title, strings.ToLower(s))
			}
		}
	}
	t.Plain = true
	return t
}}

var testWordsSpec = Spec{Drop: []string{"body"}, Words: testWords}

type textDoc struct{ id, title, body string }

// held puts d as the engine does: the whole record through Held.
func putHeld(t testing.TB, mc *Coll, d textDoc) {
	t.Helper()
	full, err := bson.Marshal(bson.M{"_id": d.id, "title": d.title, "body": d.body})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := testWordsSpec.Held(full)
	if err != nil {
		t.Fatal(err)
	}
	mc.Put(raw)
	held, ok := mc.Doc(d.id)
	if !ok {
		t.Fatalf("record %s is not held", d.id)
	}
	if _, err := held.LookupErr("body"); err == nil {
		t.Fatal("the dropped field is held")
	}
}

// bruteText is what Text must answer for needle: the records whose texts
// hold it, in the title, as whole words (no letter or digit either side).
func bruteText(docs map[string]textDoc, needle string) map[string][2]bool {
	out := map[string][2]bool{}
	whole := func(s string) bool {
		for from := 0; ; {
			i := strings.Index(s[from:], needle)
			if i < 0 {
				return false
			}
			i += from
			before, after := []rune(s[:i]), []rune(s[i+len(needle):])
			if (len(before) == 0 || !wordRune(before[len(before)-1])) && (len(after) == 0 || !wordRune(after[0])) {
				return true
			}
			from = i + 1
		}
	}
	for id, d := range docs {
		title, body := strings.ToLower(d.title), strings.ToLower(d.body)
		if strings.Contains(title, needle) || strings.Contains(body, needle) {
			out[id] = [2]bool{strings.Contains(title, needle), whole(title) || whole(body)}
		}
	}
	return out
}

// checkText compares Text with the brute force: equal when exact, a
// superset otherwise.
func checkText(t *testing.T, mc *Coll, docs map[string]textDoc, needle string) {
	t.Helper()
	recs, exact, ok := mc.Text(needle)
	want := bruteText(docs, needle)
	if !ok {
		if len(wordsOf(needle)) > 0 {
			t.Errorf("%q: not answered", needle)
		}
		return
	}
	got := map[string][2]bool{}
	for i, r := range recs {
		got[r.ID] = [2]bool{r.Title, r.Whole}
		n, _ := mc.find(r.ID)
		prev, _ := mc.find(recs[max(i-1, 0)].ID)
		if i > 0 && n <= prev {
			t.Errorf("%q: records out of their order", needle)
		}
	}
	wantExact := !strings.ContainsFunc(needle, func(r rune) bool { return !wordRune(r) })
	if exact != wantExact {
		t.Errorf("%q: exact %v", needle, exact)
	}
	for id, w := range want {
		g, found := got[id]
		if !found {
			t.Errorf("%q: %s (%q / %q) holds it, not named", needle, id, docs[id].title, docs[id].body)
		} else if exact && g != w {
			t.Errorf("%q: %s (%q / %q): title, whole %v, want %v", needle, id, docs[id].title, docs[id].body, g, w)
		}
	}
	if exact {
		for id := range got {
			if _, found := want[id]; !found {
				t.Errorf("%q: %s (%q / %q) named, does not hold it", needle, id, docs[id].title, docs[id].body)
			}
		}
	}
}

var textVocabulary = []string{"launch", "relaunch", "launched", "plan", "a", "ab", "b", "c++", "a.b", "x", "é", "zoë", "12", "3", "q-1", "(guide)", "über", "мир"}

func randomText(rng *rand.Rand) string {
	var words []string
	for range rng.IntN(6) {
		words = append(words, textVocabulary[rng.IntN(len(textVocabulary))])
	}
	seps := []string{" ", "  ", ", ", ".", "-", "\n", ""}
	var b strings.Builder
	for i, w := range words {
		if i > 0 {
			b.WriteString(seps[rng.IntN(len(seps))])
		}
		b.WriteString(w)
	}
	return b.String()
}

// needlesOf are pieces of the texts: every substring of a few of them,
// across word boundaries, and some that are nowhere.
func needlesOf(rng *rand.Rand, docs map[string]textDoc) []string {
	needles := []string{"launch", "aunch", "laun", "plan", "launch plan", "h p", "a.b", "c++", "+", "b", "é", "zoë", "nowhere", "12", "2 3", " ", "q-"}
	for _, d := range docs {
		s := strings.ToLower(d.title + " " + d.body)
		r := []rune(s)
		if len(r) == 0 {
			continue
		}
		i := rng.IntN(len(r))
		j := i + 1 + rng.IntN(min(len(r)-i, 12))
		needles = append(needles, string(r[i:j]))
	}
	return needles
}

// Text names every record holding a text (exactly, with its title and
// whole-word flags, for one word), through creates and replacements that
// add and remove words, and after a checkpoint's round trip.
func TestTextAnswersAsAScanOfTheTexts(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 1))
	mc := NewColl(testWordsSpec)
	docs := map[string]textDoc{}
	var ids []string
	for i := range 80 {
		d := textDoc{id: fmt.Sprint("r", i), title: randomText(rng), body: randomText(rng)}
		docs[d.id] = d
		ids = append(ids, d.id)
		putHeld(t, mc, d)
	}
	for range 60 { // replacements: words leave and join
		id := ids[rng.IntN(len(ids))]
		d := docs[id]
		if rng.IntN(2) == 0 {
			d.title = randomText(rng)
		} else {
			d.body = randomText(rng)
		}
		docs[id] = d
		putHeld(t, mc, d)
	}
	for _, n := range needlesOf(rng, docs) {
		checkText(t, mc, docs, n)
	}
	// No posting is left for a word no record holds any more.
	for w, at := range mc.words.vocab {
		for _, n := range mc.words.lists.list(mc.words.postings[at].all) {
			if !slices.Contains(wordsOf(strings.ToLower(docs[mc.idString(n)].title+" "+docs[mc.idString(n)].body)), w) {
				t.Errorf("%q lists %s, which does not hold it", w, mc.idString(n))
			}
		}
	}

	var buf bytes.Buffer
	specs := map[string]Spec{"c": testWordsSpec}
	if err := WriteCheckpoint(&buf, Position{Database: "d", Counter: 1}, specs, Snap(map[string]*Coll{"c": mc})); err != nil {
		t.Fatal(err)
	}
	_, colls, err := ReadCheckpoint(bytes.NewReader(buf.Bytes()), specs)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range needlesOf(rng, docs) {
		checkText(t, colls["c"], docs, n)
	}
	// A checkpoint written without the word index is not taken with it.
	buf.Reset()
	plain := map[string]Spec{"c": {Drop: []string{"body"}}}
	if err := WriteCheckpoint(&buf, Position{Database: "d", Counter: 1}, plain, Snap(map[string]*Coll{"c": NewColl(plain["c"])})); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadCheckpoint(bytes.NewReader(buf.Bytes()), specs); err == nil {
		t.Error("a checkpoint without the word index was taken")
	}
}

// A record held without its words (put without Held) makes the index
// decline every text until it is replaced by one with them: an answer
// missing its words would miss hits.
func TestTextDeclinesWhileARecordLacksItsWords(t *testing.T) {
	mc := NewColl(testWordsSpec)
	putHeld(t, mc, textDoc{id: "a", title: "launch"})
	raw, _ := bson.Marshal(bson.M{"_id": "b", "title": "launch"})
	mc.Put(raw)
	if _, _, ok := mc.Text("launch"); ok {
		t.Fatal("answered with a record lacking its words")
	}
	putHeld(t, mc, textDoc{id: "b", title: "launch"})
	if recs, _, ok := mc.Text("launch"); !ok || len(recs) != 2 {
		t.Fatalf("after the record got its words: %v %v", recs, ok)
	}
	if _, _, ok := mc.Text(" .+"); ok {
		t.Error("answered a text without a word")
	}
}

func FuzzText(f *testing.F) {
	f.Add("launch plan", "relaunched it", "aunch")
	f.Add("a.b c++", "x", "a.b")
	f.Add("Zoë", "über мир", "ë")
	f.Fuzz(func(t *testing.T, title, body, needle string) {
		needle = strings.ToLower(needle)
		if needle == "" || !isValidUTF8(title+body+needle) {
			return
		}
		mc := NewColl(testWordsSpec)
		docs := map[string]textDoc{"a": {id: "a", title: title, body: body}, "b": {id: "b", title: body, body: title + " x"}}
		putHeld(t, mc, docs["a"])
		putHeld(t, mc, docs["b"])
		checkText(t, mc, docs, needle)
	})
}

func isValidUTF8(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// BenchmarkWordIndexMemory reports what the word index adds to the index
// of 100,000 notes shaped as the bench seeds them (a title, a sentence of
// content, every tenth with one more word): the live heap with it and
// without, and the time the index takes to answer the bench's query
// (10,000 hits).
func BenchmarkWordIndexMemory(b *testing.B) {
	const notes = 100000
	build := func(spec Spec) *Coll {
		mc := NewColl(spec)
		for i := range notes {
			content := fmt.Sprintf("Call %d: went through the launch plan, asked for an embargoed briefing next week and the spokesperson's availability.", i)
			if i%10 == 0 {
				content += " Wants the quarterly numbers first."
			}
			full, err := bson.Marshal(bson.M{"_id": fmt.Sprintf("%036d", i), "title": fmt.Sprint("Note ", i), "body": content, "type": "phone_call"})
			if err != nil {
				b.Fatal(err)
			}
			raw, err := spec.Held(full)
			if err != nil {
				b.Fatal(err)
			}
			mc.Put(raw)
		}
		return mc
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for range b.N {
		start := heap()
		plain := build(Spec{Drop: []string{"body"}})
		without := heap() - start
		runtime.KeepAlive(plain)
		plain = nil
		start = heap()
		words := build(testWordsSpec)
		with := heap() - start
		started := time.Now()
		for range 20 {
			if recs, exact, _ := words.Text("quarterly"); !exact || len(recs) != notes/10 {
				b.Fatalf("%d hits", len(recs))
			}
		}
		b.ReportMetric(float64(time.Since(started).Microseconds())/20/1000, "ms/text")
		runtime.KeepAlive(words)
		b.ReportMetric(float64(without)/1e6, "MB-without")
		b.ReportMetric(float64(with)/1e6, "MB-with")
		st := words.WordsStats()
		b.ReportMetric(float64(st.Words), "words")
		b.ReportMetric(float64(st.Postings), "postings")
	}
}

// Words no record holds any more leave the vocabulary (blanked, then
// compacted away) and are found no more; the words that replace them are.
func TestTextAfterWordsLeave(t *testing.T) {
	mc := NewColl(testWordsSpec)
	docs := map[string]textDoc{}
	for round := range 4 {
		for i := range 50 {
			d := textDoc{id: fmt.Sprint("r", i), title: fmt.Sprintf("w%dx%d", round, i), body: fmt.Sprintf("common r%dn%d", round, i*7)}
			docs[d.id] = d
			putHeld(t, mc, d)
		}
		for _, n := range []string{"w0", "w3", "x1", "r2n", "n14", "common", "mmo", fmt.Sprintf("w%dx4", round), "w1x49", "3x", "x4"} {
			checkText(t, mc, docs, n)
		}
	}
	if len(mc.words.vocab) != 1+2*50 {
		t.Errorf("%d words held, want %d", len(mc.words.vocab), 1+2*50)
	}
	live := 0
	for w := range mc.words.vocab {
		live += len(w) + 1
	}
	if len(mc.words.list) > 2*live {
		t.Errorf("the list of words holds %d bytes for %d of words held: never compacted", len(mc.words.list), live)
	}
}

// The list's extraction: every text is searched, only "body" is listed,
// and a record whose body holds "é" is not plain.
var listedWordsSpec = Spec{Drop: []string{"body"}, Words: &Words{Name: "listed", Fields: []string{"title", "body"}, Listed: true,
	Texts: func(d bson.M) Texts {
		t := testWords.Texts(d)
		body, _ := d["body"].(string)
		t.List = []string{strings.ToLower(body)}
		t.Plain = !strings.Contains(body, "é")
		return t
	}}}

// ListText answers over the list's texts alone (exact for one word, a
// superset otherwise) and says which records are plain, through
// replacements, removals and a checkpoint's round trip; where the spec
// does not list texts of its own, it answers as Text.
func TestListTextAnswersOverTheListedTexts(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 7))
	mc := NewColl(listedWordsSpec)
	docs := map[string]textDoc{}
	put := func(d textDoc) {
		full, err := bson.Marshal(bson.M{"_id": d.id, "title": d.title, "body": d.body})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := listedWordsSpec.Held(full)
		if err != nil {
			t.Fatal(err)
		}
		mc.Put(raw)
		docs[d.id] = d
	}
	for i := range 80 {
		put(textDoc{id: fmt.Sprint("r", i), title: randomText(rng), body: randomText(rng)})
	}
	for range 60 {
		d := docs[fmt.Sprint("r", rng.IntN(80))]
		d.title, d.body = randomText(rng), randomText(rng)
		put(d)
	}
	bodies := map[string]textDoc{}
	for id, d := range docs {
		bodies[id] = textDoc{id: id, body: d.body}
	}
	check := func(mc *Coll) {
		for _, needle := range needlesOf(rng, docs) {
			recs, exact, ok := mc.ListText(needle)
			if !ok {
				if len(wordsOf(needle)) > 0 {
					t.Errorf("%q: not answered", needle)
				}
				continue
			}
			want := bruteText(bodies, needle)
			got := map[string]bool{}
			for _, r := range recs {
				got[r.ID] = true
				if r.Plain != !strings.Contains(docs[r.ID].body, "é") {
					t.Errorf("%q: %s plain %v, body %q", needle, r.ID, r.Plain, docs[r.ID].body)
				}
			}
			for id := range want {
				if !got[id] {
					t.Errorf("%q: %s (body %q) holds it, not named", needle, id, docs[id].body)
				}
			}
			if exact && len(got) != len(want) {
				t.Errorf("%q: exact, %d named, %d hold it in the body", needle, len(got), len(want))
			}
		}
	}
	check(mc)
	var buf bytes.Buffer
	specs := map[string]Spec{"c": listedWordsSpec}
	if err := WriteCheckpoint(&buf, Position{Database: "d", Counter: 1}, specs, Snap(map[string]*Coll{"c": mc})); err != nil {
		t.Fatal(err)
	}
	_, colls, err := ReadCheckpoint(&buf, specs)
	if err != nil {
		t.Fatal(err)
	}
	check(colls["c"])

	plainMC := NewColl(testWordsSpec)
	for _, d := range docs {
		putHeld(t, plainMC, d)
	}
	for _, needle := range []string{"launch", "a.b", "zoë"} {
		l, lexact, _ := plainMC.ListText(needle)
		a, aexact, _ := plainMC.Text(needle)
		if len(l) != len(a) || lexact != aexact {
			t.Errorf("%q: without listed texts ListText named %d (exact %v), Text %d (exact %v)", needle, len(l), lexact, len(a), aexact)
		}
	}
}
