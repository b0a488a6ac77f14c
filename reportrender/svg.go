package reportrender

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SVG charts, drawn here: each is a self-contained <svg> with role="img",
// a <title> and a <desc> naming it (aria-labelledby), and every data point
// a shape carrying its own <title> ("label: value") and data-label and
// data-value attributes, so screen readers, tooltips and tests read the
// same figures. Colours are presentation attributes, never style
// attributes, so the page's Content-Security-Policy needs no 'unsafe-inline'.

const (
	hbarTop    = 8.0
	hbarRow    = 26.0
	svgWidth   = 640
	svgHeight  = 280
	barColour  = "#2563eb"
	inkColour  = "#1f2937"
	gridColour = "#d1d5db"
)

// rawNumber prints a value as data: digits, a point, no grouping.
func rawNumber(v any) string {
	switch x := v.(type) {
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}

func esc(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&#39;")
		default:
			if r == utf8.RuneError || (r < 0x20 && r != '\t' && r != '\n') {
				b.WriteRune('\uFFFD')
				continue
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

// clip shortens a label for an axis (the full label is in the point's title).
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// SVG draws a chart.
func (c Chart) SVG() string {
	var b strings.Builder
	id := "chart-" + c.ID
	height := svgHeight
	if c.Horizontal && !c.Line {
		height = int(2*hbarTop + hbarRow*float64(max1(len(c.Points))))
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="%s" role="img" aria-labelledby="%s-title %s-desc" viewBox="0 0 %d %d" width="%d" height="%d" font-family="sans-serif" font-size="11">`,
		id, id, id, svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<title id="%s-title">%s</title>`, id, esc(c.Title))
	desc := make([]string, len(c.Points))
	for i, p := range c.Points {
		desc[i] = p.Label + ": " + rawNumber(p.Value)
	}
	fmt.Fprintf(&b, `<desc id="%s-desc">%s (%s). %s</desc>`, id, esc(c.Title), esc(c.Unit), esc(strings.Join(desc, "; ")))
	max := 0.0
	for _, p := range c.Points {
		max = math.Max(max, p.Value)
	}
	if max == 0 {
		max = 1
	}
	switch {
	case c.Line:
		c.line(&b, max)
	case c.Horizontal:
		c.hbars(&b, max)
	default:
		c.vbars(&b, max)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func point(b *strings.Builder, shape string, p Point) {
	fmt.Fprintf(b, `<%s data-label="%s" data-value="%s"><title>%s: %s</title></%s>`, shape, esc(p.Label), rawNumber(p.Value),
		esc(p.Label), FormatValue(p.Value), strings.Fields(shape)[0])
}

func (c Chart) vbars(b *strings.Builder, max float64) {
	left, top, bottom := 48.0, 16.0, 48.0
	h := svgHeight - top - bottom
	w := (svgWidth - left - 8) / float64(max1(len(c.Points)))
	axis(b, left, top, h, max)
	for i, p := range c.Points {
		bh := p.Value / max * h
		x := left + float64(i)*w + w*0.15
		point(b, fmt.Sprintf(`rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"`, x, top+h-bh, w*0.7, bh, barColour), p)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="%s">%s</text>`, x+w*0.35, top+h-bh-3, inkColour, FormatValue(p.Value))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="%s">%s</text>`, x+w*0.35, top+h+14, inkColour, esc(clip(p.Label, int(w/6)+2)))
	}
}

func (c Chart) hbars(b *strings.Builder, max float64) {
	left, top, rowH := 170.0, hbarTop, hbarRow
	wMax := svgWidth - left - 80
	for i, p := range c.Points {
		y := top + float64(i)*rowH
		bw := p.Value / max * wMax
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="%s">%s</text>`, left-6, y+rowH*0.65, inkColour, esc(clip(p.Label, 26)))
		point(b, fmt.Sprintf(`rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"`, left, y+rowH*0.15, bw, rowH*0.7, barColour), p)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s">%s</text>`, left+bw+4, y+rowH*0.65, inkColour, FormatValue(p.Value))
	}
}

func (c Chart) line(b *strings.Builder, max float64) {
	left, top, bottom := 48.0, 16.0, 48.0
	h := svgHeight - top - bottom
	n := len(c.Points)
	step := float64(svgWidth-left-64) / float64(max1(n-1))
	axis(b, left, top, h, max)
	xy := func(i int) (float64, float64) { return left + 8 + float64(i)*step, top + h - c.Points[i].Value/max*h }
	var path []string
	for i := range c.Points {
		x, y := xy(i)
		path = append(path, fmt.Sprintf("%.1f,%.1f", x, y))
	}
	if n > 1 {
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2" aria-hidden="true"/>`, strings.Join(path, " "), barColour)
	}
	every := max1(n / 8)
	for i, p := range c.Points {
		x, y := xy(i)
		point(b, fmt.Sprintf(`circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"`, x, y, barColour), p)
		if i%every == 0 {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="%s">%s</text>`, x, top+h+14, inkColour, esc(clip(p.Label, 12)))
		}
	}
}

func axis(b *strings.Builder, left, top, h, max float64) {
	fmt.Fprintf(b, `<g aria-hidden="true"><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`, left, top+h, float64(svgWidth-8), top+h, gridColour)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="%s">%s</text>`, left-4, top+8, inkColour, FormatValue(max))
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="%s">0</text></g>`, left-4, top+h, inkColour)
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}
