package reportrender

import (
	_ "embed"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/go-pdf/fpdf"
	"golang.org/x/image/font/sfnt"
	"golang.org/x/text/unicode/bidi"
)

// The PDF's text is set in DejaVu Sans (embedded, fonts/LICENSE): Latin,
// Greek, Cyrillic, Armenian, Georgian, Hebrew and Arabic print, with many
// symbols. fpdf draws characters one for one in the order given, so this
// file prepares each line as a reader sees it: Arabic letters take their
// joined forms (initial, medial, final, the lam-alef ligature) from the
// font's presentation forms, and each line is put in display order by the
// Unicode bidirectional algorithm's levels (golang.org/x/text/unicode/bidi),
// a right-to-left line aligned to the right. A character the font lacks
// (most emoji, CJK) prints as U+FFFD, the replacement character: the page
// stays whole and the HTML, CSV and XLSX keep the original text.

var (
	//go:embed fonts/DejaVuSans.ttf
	fontRegular []byte
	//go:embed fonts/DejaVuSans-Bold.ttf
	fontBold []byte
)

// pdfFont is the family the PDF sets its text in.
const pdfFont = "dejavu"

// addFonts embeds the fonts in pdf.
func addFonts(pdf *fpdf.Fpdf) {
	pdf.AddUTF8FontFromBytes(pdfFont, "", fontRegular)
	pdf.AddUTF8FontFromBytes(pdfFont, "B", fontBold)
}

// covered is the set of characters of the Basic Multilingual Plane both
// faces draw (fpdf maps no character beyond it).
var covered = sync.OnceValue(func() []bool {
	set := make([]bool, 0x10000)
	faces := []*sfnt.Font{}
	for _, b := range [][]byte{fontRegular, fontBold} {
		f, err := sfnt.Parse(b)
		if err != nil {
			return set // no character counts as drawn: every one is replaced, the page stays whole
		}
		faces = append(faces, f)
	}
	var buf sfnt.Buffer
	for r := rune(0x20); r < 0x10000; r++ {
		all := true
		for _, f := range faces {
			if g, err := f.GlyphIndex(&buf, r); err != nil || g == 0 {
				all = false
				break
			}
		}
		set[r] = all
	}
	return set
})

// Replacement is what the PDF prints for a character its font lacks.
const Replacement = '\uFFFD'

// pdfText makes s printable by the PDF's font, in logical order: control
// characters become spaces, characters the font lacks the replacement
// character, Arabic letters their joined forms. Lines (pdfLines, pdfLine)
// put it in display order.
func pdfText(s string) string {
	set := covered()
	arabic := false
	out := strings.Map(func(r rune) rune {
		switch {
		case unicode.IsControl(r):
			return ' '
		case r >= 0x10000 || !set[r]:
			if r == 0x200D || (r >= 0xFE00 && r <= 0xFE0F) { // joiners and variation selectors of emoji
				return -1
			}
			return Replacement
		case r >= 0x0600 && r <= 0x06FF:
			arabic = true
		}
		return r
	}, s)
	if arabic {
		out = shapeArabic(out)
	}
	return out
}

// rtlRune reports whether r is a strong right-to-left character.
func rtlRune(r rune) bool {
	if r < 0x0590 {
		return false
	}
	p, _ := bidi.LookupRune(r)
	return p.Class() == bidi.R || p.Class() == bidi.AL
}

