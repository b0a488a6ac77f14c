package textfold

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
)

func TestLocate(t *testing.T) {
	for _, tc := range []struct {
		text, query string
		match       string // the original text matched; "" for none
		whole       bool
	}{
		{"The Launch plan", "launch", "Launch", true},
		{"relaunched", "launch", "launch", false},
		{"relaunch, then launch", "launch", "launch", true}, // the second match is whole
		{"Café Weekly", "cafe", "Café", true},
		{"CAFÉ", "café", "CAFÉ", true},
		{"Cre\u0301me", "creme", "Cre\u0301me", true},
		{"Zoë Kent", "zoe k", "Zoë K", false},
		{"a.b and axb", "a.b", "a.b", true},
		{"axb", "a.b", "", false},
		{"C++ guide", "c++", "C++", true},
		{"launch_plan", "launch", "launch", true},
		{"", "x", "", false},
		{"Йошкар-Ола", "йошкар", "Йошкар", true},
		{"Йошкар", "иошкар", "Йошкар", true},
		{"Αθήνα", "αθηνα", "Αθήνα", true},
		{"한국어", "한국", "한국", false},
		{"क़िला", "क़ि", "क़ि", false},
	} {
		at, end, whole := Locate(tc.text, fold(tc.query).text)
		got := ""
		if at >= 0 {
			got = tc.text[at:end]
		}
		if got != tc.match || (at >= 0 && whole != tc.whole) {
			t.Errorf("Locate(%q, %q) = %q whole %v; want %q whole %v", tc.text, tc.query, got, whole, tc.match, tc.whole)
		}
	}
}

func TestSnippet(t *testing.T) {
	long := strings.Repeat("word ", 30)
	for _, tc := range []struct {
		text, query, want string
	}{
		{"short text here", "text", "short text here"},
		{"line one\nline two", "two", "line one line two"},
		// Cut inside a word: the piece is dropped.
		{strings.Repeat("abcdefg ", 10) + "needle", "needle", "…" + strings.Repeat("abcdefg ", 7) + "needle"},
		{long + "needle " + long, "needle", "…" + strings.TrimSpace(strings.Repeat("word ", 12)) + " needle " + strings.TrimSpace(strings.Repeat("word ", 12)) + "…"},
	} {
		at, end, _ := Locate(tc.text, fold(tc.query).text)
		if got := Snippet(tc.text, at, end); got != tc.want {
			t.Errorf("snippet of %q in %.30q…:\n got %q\nwant %q", tc.query, tc.text, got, tc.want)
		}
	}
}

// TestFoldPatternFindsWhatLocateFinds checks the literal path's promise: the
// store's pattern (run here by Go's regexp, as the embedded store runs it)
// matches every text in which the Go match finds the query, so narrowing on
// the store loses no hit.
func TestFoldPatternFindsWhatLocateFinds(t *testing.T) {
	alphabet := []rune("aAeEéÉèëcCçoOöøn ñ.*+?()[]{}|^$\\-e\u0301ß1йИи\u0306ΆάαΑ한क़\u093ckK\u212aſsS")
	rng := rand.New(rand.NewPCG(3, 4))
	word := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	checked := 0
	for range 20000 {
		text := word(1 + rng.IntN(12))
		// Half the queries are taken from the text, so they match.
		q := word(1 + rng.IntN(3))
		if rng.IntN(2) == 0 {
			r := []rune(text)
			i := rng.IntN(len(r))
			q = string(r[i:min(len(r), i+1+rng.IntN(4))])
		}
		needle := fold(q).text
		if strings.TrimSpace(needle) == "" {
			continue
		}
		re, err := regexp.Compile(Pattern(needle))
		if err != nil {
			t.Fatalf("pattern of %q: %v", q, err)
		}
		at, _, _ := Locate(text, needle)
		if at >= 0 {
			checked++
			if !re.MatchString(text) {
				t.Fatalf("query %q is in %q (fold %q), but the pattern %q misses it", q, text, fold(text).text, Pattern(needle))
			}
		}
	}
	if checked < 5000 {
		t.Errorf("only %d matching cases checked", checked)
	}
}

func TestWordsOnly(t *testing.T) {
	got := map[string]bool{}
	for _, q := range []string{"launch", "Café Weekly", "launch 2026", "a.b", "C++", `"x"`, "-x", "  ", "e\u0301"} {
		got[q] = WordsOnly(q)
	}
	want := map[string]bool{"launch": true, "Café Weekly": true, "launch 2026": true, "a.b": false, "C++": false, `"x"`: false, "-x": false, "  ": false, "e\u0301": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Fold folds as fold does (the word index holds what Fold gives,
// the match reads what fold gives).
func TestFoldTextIsFold(t *testing.T) {
	for _, s := range []string{"", "Café", "Cafe\u0301", "ZOË", "Йошкар", "\xff\xfeA", "한국어", "C++ a.b", "İstanbul ß ǅ"} {
		if got, want := Fold(s), fold(s).text; got != want {
			t.Errorf("Fold(%q) = %q, fold %q", s, got, want)
		}
	}
}

// Every character folds as the others of its case class do, so a text
// holding a query in any case holds the query's fold (the word index's
// candidates are never fewer than a case-insensitive match finds), and a
// plain character folds into its own class.
func TestFoldIsOneForEveryCaseClass(t *testing.T) {
	for r := rune(0); r <= 0x10FFFF; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		if f := unicode.SimpleFold(r); f != r && foldRune(f) != foldRune(r) {
			t.Errorf("%U %q folds to %q, %U %q of its case class to %q", r, r, foldRune(r), f, f, foldRune(f))
		}
	}
	for _, c := range []struct {
		text  string
		plain bool
	}{{"Launch PLAN", true}, {"ſpring", true}, {"\u212Aelvin", true}, {"ΣΟΦΟΣ σοφος", true}, {"мир Мир", true}, {"Йошкар", false},
		{"Café", false}, {"Cafe\u0301", false}, {"über", false}, {"ǅ", true}} {
		if got := Plain(c.text); got != c.plain {
			t.Errorf("Plain(%q) = %v, want %v", c.text, got, c.plain)
		}
	}
}
