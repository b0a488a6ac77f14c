package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/repo"
	"outreach/repo/directory"
	"outreach/repo/pipeline"
)

// Prompts for the team's recurring work, and completions of their
// arguments and of the resource templates' ids. A prompt reads the data it
// needs through the tools' handlers (the key's scopes hold) and hands it to
// the model with what to do with it. Arguments naming a record take its id
// or its exact name; completion/complete offers names (for prompts) or ids
// (for resource templates) by prefix, and stages and types by value.

// named is a kind of record an argument may name.
type named struct {
	list  string // the list_ tool
	items string // its result's list field
	field string // the name field
}

var namedKinds = map[string]named{
	"contact":     {"list_contacts", "contacts", "name"},
	"outlet":      {"list_outlets", "outlets", "name"},
	"opportunity": {"list_opportunities", "opportunities", "title"},
	"campaign":    {"list_campaigns", "campaigns", "name"},
}

// valueArgs are arguments completed from a fixed list.
var valueArgs = map[string][]string{
	"stage":            pipeline.Stages,
	"type":             pipeline.OpportunityTypes,
	"coverage_type":    pipeline.CoverageTypes,
	"outlet_type":      directory.OutletTypes,
	"opportunity_type": pipeline.OpportunityTypes,
}

// matches lists records of a kind whose name starts with prefix (any
// case), as id and name.
func (c *Catalog) matches(ctx context.Context, s *mcp.ServerSession, extra *mcp.RequestExtra, kind, prefix string) ([][2]string, *repo.Error) {
	k := namedKinds[kind]
	out, e := c.callAs(ctx, s, extra, k.list, map[string]any{"search": prefix, "limit": 100})
	if e != nil {
		return nil, e
	}
	var page map[string]json.RawMessage
	_ = json.Unmarshal(out, &page)
	var items []map[string]any
	_ = json.Unmarshal(page[k.items], &items)
	var res [][2]string
	for _, it := range items {
		id, _ := it["id"].(string)
		name, _ := it[k.field].(string)
		if strings.HasPrefix(strings.ToLower(name), strings.ToLower(prefix)) {
			res = append(res, [2]string{id, name})
		}
	}
	return res, nil
}

// resolve is the id of the record an argument names, by id or exact name.
func (c *Catalog) resolve(ctx context.Context, req *mcp.GetPromptRequest, arg, kind string, required bool) (string, error) {
	v := strings.TrimSpace(req.Params.Arguments[arg])
	if v == "" {
		if required {
			return "", promptError(arg, "is required: the %s's id or name", kind)
		}
		return "", nil
	}
	if _, err := uuid.Parse(v); err == nil {
		return strings.ToLower(v), nil
	}
	found, e := c.matches(ctx, req.Session, req.Extra, kind, v)
	if e != nil {
		return "", promptError(arg, "%s: %s", e.Code, e.Message)
	}
	var exact [][2]string
	for _, f := range found {
		if strings.EqualFold(f[1], v) {
			exact = append(exact, f)
		}
	}
	switch len(exact) {
	case 1:
		return exact[0][0], nil
	case 0:
		return "", promptError(arg, "no %s is named %q; give its id or exact name (completion/complete offers names)", kind, v)
	}
	var ids []string
	for _, f := range exact {
		ids = append(ids, f[0])
	}
	return "", promptError(arg, "%d %ss are named %q; give the id of one: %s", len(exact), kind, v, strings.Join(ids, ", "))
}

func promptError(arg, format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "argument " + arg + ": " + fmt.Sprintf(format, args...)}
}

// promptData reads one tool's result for a prompt: its JSON, or what kept
// it from being read (the prompt goes on without it).
func (c *Catalog) promptData(ctx context.Context, req *mcp.GetPromptRequest, tool string, args map[string]any) string {
	out, e := c.callAs(ctx, req.Session, req.Extra, tool, args)
	if e != nil {
		return fmt.Sprintf("(%s could not be read: %s: %s)", tool, e.Code, e.Message)
	}
	return string(out)
}

type promptImagesKey struct{}

