package tools

import (
	"context"
	_ "embed"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP Apps (the MCP Apps extension, io.modelcontextprotocol/ui, as the
// @modelcontextprotocol/ext-apps SDK defines it): two ui:// resources, the
// coverage report and the pipeline board, each an HTML page a host that
// supports the extension shows in a sandboxed frame beside the result of
// the tool that names it in _meta.ui.resourceUri (get_coverage_report,
// get_pipeline_report). The page asks the host to call render_report with
// the tool's arguments and shows the HTML rendering: it reads only through
// the server's tools, with the caller's key. Hosts without the extension
// ignore both and get the tool's JSON.

// AppMIMEType is the MIME type of an MCP App's resource.
const AppMIMEType = "text/html;profile=mcp-app"

// The apps' resources.
const (
	CoverageAppURI = "ui://outreach/coverage-report"
	PipelineAppURI = "ui://outreach/pipeline-board"
)

//go:embed apps/report.html
var appPage string

// uiApp is one app: its resource and the tool that opens it.
type uiApp struct {
	uri, name, title, kind, tool string
}

var uiApps = []uiApp{
	{CoverageAppURI, "coverage_report_app", "Coverage report", "coverage", "get_coverage_report"},
	{PipelineAppURI, "pipeline_board_app", "Pipeline board", "pipeline", "get_pipeline_report"},
}

func (a uiApp) page() string {
	return strings.NewReplacer("{{TITLE}}", a.title, "{{TITLE_LOWER}}", strings.ToLower(a.title), "{{KIND}}", a.kind).Replace(appPage)
}

// appMeta is the resource's _meta.ui: no outside origin to reach, a border.
func appMeta() mcp.Meta {
	return mcp.Meta{"ui": map[string]any{"csp": map[string]any{"connectDomains": []string{}, "resourceDomains": []string{}}, "prefersBorder": true}}
}

func (a uiApp) resource() *mcp.Resource {
	return &mcp.Resource{URI: a.uri, Name: a.name, Title: a.title, MIMEType: AppMIMEType, Meta: appMeta(),
		Description: "MCP App: the " + strings.ToLower(a.title) + " with its charts, shown beside " + a.tool + " by hosts that support MCP Apps"}
}

// serveApps adds the apps' resources to srv.
func serveApps(srv *mcp.Server) {
	for _, a := range uiApps {
		a := a
		srv.AddResource(a.resource(), func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: a.uri, MIMEType: AppMIMEType, Text: a.page(), Meta: appMeta()}}}, nil
		})
	}
}

// withApps links each app's tool to its resource (_meta.ui.resourceUri,
// and the older flat key some hosts still read).
func withApps(tools []Tool) []Tool {
	for i := range tools {
		for _, a := range uiApps {
			if tools[i].Def.Name == a.tool {
				tools[i].Def.Meta = mcp.Meta{"ui": map[string]any{"resourceUri": a.uri}, "ui/resourceUri": a.uri}
			}
		}
	}
	return tools
}
