package tools

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/repo"
	"outreach/repo/pipeline"
	"outreach/repo/reports"
	"outreach/reportrender"
)

// Rendered and shared reports (toolset reports): render_report answers a
// report as a document people read (HTML, PDF, CSV, XLSX, a PNG chart);
// share_report freezes one behind a signed, expiring, revocable link.

// InlineTextMax is the largest CSV or HTML rendering answered inline as
// text; larger ones, and every PDF and XLSX, are answered with a download
// link. InlineImageMax is the same for a PNG, answered as image content.
const (
	InlineTextMax  = 32 << 10
	InlineImageMax = 1 << 20
)

// reportQuery checks a report's kind, scope and range, with
// get_coverage_report's defaults.
func reportQuery(kind, since, until, campaignID string, outletIDs []string) (reports.ReportQuery, error) {
	if err := checkEnum("kind", kind, reportrender.Kinds); err != nil {
		return reports.ReportQuery{}, err
	}
	cq, err := coverageQuery(since, until, campaignID, outletIDs)
	if err != nil {
		return reports.ReportQuery{}, err
	}
	return reports.ReportQuery{Kind: kind, Since: cq.Since, Until: cq.Until, CampaignID: cq.CampaignID, OutletIDs: cq.OutletIDs}, nil
}

// renderedReport is render_report's answer.
type renderedReport struct {
	Kind       string    `json:"kind"`
	Format     string    `json:"format"`
	MimeType   string    `json:"mime_type"`
	Filename   string    `json:"filename"`
	SizeBytes  int       `json:"size_bytes"`
	ComputedAt time.Time `json:"computed_at"`
	Chart      string    `json:"chart,omitempty"`
	Paper      string    `json:"paper,omitempty"`
	Table      string    `json:"table,omitempty"`
	// Empty is true when the scope holds nothing; Note says so in words.
	Empty bool   `json:"empty"`
	Note  string `json:"note,omitempty"`
	// Figures are the report's figures by their get_coverage_report path
	// (coverage) or the pipeline report's; every format shows these.
	Figures map[string]any `json:"figures"`
	// Delivery is inline_text (Text holds the rendering), inline_image (an
	// image content follows) or link (a resource link follows, and
	// DownloadURL).
	Delivery          string      `json:"delivery"`
	Text              string      `json:"text,omitempty"`
	DownloadURL       repo.Secret `json:"download_url,omitzero"`
	DownloadExpiresAt *time.Time  `json:"download_expires_at,omitempty"`
}

// sharedReportView is a shared report as the tools show it.
type sharedReportView struct {
	*reports.SharedReport
	State string      `json:"state"`
	Link  repo.Secret `json:"link,omitzero"`
	Note  string      `json:"note,omitempty"`
}

// sharedReportList is list_shared_reports' answer.
type sharedReportList struct {
	SharedReports []sharedReportView `json:"shared_reports"`
}

func figureMap(d *reportrender.Document) map[string]any {
	m := map[string]any{}
	for _, f := range d.Figures() {
		m[f.Key] = f.Value
	}
	return m
}

