package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/pipeline"
)

// Resources. Every record is readable by URI through a resource template,
// outreach://{kind}/{id}, which answers with the same JSON as the kind's
// get_ tool: the read runs through that tool's handler, so a resource is
// authorised, rate-limited and logged as the call would be (the key needs
// the read scope). Media are binary resources (outreach://media/{id}) with
// their MIME type. resources/list pages the records changed most recently
// (from the change log, newest first). A client subscribed to a resource
// (stateful revisions) gets notifications/resources/updated when the change
// log shows a change of its record (the watcher below).

// resourceKind is one kind of record readable by URI.
type resourceKind struct {
	collection string // its change log collection
	prefix     string // outreach://{prefix}/{id}
	suffix     string // after the id, for a derived resource (a report)
	tool       string // the get_ tool that reads it
	arg        string // the tool's argument that takes the id
	title      string
}

// resourceKinds are the records readable by URI.
var resourceKinds = []resourceKind{
	{"contacts", "contacts", "", "get_contact", "id", "a contact, as get_contact shows it"},
	{"outlets", "outlets", "", "get_outlet", "id", "an outlet, as get_outlet shows it"},
	{"opportunities", "opportunities", "", "get_opportunity", "id", "an opportunity, as get_opportunity shows it"},
	{"notes", "notes", "", "get_note", "id", "a note, as get_note shows it"},
	{"email_threads", "email-threads", "", "get_email_thread", "id", "an email thread, as get_email_thread shows it"},
	{"campaigns", "campaigns", "", "get_campaign", "id", "a campaign with its metrics, as get_campaign shows it"},
	{"", "campaigns", "/report", "get_coverage_report", "campaign_id", "a campaign's coverage report (the last 30 days), as get_coverage_report shows it"},
	{"coverage", "coverage", "", "get_coverage", "id", "a coverage item, as get_coverage shows it"},
}

// ResourceScheme is the scheme of the service's resource URIs.
const ResourceScheme = "outreach://"

// resourceURI is the URI of a record of a kind.
func (k resourceKind) uri(id string) string { return ResourceScheme + k.prefix + "/" + id + k.suffix }

// parseResourceURI finds the kind and id of a URI.
func parseResourceURI(uri string) (resourceKind, string, bool) {
	rest, ok := strings.CutPrefix(uri, ResourceScheme)
	if !ok {
		return resourceKind{}, "", false
	}
	prefix, tail, ok := strings.Cut(rest, "/")
	if !ok {
		return resourceKind{}, "", false
	}
	for _, k := range resourceKinds {
		if k.prefix != prefix {
			continue
		}
		id, ok := strings.CutSuffix(tail, k.suffix)
		if !ok || id == "" || strings.Contains(id, "/") {
			continue
		}
		if unescaped, err := url.PathUnescape(id); err == nil {
			id = unescaped
		}
		return k, id, true
	}
	return resourceKind{}, "", false
}

// MediaPrefix is the URI prefix of media files, binary resources.
const MediaPrefix = ResourceScheme + "media/"

// callAs runs a tool's handler for a resource, prompt or completion
// request: the same authorisation, limits and log as a tool call.
func (c *Catalog) callAs(ctx context.Context, session *mcp.ServerSession, extra *mcp.RequestExtra, tool string, args any) (json.RawMessage, *repo.Error) {
	var t *Tool
	for i := range c.tools {
		if c.tools[i].Def.Name == tool {
			t = &c.tools[i]
		}
	}
	if t == nil {
		return nil, &repo.Error{Code: repo.CodeFailedPrecondition, Message: fmt.Sprintf("%s is not served by this server (its toolset is off)", tool)}
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, &repo.Error{Code: repo.CodeInternal, Message: err.Error()}
	}
	req := &mcp.CallToolRequest{Session: session, Extra: extra, Params: &mcp.CallToolParamsRaw{Name: tool, Arguments: raw}}
	res, err := handler(*t)(ctx, req)
	if err != nil {
		return nil, &repo.Error{Code: repo.CodeInternal, Message: err.Error()}
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		var body struct {
			Error repo.Error `json:"error"`
		}
		_ = json.Unmarshal([]byte(text), &body)
		return nil, &body.Error
	}
	return json.RawMessage(text), nil
}

// rpcError is a tool's error as a JSON-RPC error of a resource read.
func rpcError(uri string, e *repo.Error) error {
	if e.Code == repo.CodeNotFound {
		return mcp.ResourceNotFoundError(uri)
	}
	code := int64(jsonrpc.CodeInvalidParams)
	if e.Code == repo.CodeInternal || e.Code == repo.CodeUnavailable {
		code = jsonrpc.CodeInternalError
	}
	data, _ := json.Marshal(map[string]any{"uri": uri, "error": e})
	return &jsonrpc.Error{Code: code, Message: e.Code + ": " + e.Message, Data: data}
}

