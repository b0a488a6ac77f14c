package reportrender

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"io"
	"slices"
	"time"

	"outreach/repo/reports"
)

// The HTML page: one self-contained document with no script, no image,
// font or style sheet fetched, the charts drawn inline as SVG, the style
// inline and allowed by its hash alone (CSP), text that may be right to
// left marked dir="auto", long words wrapped.

// HTMLClips is how many clips the page lists (the highest reach first);
// CSV and XLSX hold them all.
const HTMLClips = 100

const pageStyle = `body{font-family:system-ui,sans-serif;color:#1f2937;margin:0 auto;max-width:980px;padding:16px 24px;line-height:1.4}
header p{margin:2px 0;color:#4b5563}h1{margin:4px 0 2px;font-size:1.6em}h2{margin-top:28px;font-size:1.2em;border-bottom:1px solid #e5e7eb}
table{border-collapse:collapse;width:100%;font-size:.92em}th,td{text-align:start;padding:4px 6px;border-bottom:1px solid #e5e7eb;vertical-align:top;overflow-wrap:anywhere}
td.n,th.n{text-align:end;font-variant-numeric:tabular-nums;white-space:nowrap}.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:8px 24px}figure{margin:12px 0}figure h3{font-size:1em;margin:0 0 6px}svg.chart{width:100%;height:auto}
.empty{font-size:1.1em;padding:16px;background:#f3f4f6}.note{color:#4b5563;font-size:.85em}footer{margin-top:32px;color:#6b7280;font-size:.85em}`

// styleHash is the page style's CSP source.
var styleHash = func() string {
	sum := sha256.Sum256([]byte(pageStyle))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}()

// CSP is the Content-Security-Policy the page is served with: nothing may
// load, run, frame it or be posted from it; only its own style applies.
var CSP = "default-src 'none'; style-src " + styleHash + "; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{{.Title}}{{with .Team}} · {{.}}{{end}}</title><style>{{.Style}}</style></head>
<body><header>{{with .Team}}<p dir="auto" id="team">{{.}}</p>{{end}}<h1>{{.Title}}</h1>
<p dir="auto" id="scope">{{.Subtitle}}</p><p id="moment">{{.Moment}}</p></header>
<main>
{{if .Empty}}<p class="empty" id="empty" role="status">{{.EmptyText}}</p>{{end}}
{{if .Charts}}<h2>Charts</h2><div class="charts">{{range .Charts}}<figure aria-labelledby="cap-{{.ID}}"><h3 id="cap-{{.ID}}">{{.Title}}</h3>{{.SVG}}</figure>
{{end}}</div>{{end}}
<h2>Figures</h2>
<table id="figures"><thead><tr><th scope="col">section</th><th scope="col">figure</th><th scope="col" class="n">value</th></tr></thead><tbody>
{{range .Figures}}<tr data-key="{{.Key}}"><td>{{.Section}}</td><td dir="auto">{{.Name}}</td><td class="n" data-value="{{.Raw}}">{{.Text}}</td></tr>
{{end}}</tbody></table>