// ReportDocs are the tools of rendered and shared reports.
func ReportDocs(s *repo.Store) []Tool {
	type renderIn struct {
		Kind       string   `json:"kind" enum:"coverage,pipeline" jsonschema:"coverage (get_coverage_report's figures, charts and clip list) or pipeline (opportunities by stage and owner, conversion, stale, upcoming embargoes and deadlines)"`
		Since      string   `json:"since,omitempty" jsonschema:"first moment counted, inclusive (YYYY-MM-DD or ISO datetime); default 30 days before until, as get_coverage_report"`
		Until      string   `json:"until,omitempty" jsonschema:"last moment counted, inclusive (YYYY-MM-DD = the whole day); default now"`
		CampaignID string   `json:"campaign_id,omitempty" jsonschema:"one campaign (UUID); leave out campaign_id and outlet_ids for the whole team"`
		OutletIDs  []string `json:"outlet_ids,omitempty" jsonschema:"coverage of these outlets (UUIDs); coverage report only, not with campaign_id"`
		Format     string   `json:"format" enum:"html,pdf,csv,xlsx,png" jsonschema:"html (one self-contained page with SVG charts), pdf, csv (one table), xlsx (every table, a sheet each), png (one chart, shown in the chat)"`
		Chart      string   `json:"chart,omitempty" jsonschema:"png: the chart (coverage: trend, sentiment, share, tiers, outlets; pipeline: stages, owners, conversion); default the first"`
		Paper      string   `json:"paper,omitempty" enum:"A4,Letter" jsonschema:"pdf: A4 (default) or Letter"`
		Table      string   `json:"table,omitempty" jsonschema:"csv: the table (coverage: figures, clips (default); pipeline: figures (default), stale, upcoming)"`
	}
	type shareIn struct {
		Kind          string   `json:"kind" enum:"coverage,pipeline" jsonschema:"coverage (get_coverage_report's figures, charts and clip list) or pipeline (opportunities by stage and owner, conversion, stale, upcoming embargoes and deadlines)"`
		Since         string   `json:"since,omitempty" jsonschema:"first moment counted, inclusive (YYYY-MM-DD or ISO datetime); default 30 days before until, as get_coverage_report"`
		Until         string   `json:"until,omitempty" jsonschema:"last moment counted, inclusive (YYYY-MM-DD = the whole day); default now"`
		CampaignID    string   `json:"campaign_id,omitempty" jsonschema:"one campaign (UUID); leave out campaign_id and outlet_ids for the whole team"`
		OutletIDs     []string `json:"outlet_ids,omitempty" jsonschema:"coverage of these outlets (UUIDs); coverage report only, not with campaign_id"`
		ExpiresInDays *int     `json:"expires_in_days,omitempty" jsonschema:"how long the link works, 1 to 366 days; default 30"`
	}
	type listIn struct {
		All   bool `json:"all,omitempty" jsonschema:"true lists expired and revoked links too; default the active ones"`
		Limit int  `json:"limit,omitempty" jsonschema:"at most this many, newest first (1 to 200, default 50)"`
	}
	type revokeIn struct {
		ID string `json:"id" jsonschema:"the shared report's id (UUID)"`
	}
	type pipelineIn struct {
		Since      string `json:"since,omitempty" jsonschema:"start of the conversion window, inclusive (YYYY-MM-DD or ISO datetime); default 30 days before until"`
		Until      string `json:"until,omitempty" jsonschema:"end of the conversion window, inclusive (YYYY-MM-DD = the whole day); default now"`
		CampaignID string `json:"campaign_id,omitempty" jsonschema:"one campaign (UUID); leave out for the whole team"`
	}
	return []Tool{
		newTool("get_pipeline_report", "The pipeline report: the active opportunities by stage, the open ones by owner, the conversion of those pitched in the range (to responded or later, to placed or later), the stale ones (no stage change for 14 days) and the embargoes, target dates and next actions of the next 30 days. render_report draws it; hosts with MCP Apps show it as a board.", read,
			func(ctx context.Context, in *pipelineIn) (any, error) {
				q, err := reportQuery("pipeline", in.Since, in.Until, in.CampaignID, nil)
				if err != nil {
					return nil, err
				}
				return reports.Of(s).PipelineReport(ctx, reports.PipelineReportQuery{Since: q.Since, Until: q.Until, CampaignID: q.CampaignID})
			}),
		newTool("render_report", "Render the coverage or the pipeline report as a document people read: html (one self-contained page with SVG charts and the clip list), pdf (A4 or Letter, page numbers, the team's name), csv (one table), xlsx (figures and list sheets, typed cells) or png (one chart, answered as an image the chat shows). Same scope and range as get_coverage_report, and the same figures (answered in figures too). Small csv and html come back inline as text; larger renderings, and every pdf and xlsx, as a resource link with a download URL that works for 15 minutes and computes the report when fetched.", read,
			func(ctx context.Context, in *renderIn) (any, error) {
				q, err := reportQuery(in.Kind, in.Since, in.Until, in.CampaignID, in.OutletIDs)
				if err != nil {
					return nil, err
				}
				sp := reportrender.Spec{Format: in.Format, Chart: in.Chart, Paper: in.Paper, Table: in.Table}
				if err := sp.Check(q.Kind); err != nil {
					return nil, err
				}
				q.NoClips = sp.Format == "png" && sp.Chart != "outlets" // the other charts draw no clip
				snap, err := reports.Of(s).Compute(ctx, q)
				if err != nil {
					return nil, err
				}
				doc := reportrender.FromSnapshot(snap, nil)
				out := &renderedReport{Kind: q.Kind, Format: sp.Format, ComputedAt: doc.ComputedAt(), Chart: sp.Chart, Paper: sp.Paper, Table: sp.Table,
					Empty: doc.Empty(), Figures: figureMap(doc)}
				if out.Empty {
					out.Note = doc.EmptyText()
				}
				r, err := reportrender.Render(doc, sp)
				if err != nil {
					return nil, err
				}
				out.MimeType, out.Filename, out.SizeBytes = r.MimeType, r.Filename, len(r.Bytes)
				switch {
				case (sp.Format == "csv" || sp.Format == "html") && len(r.Bytes) <= InlineTextMax:
					out.Delivery, out.Text = "inline_text", string(r.Bytes)
				case sp.Format == "png" && len(r.Bytes) <= InlineImageMax:
					out.Delivery = "inline_image"
					addContent(ctx, &mcp.ImageContent{Data: r.Bytes, MIMEType: "image/png"})
				default:
					base, err := mediaBase(ctx, s)
					if err != nil {
						return nil, err
					}
					exp := pipeline.Of(s).MediaURLExpiry()
					u, err := reports.Of(s).SignRenderURL(ctx, base, reportrender.Params(q, sp), exp)
					if err != nil {
						return nil, err
					}
					if su, err := url.Parse(u.Reveal()); err == nil {
						reportrender.Keep(su.Query().Get("s"), r, exp)
					}
					size := int64(len(r.Bytes))
					out.Delivery, out.DownloadURL, out.DownloadExpiresAt = "link", u, &exp
					mime, _, _ := strings.Cut(r.MimeType, ";")
					addContent(ctx, &mcp.ResourceLink{URI: u.Reveal(), Name: r.Filename, Title: doc.Title() + " (" + sp.Format + ")", MIMEType: mime, Size: &size,
						Description: "download within 15 minutes"})
				}
				return out, nil
			}),
		newTool("share_report", "Share the coverage or the pipeline report with people without an assistant (a client, leadership): a snapshot of the figures as of now, behind a signed link that expires (default 30 days) and can be revoked (revoke_shared_report). The page shows the snapshot's moment, its charts and top clips, and nothing else of the store; each view is counted. The link is shown to you now and by list_shared_reports; it is never stored.", create,
			func(ctx context.Context, in *shareIn) (any, error) {
				q, err := reportQuery(in.Kind, in.Since, in.Until, in.CampaignID, in.OutletIDs)
				if err != nil {
					return nil, err
				}
				ttl := reports.DefaultShareTTL
				if in.ExpiresInDays != nil {
					if d := *in.ExpiresInDays; d < 1 || d > 366 {
						return nil, repo.Invalid("expires_in_days", "is %d; give 1 to 366", d)
					}
					ttl = time.Duration(*in.ExpiresInDays) * 24 * time.Hour
				}
				base, err := mediaBase(ctx, s)
				if err != nil {
					return nil, err
				}
				r, link, err := reports.Of(s).ShareReport(ctx, q, ttl, base)
				if err != nil {
					return nil, err
				}
				return &sharedReportView{SharedReport: r, State: r.State(time.Now()), Link: link,
					Note: "send the link as it is; it shows the figures as of shared_at until expires_at, unless revoked"}, nil
			}),
		newTool("list_shared_reports", "The shared report links, newest first, each with its state (active, expired, revoked, archived), its views and, while active, the link itself again.", read,
			func(ctx context.Context, in *listIn) (any, error) {
				limit := 50
				if in.Limit != 0 {
					if in.Limit < 1 || in.Limit > 200 {
						return nil, repo.Invalid("limit", "is %d; give 1 to 200", in.Limit)
					}
					limit = in.Limit
				}
				list, err := reports.Of(s).ListSharedReports(ctx, in.All, limit)
				if err != nil {
					return nil, err
				}
				base, _ := mediaBase(ctx, s)
				out := &sharedReportList{SharedReports: []sharedReportView{}}
				now := time.Now()
				for i := range list {
					v := sharedReportView{SharedReport: &list[i], State: list[i].State(now)}
					if v.State == "active" && base != "" {
						if v.Link, err = reports.Of(s).ShareLink(ctx, base, &list[i]); err != nil {
							return nil, err
						}
					}
					out.SharedReports = append(out.SharedReports, v)
				}
				return out, nil
			}),
		newTool("revoke_shared_report", "Revoke a shared report's link: from now on it answers 410 Gone. Final: a rollback never reopens a revoked link; share the report again for a new one.", change,
			func(ctx context.Context, in *revokeIn) (any, error) {
				if err := checkUUID("id", in.ID); err != nil {
					return nil, err
				}
				r, err := reports.Of(s).RevokeSharedReport(ctx, in.ID)
				if err != nil {
					return nil, err
				}
				return &sharedReportView{SharedReport: r, State: r.State(time.Now())}, nil
			}),
	}
}