// visual puts one line of logical text in display order and tells whether
// its paragraph direction is right to left (its first strong character,
// unless ltr holds it left to right: a line of labelled fields).
// bidi resolves the line's runs and their directions; the levels of text
// without explicit embeddings follow from them (a right-to-left run at 1,
// a left-to-right one at 2 in a right-to-left line; in a left-to-right
// line the number opening a run that follows right-to-left text at 2, the
// rest at 0), and the Unicode algorithm's rule L2 reverses every sequence
// at each level from the highest down to 1, mirroring brackets at odd ones.
func visual(line string, ltr bool) (string, bool) {
	if ltr && strings.Contains(line, fieldSep) {
		// Each field in its order, the fields left to right: the
		// algorithm would carry a number after right-to-left text
		// (a date after an outlet's name) to its left.
		fields := strings.Split(line, fieldSep)
		for i, f := range fields {
			fields[i], _ = visual(f, true)
		}
		return strings.Join(fields, fieldSep), false
	}
	hasRTL := false
	for _, r := range line {
		if rtlRune(r) {
			hasRTL = true
			break
		}
	}
	if !hasRTL {
		return line, false
	}
	rtl := false
	for _, r := range line {
		if ltr {
			break
		}
		p, _ := bidi.LookupRune(r)
		if c := p.Class(); c == bidi.L {
			break
		} else if c == bidi.R || c == bidi.AL {
			rtl = true
			break
		}
	}
	// bidi finds the paragraph's direction from its first strong
	// character: a mark of that direction opens the text it reads, and
	// is left out of the runs.
	dir, mark := bidi.LeftToRight, "\u200E"
	if rtl {
		dir, mark = bidi.RightToLeft, "\u200F"
	}
	var p bidi.Paragraph
	if _, err := p.SetString(mark+line, bidi.DefaultDirection(dir)); err != nil {
		return line, rtl
	}
	o, err := p.Order()
	if err != nil {
		return line, rtl
	}
	var runes []rune
	var levels []int
	for i := 0; i < o.NumRuns(); i++ {
		run := o.Run(i)
		rs := []rune(run.String())
		if i == 0 {
			rs = rs[1:] // the mark
		}
		lv := make([]int, len(rs))
		switch {
		case run.Direction() == bidi.RightToLeft:
			fill(lv, 1)
		case rtl:
			fill(lv, 2)
		case i > 0: // a number right after right-to-left text stays with it
			for j := 0; j < len(rs) && numeric(rs, j); j++ {
				lv[j] = 2
			}
		}
		runes, levels = append(runes, rs...), append(levels, lv...)
	}
	for lvl := 2; lvl >= 1; lvl-- {
		for i := 0; i < len(runes); {
			if levels[i] < lvl {
				i++
				continue
			}
			j := i
			for j < len(runes) && levels[j] >= lvl {
				j++
			}
			slices.Reverse(runes[i:j])
			slices.Reverse(levels[i:j])
			i = j
		}
	}
	for i, r := range runes {
		if levels[i]%2 == 1 {
			if p, _ := bidi.LookupRune(r); p.IsBracket() {
				runes[i] = []rune(bidi.ReverseString(string(r)))[0]
			}
		}
	}
	return string(runes), rtl
}

func fill(lv []int, v int) {
	for i := range lv {
		lv[i] = v
	}
}

// numeric reports whether rs[j] is part of a number: a digit, or a
// separator or sign followed by one.
func numeric(rs []rune, j int) bool {
	c := func(r rune) bidi.Class { p, _ := bidi.LookupRune(r); return p.Class() }
	switch c(rs[j]) {
	case bidi.EN, bidi.AN:
		return true
	case bidi.CS, bidi.ES, bidi.ET:
		return j+1 < len(rs) && (c(rs[j+1]) == bidi.EN || c(rs[j+1]) == bidi.AN)
	}
	return false
}

// pdfLine is s made printable and in display order, for a one-line cell.
func pdfLine(s string) string {
	v, _ := visual(pdfText(s), false)
	return v
}

// pdfLines writes s wrapped at width w, h high per line, each line in
// display order (a line reading right to left aligned to the right), and
// leaves the position at the left margin below it, as MultiCell does.
func pdfLines(pdf *fpdf.Fpdf, w, h float64, s string) {
	writeLines(pdf, w, h, s, false)
}

// fieldSep separates the fields of a line of fields.
const fieldSep = " · "

// pdfFields is pdfLines for a line of fields in the page's language (a
// clip's outlet, date, type …, separated by fieldSep): the fields left to
// right whatever their scripts, each in display order within it.
func pdfFields(pdf *fpdf.Fpdf, w, h float64, s string) {
	writeLines(pdf, w, h, s, true)
}

func writeLines(pdf *fpdf.Fpdf, w, h float64, s string, ltr bool) {
	lines := pdf.SplitText(pdfText(s), w)
	if len(lines) == 0 {
		lines = []string{""}
	}
	for _, l := range lines {
		v, rtl := visual(l, ltr)
		align := "L"
		if rtl {
			align = "R"
		}
		pdf.CellFormat(w, h, v, "", 1, align, false, 0, "")
	}
}

