package reportrender

import (
	"testing"

	"golang.org/x/text/unicode/norm"
)

// TestVisualOrder checks the display order of lines mixing directions, as
// the Unicode bidirectional algorithm orders them.
func TestVisualOrder(t *testing.T) {
	for _, c := range []struct {
		in, want string
		rtl      bool
	}{
		{"plain Latin (text) 2026", "plain Latin (text) 2026", false},
		{"עיתונות", "תונותיע", true},
		{"Acme עיתונות launch", "Acme תונותיע launch", false},
		{"Acme עיתונות 2026 launch", "Acme 2026 תונותיע launch", false},
		{"עיתונות 2026 טובה", "הבוט 2026 תונותיע", true},
		{"עיתונות (Acme) טובה", "הבוט (Acme) תונותיע", true},
		{"שלום (עולם)", "(םלוע) םולש", true},
	} {
		got, rtl := visual(c.in, false)
		if got != c.want || rtl != c.rtl {
			t.Errorf("visual(%q) = %q, rtl %v; want %q, rtl %v", c.in, got, rtl, c.want, c.rtl)
		}
	}
	// A line of fields opening with a right-to-left one stays left to right.
	if got, rtl := visual("עיתונות · 2026-10-02 · article", true); rtl || got != "תונותיע · 2026-10-02 · article" {
		t.Errorf("the fields' line = %q, rtl %v", got, rtl)
	}
}

// TestArabicJoins checks the joined forms: a word's letters take their
// initial, medial and final forms, lam-alef its ligature, and the forms
// fold back to the letters (what a text extractor normalising NFKC reads).
func TestArabicJoins(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"بيت", "\uFE91\uFEF4\uFE96"},  // beh initial, yeh medial, teh final
		{"دار", "\uFEA9\uFE8D\uFEAD"},  // dal, alef and reh isolated: none of them joins forward
		{"سلام", "\uFEB3\uFEFC\uFEE1"}, // seen initial, lam-alef final, meem isolated
		{"ب ب", "\uFE8F \uFE8F"},       // a space breaks the joining
		{"بِت", "\uFE91\u0650\uFE96"},  // a mark between letters is skipped
		{"Latin", "Latin"},
	} {
		got := shapeArabic(c.in)
		if got != c.want {
			t.Errorf("shapeArabic(%q) = %+q, want %+q", c.in, got, c.want)
		}
		if back := norm.NFKC.String(got); back != norm.NFKC.String(c.in) {
			t.Errorf("NFKC of the forms of %q = %q", c.in, back)
		}
	}
}

// TestPDFTextReplaces checks the characters the font lacks: emoji beyond
// its coverage print as the replacement character, their joiners and
// variation selectors vanish, control characters become spaces, and the
// scripts it covers stay.
func TestPDFTextReplaces(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Launch 🚀 day", "Launch \uFFFD day"},
		{"👍🏽 ok", "\uFFFD\uFFFD ok"},
		{"❤️", "❤\uFE0F"}, // in the font: the heart and its selector stay
		{"a\tb\nc", "a b c"},
		{"Ελληνικά Русский עברית", "Ελληνικά Русский עברית"},
		{"漢字", "\uFFFD\uFFFD"},
	} {
		if got := pdfText(c.in); got != c.want {
			t.Errorf("pdfText(%q) = %+q, want %+q", c.in, got, c.want)
		}
	}
}
