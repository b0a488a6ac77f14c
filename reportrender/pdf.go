package reportrender

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/go-pdf/fpdf"
)

// Paper sizes of the PDF.
var Papers = []string{"A4", "Letter"}

// The PDF: the team's name and the title on every page, "page n of m" at
// the foot, the figures, the same charts as the page (drawn as vectors,
// their values printed), and the whole clip list, each headline wrapped.
// Its text goes through pdftext.go: set in DejaVu Sans, in display order.

// plain is s without control characters, for the document's metadata.
func plain(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// PDF writes the document on paper ("A4" or "Letter").
func (d *Document) PDF(w io.Writer, paper string) error {
	if paper != "A4" && paper != "Letter" {
		return fmt.Errorf("reportrender: paper %q is not A4 or Letter", paper)
	}
	pdf := fpdf.New("P", "mm", paper, "")
	addFonts(pdf)
	pdf.SetTitle(plain(d.Title()+" · "+d.ScopeName), true)
	if d.Team != "" {
		pdf.SetAuthor(plain(d.Team), true)
	}
	pdf.SetCreator("Outreach", true)
	pdf.SetCreationDate(d.ComputedAt())
	pdf.SetModificationDate(d.ComputedAt())
	pdf.SetMargins(15, 18, 15)
	pdf.SetAutoPageBreak(true, 18)
	pdf.AliasNbPages("{nb}")
	pageW, _ := pdf.GetPageSize()
	bodyW := pageW - 30
	head := d.Title()
	if d.Team != "" {
		head = d.Team + " · " + head
	}
	head, _ = visual(pdfText(head), true)
	pdf.SetHeaderFunc(func() {
		pdf.SetFont(pdfFont, "", 8)
		pdf.SetTextColor(90, 90, 90)
		pdf.SetXY(15, 8)
		pdf.CellFormat(bodyW, 5, head, "", 0, "L", false, 0, "")
		pdf.SetXY(15, 18)
		pdf.SetTextColor(0, 0, 0)
	})
	pdf.SetFooterFunc(func() {
		pdf.SetY(-12)
		pdf.SetFont(pdfFont, "", 8)
		pdf.SetTextColor(90, 90, 90)
		pdf.CellFormat(bodyW/2, 5, pdfLine(d.Moment()), "", 0, "L", false, 0, "")
		pdf.CellFormat(bodyW/2, 5, fmt.Sprintf("Page %d of {nb}", pdf.PageNo()), "", 0, "R", false, 0, "")
		pdf.SetTextColor(0, 0, 0)
	})
	pdf.AddPage()
	pdf.SetFont(pdfFont, "B", 18)
	pdfLines(pdf, bodyW, 9, d.Title())
	pdf.SetFont(pdfFont, "", 10)
	pdfFields(pdf, bodyW, 5, d.Subtitle())
	pdfLines(pdf, bodyW, 5, d.Moment())
	pdf.Ln(3)
	if d.Empty() {
		pdf.SetFont(pdfFont, "B", 12)
		pdfLines(pdf, bodyW, 7, d.EmptyText())
		pdf.Ln(2)
	}
	heading := func(s string) {
		pdf.Ln(3)
		pdf.SetFont(pdfFont, "B", 12)
		pdfLines(pdf, bodyW, 7, s)
		pdf.SetFont(pdfFont, "", 9)
	}
	heading("Figures")
	section := ""
	for _, f := range d.Figures() {
		s := ""
		if f.Section != section {
			s, section = f.Section, f.Section
		}
		pdf.CellFormat(bodyW*0.3, 5, pdfLine(s), "", 0, "L", false, 0, "")
		pdf.CellFormat(bodyW*0.45, 5, pdfLine(f.Name), "", 0, "L", false, 0, "")
		pdf.CellFormat(bodyW*0.25, 5, f.Text(), "", 1, "R", false, 0, "")
	}
	for _, c := range d.Charts() {
		pdfChart(pdf, c, bodyW)
	}
	if d.Kind == KindPipeline {
		p := d.Pipeline
		heading("Stale opportunities")
		if len(p.Stale) == 0 {
			pdfLines(pdf, bodyW, 5, "None.")
		}
		for _, s := range p.Stale {
			pdf.SetFont(pdfFont, "B", 9)
			pdfLines(pdf, bodyW, 4.5, s.Title)
			pdf.SetFont(pdfFont, "", 8)
			pdfFields(pdf, bodyW, 4, fmt.Sprintf("%s · %s · %d days in stage", s.Stage, s.Owner, s.DaysInStage))
			pdf.Ln(1)
		}
		heading("Upcoming embargoes and deadlines")
		if len(p.Upcoming) == 0 {
			pdfLines(pdf, bodyW, 5, "None in the next 30 days.")
		}
		for _, u := range p.Upcoming {
			pdf.SetFont(pdfFont, "B", 9)
			pdfLines(pdf, bodyW, 4.5, u.Title)
			pdf.SetFont(pdfFont, "", 8)
			pdfFields(pdf, bodyW, 4, fmt.Sprintf("%s · %s · %s", u.What, u.At.UTC().Format("2 Jan 2006 15:04 UTC"), u.Owner))
			pdf.Ln(1)
		}
	} else if clips := d.Coverage.Clips; len(clips) > 0 {
		heading(fmt.Sprintf("Clips (%s, newest first)", FormatValue(len(clips))))
		for _, c := range clips {
			pdf.SetFont(pdfFont, "B", 9)
			pdfLines(pdf, bodyW, 4.5, c.Title)
			pdf.SetFont(pdfFont, "", 8)
			parts := []string{c.Outlet, c.PublishedAt.UTC().Format(time.DateOnly), c.Type}
			if c.Sentiment != "" {
				parts = append(parts, c.Sentiment)
			}
			if c.Reach != nil {
				parts = append(parts, "reach "+FormatValue(*c.Reach))
			}
			if len(c.Journalists) > 0 {
				parts = append(parts, strings.Join(c.Journalists, ", "))
			}
			pdfFields(pdf, bodyW, 4, strings.Join(parts, " · "))
			if c.URL != "" {
				pdf.SetTextColor(37, 99, 235)
				pdfFields(pdf, bodyW, 4, c.URL)
				pdf.SetTextColor(0, 0, 0)
			}
			pdf.Ln(1)
		}
	}
	return pdf.Output(w)
}

// pdfChart draws a chart as bars (or a line's points as bars over time),
// each value printed beside it.
func pdfChart(pdf *fpdf.Fpdf, c Chart, bodyW float64) {
	rowH := 5.0
	if len(c.Points) > 26 && c.Line {
		rowH = 3.2
	}
	need := 12 + rowH*float64(len(c.Points))
	_, pageH := pdf.GetPageSize()
	if pdf.GetY()+min(need, 60) > pageH-20 {
		pdf.AddPage()
	}
	pdf.Ln(3)
	pdf.SetFont(pdfFont, "B", 11)
	pdfLines(pdf, bodyW, 6, c.Title)
	max := 0.0
	for _, p := range c.Points {
		if p.Value > max {
			max = p.Value
		}
	}
	if max == 0 {
		max = 1
	}
	labelW, valueW := bodyW*0.3, bodyW*0.15
	barW := bodyW - labelW - valueW
	size := 8.0
	if rowH < 5 {
		size = 6.5
	}
	pdf.SetFont(pdfFont, "", size)
	for _, p := range c.Points {
		if pdf.GetY()+rowH > pageH-20 {
			pdf.AddPage()
			pdf.SetFont(pdfFont, "", size)
		}
		x, y := pdf.GetX(), pdf.GetY()
		pdf.CellFormat(labelW, rowH, pdfLine(clip(p.Label, 40)), "", 0, "L", false, 0, "")
		pdf.SetFillColor(37, 99, 235)
		if w := p.Value / max * (barW - 2); w > 0 {
			pdf.Rect(x+labelW, y+rowH*0.15, w, rowH*0.7, "F")
		}
		pdf.SetX(x + labelW + barW)
		pdf.CellFormat(valueW, rowH, FormatValue(p.Value), "", 1, "R", false, 0, "")
	}
}
