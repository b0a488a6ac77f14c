package repo

import (
	"testing"
	"unicode"
)

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
		if got := plainText(c.text); got != c.plain {
			t.Errorf("plainText(%q) = %v, want %v", c.text, got, c.plain)
		}
	}
}