{{if .Coverage}}{{if .Clips}}<h2>Clips</h2>
<p class="note">{{if .More}}The {{len .Clips}} clips with the highest reach of {{.AllClips}}{{if .Shared}}.{{else}}; the CSV and XLSX list them all.{{end}}{{else}}All {{len .Clips}} clips, the highest reach first.{{end}}</p>
<table id="clips"><thead><tr><th scope="col">headline</th><th scope="col">outlet</th><th scope="col">date</th><th scope="col">type</th><th scope="col">sentiment</th><th scope="col" class="n">reach</th><th scope="col">journalist</th></tr></thead><tbody>
{{range .Clips}}<tr><td dir="auto">{{if .URL}}<a href="{{.URL}}" rel="noopener noreferrer nofollow">{{.Title}}</a>{{else}}{{.Title}}{{end}}</td><td dir="auto">{{.Outlet}}</td><td>{{.Date}}</td><td>{{.Type}}</td><td>{{.Sentiment}}</td><td class="n">{{.Reach}}</td><td dir="auto">{{.Journalists}}</td></tr>
{{end}}</tbody></table>{{end}}
<h2>How the figures are counted</h2><ul class="note">{{range .Labels}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .Pipeline}}<h2>Stale opportunities</h2>
{{if .Stale}}<table id="stale"><thead><tr><th scope="col">opportunity</th><th scope="col">stage</th><th scope="col">owner</th><th scope="col" class="n">days in stage</th></tr></thead><tbody>
{{range .Stale}}<tr><td dir="auto">{{.Title}}</td><td>{{.Stage}}</td><td dir="auto">{{.Owner}}</td><td class="n">{{.DaysInStage}}</td></tr>
{{end}}</tbody></table>{{else}}<p>None.</p>{{end}}
<h2>Upcoming embargoes and deadlines</h2>
{{if .Upcoming}}<table id="upcoming"><thead><tr><th scope="col">opportunity</th><th scope="col">what</th><th scope="col">when</th><th scope="col">owner</th></tr></thead><tbody>
{{range .Upcoming}}<tr><td dir="auto">{{.Title}}</td><td>{{.What}}</td><td>{{.When}}</td><td dir="auto">{{.Owner}}</td></tr>
{{end}}</tbody></table>{{else}}<p>None in the next 30 days.</p>{{end}}
<ul class="note">{{range .Labels}}<li>{{.}}</li>{{end}}</ul>{{end}}
</main><footer>{{.Title}}{{with .Team}} · {{.}}{{end}} · {{.Moment}}</footer></body></html>
`))

type htmlFigure struct {
	Figure
	Raw string
}

type htmlClip struct {
	Title, URL, Outlet, Date, Type, Sentiment, Reach, Journalists string
}

type htmlUpcoming struct {
	reports.Upcoming
	When string
}

// topClips are the n clips of the highest reach (then newest), the order
// the page lists them in.
func topClips(clips []reports.Clip, n int) []reports.Clip {
	out := slices.Clone(clips)
	slices.SortStableFunc(out, func(a, b reports.Clip) int {
		ra, rb := int64(-1), int64(-1)
		if a.Reach != nil {
			ra = *a.Reach
		}
		if b.Reach != nil {
			rb = *b.Reach
		}
		if c := cmp.Compare(rb, ra); c != 0 {
			return c
		}
		return b.PublishedAt.Compare(a.PublishedAt)
	})
	return out[:min(n, len(out))]
}

// HTML writes the page.
func (d *Document) HTML(w io.Writer) error {
	data := map[string]any{"Title": d.Title(), "Team": d.Team, "Subtitle": d.Subtitle(), "Moment": d.Moment(), "Style": template.CSS(pageStyle),
		"Empty": d.Empty(), "EmptyText": d.EmptyText(), "Shared": d.SharedAt != nil}
	var figs []htmlFigure
	for _, f := range d.Figures() {
		figs = append(figs, htmlFigure{f, rawNumber(f.Value)})
	}
	data["Figures"] = figs
	var charts []map[string]any
	for _, c := range d.Charts() {
		charts = append(charts, map[string]any{"ID": c.ID, "Title": c.Title, "SVG": template.HTML(c.SVG())})
	}
	data["Charts"] = charts
	if d.Kind == KindPipeline {
		p := d.Pipeline
		data["Pipeline"] = true
		data["Stale"] = p.Stale
		var up []htmlUpcoming
		for _, u := range p.Upcoming {
			up = append(up, htmlUpcoming{u, u.At.UTC().Format("2 Jan 2006 15:04 UTC")})
		}
		data["Upcoming"] = up
		data["Labels"] = []string{p.Conversion.Label, p.StaleLabel, p.UpcomingLabel}
	} else {
		c := d.Coverage
		data["Coverage"] = true
		var clips []htmlClip
		for _, x := range topClips(c.Clips, HTMLClips) {
			hc := htmlClip{Title: x.Title, URL: webURL(x.URL), Outlet: x.Outlet, Date: x.PublishedAt.UTC().Format(time.DateOnly), Type: x.Type, Sentiment: x.Sentiment}
			if x.Reach != nil {
				hc.Reach = FormatValue(*x.Reach)
			}
			for i, j := range x.Journalists {
				if i > 0 {
					hc.Journalists += ", "
				}
				hc.Journalists += j
			}
			clips = append(clips, hc)
		}
		data["Clips"], data["AllClips"], data["More"] = clips, c.Items, c.Items > len(clips)
		labels := []string{c.Reach.TotalImpressionsLabel, c.Reach.UniqueAudienceLabel, c.Share.Label, c.Pitches.Label, c.TrendNote}
		if c.AVE != nil {
			labels = append(labels, c.AVE.Label)
		}
		data["Labels"] = labels
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, data); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// webURL keeps an http(s) link and drops anything else (the template
// would neutralise it anyway).
func webURL(u string) string {
	if len(u) > 8 && (u[:7] == "http://" || u[:8] == "https://") {
		return u
	}
	return ""
}