// Arabic letters' presentation forms (Unicode's Arabic Presentation
// Forms-B): the isolated form of each letter, and how many forms it has (2:
// it joins to the letter before it only; 4: to both sides). The other forms
// follow the isolated one: final, initial, medial.
var arabicForms = map[rune]struct {
	isolated rune
	forms    int
}{
	0x0621: {0xFE80, 1}, 0x0622: {0xFE81, 2}, 0x0623: {0xFE83, 2}, 0x0624: {0xFE85, 2}, 0x0625: {0xFE87, 2},
	0x0626: {0xFE89, 4}, 0x0627: {0xFE8D, 2}, 0x0628: {0xFE8F, 4}, 0x0629: {0xFE93, 2}, 0x062A: {0xFE95, 4},
	0x062B: {0xFE99, 4}, 0x062C: {0xFE9D, 4}, 0x062D: {0xFEA1, 4}, 0x062E: {0xFEA5, 4}, 0x062F: {0xFEA9, 2},
	0x0630: {0xFEAB, 2}, 0x0631: {0xFEAD, 2}, 0x0632: {0xFEAF, 2}, 0x0633: {0xFEB1, 4}, 0x0634: {0xFEB5, 4},
	0x0635: {0xFEB9, 4}, 0x0636: {0xFEBD, 4}, 0x0637: {0xFEC1, 4}, 0x0638: {0xFEC5, 4}, 0x0639: {0xFEC9, 4},
	0x063A: {0xFECD, 4}, 0x0641: {0xFED1, 4}, 0x0642: {0xFED5, 4}, 0x0643: {0xFED9, 4}, 0x0644: {0xFEDD, 4},
	0x0645: {0xFEE1, 4}, 0x0646: {0xFEE5, 4}, 0x0647: {0xFEE9, 4}, 0x0648: {0xFEED, 2}, 0x0649: {0xFEEF, 2},
	0x064A: {0xFEF1, 4},
}

// lamAlef is the ligature of lam with each alef, isolated (final: +1).
var lamAlef = map[rune]rune{0x0622: 0xFEF5, 0x0623: 0xFEF7, 0x0625: 0xFEF9, 0x0627: 0xFEFB}

const tatweel = 0x0640

// transparent reports whether r (a mark) is skipped when letters join.
func transparent(r rune) bool {
	return unicode.Is(unicode.Mn, r)
}

// joinsBoth reports whether r joins to the letter after it as well.
func joinsBoth(r rune) bool {
	f, ok := arabicForms[r]
	return r == tatweel || (ok && f.forms == 4)
}

// joinsBefore reports whether r joins to the letter before it.
func joinsBefore(r rune) bool {
	f, ok := arabicForms[r]
	return r == tatweel || (ok && f.forms >= 2)
}

// shapeArabic gives each Arabic letter of s (logical order) the form its
// neighbours call for, marks left where they are.
func shapeArabic(s string) string {
	rs := []rune(s)
	out := make([]rune, 0, len(rs))
	// neighbour finds the next letter from i in step's direction, marks skipped.
	neighbour := func(i, step int) rune {
		for j := i + step; j >= 0 && j < len(rs); j += step {
			if !transparent(rs[j]) {
				return rs[j]
			}
		}
		return 0
	}
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		f, ok := arabicForms[r]
		if !ok {
			out = append(out, r)
			continue
		}
		prev := neighbour(i, -1)
		joinPrev := joinsBoth(prev) && f.forms >= 2
		if r == 0x0644 { // lam, then an alef: the ligature
			j := i + 1
			for j < len(rs) && transparent(rs[j]) {
				j++
			}
			if j < len(rs) {
				if lig, ok := lamAlef[rs[j]]; ok {
					if joinPrev {
						lig++
					}
					out = append(out, lig)
					out = append(out, rs[i+1:j]...)
					i = j
					continue
				}
			}
		}
		joinNext := f.forms == 4 && joinsBefore(neighbour(i, 1))
		form := f.isolated
		switch {
		case joinPrev && joinNext:
			form += 3
		case joinNext:
			form += 2
		case joinPrev:
			form++
		}
		out = append(out, form)
	}
	return string(out)
}
