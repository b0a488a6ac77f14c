// Package textfold folds texts for matching: lower-cased and without
// diacritics ("Café" → "cafe"), with the offsets a match needs to be shown
// in the original text, the pattern a store matches the same way, and the
// snippet and first line a hit shows. It reads and writes nothing and knows
// no record: it sits below the domain's core, whose word index and lists'
// free-text filters fold with it, as search's ranking and snippets do. It is
// not a domain area.
package textfold

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

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

// Fold is fold(s).text, without the offsets (the word index folds
// every searched text of every record it holds).
func Fold(s string) string {
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

// Plain reports whether s folds as case folding alone folds it: each
// character folds to one character of its own case class (no accent taken
// off, no mark dropped). Where a text and a query are plain, the text holds
// the query in any case exactly when its fold holds the query's.
func Plain(s string) bool {
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

// Pattern is a regular expression matching at least every text whose
// fold contains needle; the match in Go then decides. An ASCII letter
// becomes the class of its two cases and of every non-ASCII character (its
// accented forms among them); another ASCII character is quoted, so the
// query is never read as a pattern; a non-ASCII character becomes any
// non-ASCII character; each may be followed by non-ASCII characters
// (accents written apart). It is coarse on purpose: a store may compile the
// pattern for every document it scans (the embedded one does), and exact
// classes of every accented form cost several times as much to compile as
// the scan itself.
func Pattern(needle string) string {
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

// Locate returns where in v the first match of needle (folded) starts and
// ends, or -1, and whether some match stands as whole words (no letter or
// digit directly before or after it).
func Locate(v, needle string) (int, int, bool) {
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

// WordsOnly reports whether q is made of whole words (letters, digits,
// spaces): the queries a text index answers exactly. Anything else (a '.',
// a '+', a '"') takes the literal path even where text search exists.
func WordsOnly(q string) bool {
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

// Snippet is the text around v[at:to], one line, cut at word boundaries,
// with "…" where it was cut.
func Snippet(v string, at, to int) string {
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