// promptReport ends a prompt in the rendered report: render_report's PNG
// of the chart args name, read with the caller's key, becomes an image
// message after the prompt's text (none when the report is empty or the
// key may not read it), and the text says how to render and share the
// rest.
func (c *Catalog) promptReport(ctx context.Context, req *mcp.GetPromptRequest, args map[string]any) string {
	shown := "The chart is attached below."
	var t *Tool
	for i := range c.tools {
		if c.tools[i].Def.Name == "render_report" {
			t = &c.tools[i]
		}
	}
	png := map[string]any{"format": "png"}
	for k, v := range args {
		png[k] = v
	}
	raw, _ := json.Marshal(png)
	if t == nil {
		shown = "(render_report is not served: the reports toolset is off.)"
	} else if res, err := handler(*t)(ctx, &mcp.CallToolRequest{Session: req.Session, Extra: req.Extra, Params: &mcp.CallToolParamsRaw{Name: "render_report", Arguments: raw}}); err != nil || res.IsError || len(res.Content) < 2 {
		shown = "(No chart: the report is empty or could not be rendered.)"
	} else if images, ok := ctx.Value(promptImagesKey{}).(*[]mcp.Content); ok {
		*images = append(*images, res.Content[1])
	}
	scope := map[string]any{}
	for k, v := range args {
		if k != "chart" {
			scope[k] = v
		}
	}
	js, _ := json.Marshal(scope)
	return "\n\nEnd with the rendered report. " + shown + " Show it, then offer the document: render_report with " + string(js) +
		` and format "pdf" (or "xlsx" for the figures and the full list); when the team wants a link for people without an assistant, share_report with the same arguments, and give them the link it returns.`
}

type promptDef struct {
	prompt *mcp.Prompt
	build  func(c *Catalog, ctx context.Context, req *mcp.GetPromptRequest) (string, error)
}

func arg(name, description string, required bool) *mcp.PromptArgument {
	return &mcp.PromptArgument{Name: name, Description: description, Required: required}
}

