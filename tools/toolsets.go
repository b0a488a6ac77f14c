package tools

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/audit"
	"outreach/repo"
)

// Toolsets. About ninety tools do not fit well in an agent's context, so the
// groups are toolsets an operator enables with one setting (--toolsets,
// OUTREACH_TOOLSETS: comma-separated names, "core" for the pipeline's core
// set, "all" for every toolset, the default: the specification's groups are
// all served unless the operator narrows them). The audit toolset (change log, rollback, whoami)
// is always on: it is how an agent checks and undoes its work. On top of
// that, tools/list shows each key only the tools its scopes may call (a
// read-only key sees no mutating tool); calling a hidden tool is still
// refused with permission_denied.

// toolset is one group of tools.
type toolset struct {
	name        string
	description string
	core        bool
	tools       func(s *repo.Store, o options, opts []Option) []Tool
}

// toolsets are the groups, in the order tools/list shows them.
var toolsets = []toolset{
	{"outlets", "outlets (publications, podcasts, newsletters, …)", true, func(s *repo.Store, _ options, _ []Option) []Tool { return Outlets(s) }},
	{"contacts", "contacts and their outlet affiliations", true, func(s *repo.Store, _ options, _ []Option) []Tool { return Contacts(s) }},
	{"channels", "an outlet's channels (shows, sections, newsletters)", false, func(s *repo.Store, _ options, _ []Option) []Tool { return Channels(s) }},
	{"campaigns", "campaigns and their metrics", true, func(s *repo.Store, _ options, _ []Option) []Tool { return Campaigns(s) }},
	{"opportunities", "the pipeline: opportunities, stages, linked contacts", true, func(s *repo.Store, _ options, _ []Option) []Tool { return Opportunities(s) }},
	{"coverage", "published coverage", true, func(s *repo.Store, _ options, _ []Option) []Tool { return Coverage(s) }},
	{"reports", "the coverage report, the pipeline report, their renderings (HTML, PDF, CSV, XLSX, PNG) and share links, and the organisation settings they read (competitors, AVE rate, team name)", true, func(s *repo.Store, _ options, _ []Option) []Tool { return Reports(s) }},
	{"imports", "bulk import of contacts and outlets, with a dry run", false, func(s *repo.Store, _ options, _ []Option) []Tool { return Imports(s) }},
	{"notes", "notes and the interaction log", true, func(s *repo.Store, _ options, _ []Option) []Tool { return Notes(s) }},
	{"search", "search, dossiers, opportunity status, the agenda", true, func(s *repo.Store, _ options, _ []Option) []Tool { return Search(s) }},
	{"audit", "change log, rollback, agent sessions, whoami, service info, OAuth-connected clients (always on)", true, func(s *repo.Store, o options, _ []Option) []Tool {
		return slices.Concat(Audit(s, o), Sessions(s), Discovery(), Connections(s))
	}},
	{"keys", "agent keys and team members (admin; `outreach keys` does the same from the shell)", false, func(s *repo.Store, _ options, _ []Option) []Tool { return Keys(s) }},
	{"media", "media files of coverage", false, func(s *repo.Store, _ options, _ []Option) []Tool { return Media(s) }},
	{"emails", "the shared inbox: threads, search, links to opportunities", false, func(s *repo.Store, _ options, opts []Option) []Tool { return Emails(s, opts...) }},
	{"notifications", "subscriptions to opportunities and notifications", false, func(s *repo.Store, _ options, _ []Option) []Tool { return Notifications(s) }},
	{"messaging", "Slack messages and questions to the team", false, func(s *repo.Store, o options, _ []Option) []Tool { return Messaging(s, o.slack) }},
	{"pitches", "email pitches: draft, approve, send from the team mailbox; the suppression list", false, func(s *repo.Store, o options, _ []Option) []Tool {
		return append(Pitches(s, o.pitches), PitchApprovals(s, o.slack)...)
	}},
}

// alwaysOn is the toolset every selection includes.
const alwaysOn = "audit"

// WithToolsets selects the toolsets All returns, from a comma-separated
// list of names, "core" (the core set) and "all"; empty means "all".
// Without this option All returns every toolset.
func WithToolsets(spec string) (Option, error) {
	names, err := parseToolsets(spec)
	if err != nil {
		return nil, err
	}
	listed := names
	if strings.TrimSpace(spec) == "" {
		listed = defaultToolsets // every toolset offered, the lean default listed (catalog.go)
	}
	return func(o *options) { o.toolsets, o.listed = names, listed }, nil
}

// ToolsetNames lists every toolset, and CoreToolsets the core set.
func ToolsetNames() []string { return toolsetNames(func(toolset) bool { return true }) }

// CoreToolsets lists the toolsets of "core": the pipeline an agent works
// (outlets, contacts, campaigns, opportunities, coverage, notes, search).
func CoreToolsets() []string { return toolsetNames(func(t toolset) bool { return t.core }) }

func toolsetNames(keep func(toolset) bool) []string {
	var out []string
	for _, t := range toolsets {
		if keep(t) {
			out = append(out, t.name)
		}
	}
	return out
}

func parseToolsets(spec string) ([]string, error) {
	if strings.TrimSpace(spec) == "" {
		spec = "all"
	}
	names := []string{alwaysOn}
	for _, n := range strings.Split(spec, ",") {
		switch n = strings.ToLower(strings.TrimSpace(n)); {
		case n == "":
		case n == "all":
			names = append(names, ToolsetNames()...)
		case n == "core":
			names = append(names, CoreToolsets()...)
		case n == "default":
			names = append(names, defaultToolsets...)
		case slices.Contains(ToolsetNames(), n):
			names = append(names, n)
		default:
			return nil, fmt.Errorf("unknown toolset %q; the toolsets are %s, or core, or all", n, strings.Join(ToolsetNames(), ", "))
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// visible reports whether a key with scopes may call a tool needing scope
// (admin may call everything).
func visible(scopes []string, scope string) bool {
	return slices.Contains(scopes, scope) || slices.Contains(scopes, repo.ScopeAdmin)
}

// filterToolsList makes tools/list show each key only the tools its scopes
// may call. The list then differs by key, so it is marked private for caches.
func filterToolsList(scopes map[string]string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method != "tools/list" || err != nil {
				return res, err
			}
			list, ok := res.(*mcp.ListToolsResult)
			if !ok {
				return res, err
			}
			var keyScopes []string
			if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
				if a, ok := extra.TokenInfo.Extra[ActorKey].(audit.Actor); ok {
					keyScopes = a.Scopes
				}
			}
			out := *list
			out.Tools = make([]*mcp.Tool, 0, len(list.Tools))
			for _, t := range list.Tools {
				if visible(keyScopes, scopes[t.Name]) {
					out.Tools = append(out.Tools, t)
				}
			}
			out.CacheScope = "private"
			return &out, nil
		}
	}
}