// serveResources adds the resource templates and resources/list to srv.
func (c *Catalog) serveResources(srv *mcp.Server) {
	for _, k := range resourceKinds {
		k := k
		tmpl := &mcp.ResourceTemplate{URITemplate: ResourceScheme + k.prefix + "/{id}" + k.suffix, Name: strings.ReplaceAll(k.tool, "get_", "") + "_by_id", Title: k.title, MIMEType: "application/json"}
		if k.suffix != "" {
			tmpl.Name = "campaign_report"
		}
		srv.AddResourceTemplate(tmpl, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return c.readRecord(ctx, req)
		})
	}
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: MediaPrefix + "{id}", Name: "media_file", Title: "a media file's bytes, with its MIME type"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return c.readMedia(ctx, req)
		})
	serveApps(srv) // apps.go
	srv.AddReceivingMiddleware(c.listResources)
}

func (c *Catalog) readRecord(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	k, id, ok := parseResourceURI(uri)
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	out, e := c.callAs(ctx, req.Session, req.Extra, k.tool, map[string]any{k.arg: id})
	if e != nil {
		return nil, rpcError(uri, e)
	}
	res := &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(out)}}}
	res.CacheScope = "private" // read with the caller's key
	return res, nil
}

func (c *Catalog) readMedia(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id := strings.TrimPrefix(uri, MediaPrefix)
	// get_media authorises the read and says whether the record exists.
	if _, e := c.callAs(ctx, req.Session, req.Extra, "get_media", map[string]any{"id": id}); e != nil {
		return nil, rpcError(uri, e)
	}
	m, _, err := pipeline.Of(c.store).Media(ctx, strings.ToLower(id))
	if err != nil {
		return nil, rpcError(uri, repo.AsError(err))
	}
	r, err := pipeline.Of(c.store).OpenMediaBytes(ctx, m)
	if err != nil {
		return nil, rpcError(uri, repo.AsError(err))
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, rpcError(uri, repo.AsError(err))
	}
	res := &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: m.MimeType, Blob: b}}}
	res.CacheScope = "private"
	return res, nil
}

// resourcesPage is how many change log entries one resources/list page reads.
const resourcesPage = 50

// listResources answers resources/list with the records changed most
// recently, newest first, one page of the change log at a time (the
// cursor is the offset of the next page).
func (c *Catalog) listResources(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "resources/list" {
			return next(ctx, method, req)
		}
		r := req.(*mcp.ListResourcesRequest)
		offset := 0
		if r.Params != nil && r.Params.Cursor != "" {
			b, err := base64.RawURLEncoding.DecodeString(r.Params.Cursor)
			n, err2 := strconv.Atoi(string(b))
			if err != nil || err2 != nil || n < 0 {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "cursor: not a cursor of this server's resources/list; send the nextCursor it gave, or none for the first page"}
			}
			offset = n
		}
		out, e := c.callAs(ctx, r.Session, r.Extra, "get_change_log", map[string]any{"limit": resourcesPage, "offset": offset})
		if e != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: e.Code + ": " + e.Message}
		}
		var page struct {
			Total   int           `json:"total"`
			Changes []audit.Entry `json:"changes"`
		}
		if err := json.Unmarshal(out, &page); err != nil {
			return nil, err
		}
		res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}
		res.CacheScope = "private" // read with the caller's key
		if offset == 0 {
			for _, a := range uiApps {
				res.Resources = append(res.Resources, a.resource())
			}
		}
		seen := map[string]bool{}
		for _, ch := range page.Changes {
			for _, k := range resourceKinds {
				if k.collection == "" || k.collection != ch.Collection || seen[k.uri(ch.RecordID)] {
					continue
				}
				seen[k.uri(ch.RecordID)] = true
				res.Resources = append(res.Resources, &mcp.Resource{URI: k.uri(ch.RecordID), Name: k.prefix + "/" + ch.RecordID,
					Title: recordTitle(ch), Description: fmt.Sprintf("%s %s by %s", ch.Action, ch.At.Format(time.RFC3339), ch.Tool), MIMEType: "application/json"})
			}
		}
		if offset+len(page.Changes) < page.Total {
			res.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(offset + len(page.Changes))))
		}
		return res, nil
	}
}

// recordTitle is a record's name or title as its last change wrote it.
func recordTitle(ch audit.Entry) string {
	for _, f := range []string{"name", "title", "subject"} {
		if v, ok := ch.After[f].(string); ok && v != "" {
			return v
		}
	}
	return ""
}