var promptDefs = []promptDef{
	{&mcp.Prompt{Name: "weekly_pipeline_review", Title: "Weekly pipeline review",
		Description: "Review the open pipeline and this week's agenda: what moved, what is stuck, what is due, what to do next.",
		Arguments: []*mcp.PromptArgument{arg("campaign", "only this campaign (id or name)", false),
			arg("stage", "only opportunities at this stage", false)}},
		func(c *Catalog, ctx context.Context, req *mcp.GetPromptRequest) (string, error) {
			campaign, err := c.resolve(ctx, req, "campaign", "campaign", false)
			if err != nil {
				return "", err
			}
			list := map[string]any{"limit": 200}
			if campaign != "" {
				list["campaign_id"] = campaign
			}
			if st := req.Params.Arguments["stage"]; st != "" {
				if !slices.Contains(pipeline.Stages, st) {
					return "", promptError("stage", "must be one of %s", strings.Join(pipeline.Stages, ", "))
				}
				list["stage"] = st
			}
			return "Run the weekly pipeline review of our media relations team. From the data below: summarise the open opportunities by stage; name the ones stuck (no change for two weeks or more), the next actions due or overdue, and the pitches with no reply; propose the three most useful next steps, each with the opportunity it concerns. Do not change anything; suggest the tool calls (update_opportunity_stage, update_opportunity) for the team to confirm.\n\nOpen opportunities (list_opportunities):\n" +
				c.promptData(ctx, req, "list_opportunities", list) + "\n\nThis week's agenda (get_agenda):\n" + c.promptData(ctx, req, "get_agenda", map[string]any{}) +
				c.promptReport(ctx, req, pipelineArgs(campaign)), nil
		}},
	{&mcp.Prompt{Name: "prepare_pitch", Title: "Prepare a pitch to a contact",
		Description: "Prepare a pitch to a contact from their dossier and history, within the guards (do-not-contact, double pitch, embargo).",
		Arguments: []*mcp.PromptArgument{arg("contact", "the contact (id or name)", true),
			arg("opportunity", "the opportunity the pitch is for (id or title)", false)}},
		func(c *Catalog, ctx context.Context, req *mcp.GetPromptRequest) (string, error) {
			contact, err := c.resolve(ctx, req, "contact", "contact", true)
			if err != nil {
				return "", err
			}
			opp, err := c.resolve(ctx, req, "opportunity", "opportunity", false)
			if err != nil {
				return "", err
			}
			text := "Prepare a pitch to this journalist. First check the guards in the data: if do_not_contact is set, stop and say why; if they were pitched within the double-pitch window, say so and do not draft unless the team gives an override_reason; respect any embargo_until. Then draft a short, specific pitch (subject line and body) that fits their beats, their outlets and what they wrote or answered before, and list the facts you relied on.\n\nContact dossier (get_contact_dossier):\n" +
				c.promptData(ctx, req, "get_contact_dossier", map[string]any{"contact_id": contact})
			if opp != "" {
				text += "\n\nThe opportunity (get_opportunity_status):\n" + c.promptData(ctx, req, "get_opportunity_status", map[string]any{"opportunity_id": opp})
			}
			return text, nil
		}},
	{&mcp.Prompt{Name: "campaign_coverage_report", Title: "Campaign coverage report",
		Description: "Write a campaign's coverage report for the team or a client from its metrics and coverage figures.",
		Arguments: []*mcp.PromptArgument{arg("campaign", "the campaign (id or name)", true),
			arg("since", "first day counted (YYYY-MM-DD); default 30 days before until", false), arg("until", "last day counted (YYYY-MM-DD); default today", false)}},
		func(c *Catalog, ctx context.Context, req *mcp.GetPromptRequest) (string, error) {
			campaign, err := c.resolve(ctx, req, "campaign", "campaign", true)
			if err != nil {
				return "", err
			}
			rep := map[string]any{"campaign_id": campaign}
			for _, k := range []string{"since", "until"} {
				if v := req.Params.Arguments[k]; v != "" {
					rep[k] = v
				}
			}
			return "Write the coverage report of this campaign: results first (coverage items, reach as both figures with their labels, tier-1 pieces, sentiment), then the trend by week, share of voice against competitors, and the pipeline still open. Quote figures exactly as given, with their labels; say what the figures do not cover (items without reach, AVE only if configured).\n\nThe campaign and its metrics (get_campaign):\n" +
				c.promptData(ctx, req, "get_campaign", map[string]any{"id": campaign}) + "\n\nThe coverage report (get_coverage_report):\n" + c.promptData(ctx, req, "get_coverage_report", rep) +
				c.promptReport(ctx, req, coverageArgs(rep)), nil
		}},
	{&mcp.Prompt{Name: "inbox_triage", Title: "Inbox triage",
		Description: "Triage the shared inbox: replies to pitches to link to their opportunities, what needs an answer, what can wait.",
		Arguments:   []*mcp.PromptArgument{arg("days", "replies from the last this many days (1 to 365); default 14", false)}},
		func(c *Catalog, ctx context.Context, req *mcp.GetPromptRequest) (string, error) {
			agenda := map[string]any{}
			if d := req.Params.Arguments["days"]; d != "" {
				var n int
				if _, err := fmt.Sscanf(d, "%d", &n); err != nil || n < 1 || n > 365 {
					return "", promptError("days", "must be a whole number from 1 to 365")
				}
				agenda["reply_days"] = n
			}
			return "Triage the team's shared inbox. For each recent thread: say who wrote and what they want; if it answers a pitch, name the opportunity to link it to (link_email_opportunity) and the stage it suggests; mark what needs an answer today, what can wait, and what needs nothing. Change nothing yourself; list the tool calls for the team to confirm.\n\nRecent threads (list_email_threads):\n" +
				c.promptData(ctx, req, "list_email_threads", map[string]any{"limit": 30}) + "\n\nReplies not linked to an opportunity (get_agenda):\n" + c.promptData(ctx, req, "get_agenda", agenda), nil
		}},
	{&mcp.Prompt{Name: "session_changes", Title: "What changed in a session, and how to undo it",
		Description: "Explain what an agent session changed, and what rolling it back would do, conflicts included.",
		Arguments:   []*mcp.PromptArgument{arg("session_id", "the agent session (list_sessions names them)", true)}},
		func(c *Catalog, ctx context.Context, req *mcp.GetPromptRequest) (string, error) {
			sid := strings.TrimSpace(req.Params.Arguments["session_id"])
			if sid == "" {
				return "", promptError("session_id", "is required (list_sessions names the sessions)")
			}
			return "Explain what this agent session changed, record by record, in plain words (what was created, changed, archived), and what undoing it would do: the plan of rollback_session below, its conflicts (changes made since by others) and what cannot be reversed (messages sent outside). Do not roll back; say which call would (rollback_session with this session_id, or rollback_change for one change) and what to check first.\n\nThe session's changes (get_change_log):\n" +
				c.promptData(ctx, req, "get_change_log", map[string]any{"session_id": sid, "limit": 200}) + "\n\nThe rollback plan, nothing written (rollback_session, dry_run):\n" +
				c.promptData(ctx, req, "rollback_session", map[string]any{"session_id": sid, "dry_run": true}), nil
		}},
}

// servePrompts adds the prompts to srv.
func (c *Catalog) servePrompts(srv *mcp.Server) {
	for _, p := range promptDefs {
		p := p
		srv.AddPrompt(p.prompt, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			if req.Params.Arguments == nil {
				req.Params.Arguments = map[string]string{}
			}
			for name := range req.Params.Arguments {
				if !slices.ContainsFunc(p.prompt.Arguments, func(a *mcp.PromptArgument) bool { return a.Name == name }) {
					var names []string
					for _, a := range p.prompt.Arguments {
						names = append(names, a.Name)
					}
					return nil, promptError(name, "unknown; %s takes: %s", p.prompt.Name, strings.Join(names, ", "))
				}
			}
			images := new([]mcp.Content)
			text, err := p.build(c, context.WithValue(ctx, promptImagesKey{}, images), req)
			if err != nil {
				return nil, err
			}
			msgs := []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}}
			for _, im := range *images {
				msgs = append(msgs, &mcp.PromptMessage{Role: "user", Content: im})
			}
			return &mcp.GetPromptResult{Description: p.prompt.Description, Messages: msgs}, nil
		})
	}
}

// maxCompletions is the most values one completion answers.
const maxCompletions = 20

// complete answers completion/complete: names of contacts, outlets,
// opportunities and campaigns by prefix for prompt arguments, their ids for
// resource templates, and stages and types by value.
func (c *Catalog) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	p := req.Params
	if p == nil || p.Ref == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "ref is required"}
	}
	argName, prefix := p.Argument.Name, p.Argument.Value
	var kind string
	ids := false
	switch p.Ref.Type {
	case "ref/prompt":
		kind = argName
	case "ref/resource":
		for _, k := range resourceKinds {
			if p.Ref.URI == ResourceScheme+k.prefix+"/{id}"+k.suffix && argName == "id" {
				kind, ids = strings.TrimSuffix(strings.TrimSuffix(k.prefix, "s"), "-thread"), true
				if k.prefix == "opportunities" {
					kind = "opportunity"
				}
			}
		}
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("ref.type %q: ref/prompt or ref/resource", p.Ref.Type)}
	}
	var values []string
	if list, ok := valueArgs[argName]; ok {
		for _, v := range list {
			if strings.HasPrefix(v, strings.ToLower(prefix)) {
				values = append(values, v)
			}
		}
	} else if _, ok := namedKinds[kind]; ok {
		found, e := c.matches(ctx, req.Session, req.Extra, kind, prefix)
		if e != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: e.Code + ": " + e.Message}
		}
		for _, f := range found {
			if ids {
				values = append(values, f[0])
			} else if !slices.Contains(values, f[1]) {
				values = append(values, f[1])
			}
		}
	}
	res := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}, Total: len(values)}}
	if len(values) > maxCompletions {
		values, res.Completion.HasMore = values[:maxCompletions], true
	}
	if values != nil {
		res.Completion.Values = values
	}
	return res, nil
}

// pipelineArgs and coverageArgs are render_report's arguments of a
// prompt's scope, with the chart the prompt shows.
func pipelineArgs(campaign string) map[string]any {
	a := map[string]any{"kind": "pipeline", "chart": "stages"}
	if campaign != "" {
		a["campaign_id"] = campaign
	}
	return a
}

func coverageArgs(rep map[string]any) map[string]any {
	a := map[string]any{"kind": "coverage", "chart": "trend"}
	for k, v := range rep {
		a[k] = v
	}
	return a
}