// watcher follows the change log for the subscribed resources of every
// server of the catalog, and sends notifications/resources/updated for a
// change of their records. It reads the change log's newest entries when a
// tool of this instance wrote (kick) and every watchInterval (changes made
// through other instances), and runs only while there are subscriptions.
type watcher struct {
	c    *Catalog
	mu   sync.Mutex
	subs map[*mcp.Server]map[string]int // server -> URI -> subscriptions
	last int64                          // the newest change seq seen
	kick chan struct{}
	run  bool
}

// watchInterval is how often the watcher reads the change log without a kick.
const watchInterval = 2 * time.Second

func (w *watcher) subscribe(srv *mcp.Server, uri string, add int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.subs == nil {
		w.subs = map[*mcp.Server]map[string]int{}
		w.kick = make(chan struct{}, 1)
	}
	if w.subs[srv] == nil {
		w.subs[srv] = map[string]int{}
	}
	w.subs[srv][uri] += add
	if w.subs[srv][uri] <= 0 {
		delete(w.subs[srv], uri)
	}
	if len(w.subs[srv]) == 0 {
		delete(w.subs, srv)
	}
	if len(w.subs) > 0 && !w.run {
		w.run = true
		w.last = w.newest()
		go w.loop()
	}
}

// poke wakes the watcher after a write of this instance.
func (w *watcher) poke() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.run {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

func (w *watcher) newest() int64 {
	if w.c.store == nil {
		return 0
	}
	p, err := w.c.store.ChangeLog(context.Background(), repo.ChangeFilter{}, 1, 0)
	if err != nil || len(p.Items) == 0 {
		return 0
	}
	return p.Items[0].Seq
}

func (w *watcher) loop() {
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-w.kick:
		}
		if !w.scan() {
			return
		}
	}
}

// scan sends the notifications of the changes since the last scan, drops
// servers whose sessions all ended, and reports whether to go on.
func (w *watcher) scan() bool {
	w.mu.Lock()
	for srv := range w.subs {
		alive := false
		for range srv.Sessions() {
			alive = true
			break
		}
		if !alive {
			delete(w.subs, srv)
		}
	}
	if len(w.subs) == 0 {
		w.run = false
		w.mu.Unlock()
		return false
	}
	last := w.last
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var changed []string
	newest := last
	for offset := 0; ; offset += resourcesPage {
		p, err := w.c.store.ChangeLog(ctx, repo.ChangeFilter{}, resourcesPage, offset)
		if err != nil {
			return true // the next scan tries again
		}
		done := len(p.Items) < resourcesPage
		for _, ch := range p.Items {
			if ch.Seq <= last {
				done = true
				break
			}
			newest = max(newest, ch.Seq)
			for _, k := range resourceKinds {
				if k.collection == ch.Collection {
					changed = append(changed, k.uri(ch.RecordID))
				}
			}
		}
		if done {
			break
		}
	}
	w.mu.Lock()
	w.last = newest
	var notify []func()
	for srv, uris := range w.subs {
		for _, uri := range changed {
			if uris[uri] > 0 {
				srv, uri := srv, uri
				notify = append(notify, func() { _ = srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}) })
			}
		}
	}
	w.mu.Unlock()
	for _, f := range notify {
		f()
	}
	return true
}

// subscribeHandler lets a key subscribe to a record it may read.
func (c *Catalog) subscribeHandler(srv func() *mcp.Server) func(context.Context, *mcp.SubscribeRequest) error {
	return func(ctx context.Context, req *mcp.SubscribeRequest) error {
		uri := req.Params.URI
		k, id, ok := parseResourceURI(uri)
		if !ok || k.collection == "" {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%q: a subscription names a record: outreach://contacts/{id}, outlets, opportunities, notes, email-threads, campaigns or coverage", uri)}
		}
		if _, e := c.callAs(ctx, req.Session, req.Extra, k.tool, map[string]any{k.arg: id}); e != nil {
			return rpcError(uri, e)
		}
		c.watch.subscribe(srv(), uri, 1)
		return nil
	}
}

func (c *Catalog) unsubscribeHandler(srv func() *mcp.Server) func(context.Context, *mcp.UnsubscribeRequest) error {
	return func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
		c.watch.subscribe(srv(), req.Params.URI, -1)
		return nil
	}
}

// NewServer is an MCP server of the catalog, without tools (Serve adds
// them): its resources and resource subscriptions, its prompts and
// completions (prompts.go).
func (c *Catalog) NewServer(impl *mcp.Implementation, instructions string) *mcp.Server {
	var srv *mcp.Server
	get := func() *mcp.Server { return srv }
	srv = mcp.NewServer(impl, &mcp.ServerOptions{Instructions: instructions,
		SubscribeHandler: c.subscribeHandler(get), UnsubscribeHandler: c.unsubscribeHandler(get), CompletionHandler: c.complete})
	c.serveResources(srv)
	c.servePrompts(srv)
	return srv
}
