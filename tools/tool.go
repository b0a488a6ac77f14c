// Package tools defines the service's MCP tools: one file per group, each
// tool plain data (name, description, annotations, input schema) plus a
// handler, and one list (All) that registers everything.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"outreach/audit"
	"outreach/repo"
)

// Kinds of tools. A tool's kind is what it does, and fixes its annotations
// (one rule, annotationsOf), whether it takes an idempotency key (the
// kinds that write or act), and, with the admin flag, the scope a key needs.
type kind int

const (
	read    kind = iota // reads only
	create              // adds records, changes none
	change              // changes or archives records
	send                // acts outside the service
	readOut             // reads from outside the service (Slack)
	// The admin kinds are the same three for keys and team members, which
	// need the admin scope.
	adminRead
	adminCreate
	adminChange
)

// base is the kind without its scope.
func (k kind) base() kind {
	switch k {
	case adminRead:
		return read
	case adminCreate:
		return create
	case adminChange:
		return change
	}
	return k
}

// readOnly reports whether the kind only reads: its calls change nothing
// and take no idempotency key.
func (k kind) readOnly() bool { b := k.base(); return b == read || b == readOut }

// scope is the scope a key needs for a tool of the kind.
func (k kind) scope() string {
	switch {
	case k == adminRead || k == adminCreate || k == adminChange:
		return repo.ScopeAdmin
	case k.readOnly():
		return repo.ScopeRead
	}
	return repo.ScopeWrite
}

// annotationsOf is the one rule from a kind to its annotations: a read is
// readOnly and idempotent; a create adds and destroys nothing; a change
// (update, archive, restore, link, unlink, revoke, rollback) is
// destructive; only what reaches outside the service (Slack, the inbox) is
// open-world.
func annotationsOf(k kind) *mcp.ToolAnnotations {
	t, f := true, false
	ann := &mcp.ToolAnnotations{OpenWorldHint: &f}
	switch k.base() {
	case read:
		ann.ReadOnlyHint = true
		ann.IdempotentHint = true
	case readOut:
		ann.ReadOnlyHint = true
		ann.OpenWorldHint = &t
	case create:
		ann.DestructiveHint = &f
	case change:
		ann.DestructiveHint = &t
	case send:
		ann.DestructiveHint = &f
		ann.OpenWorldHint = &t
	}
	return ann
}

// Tool is one MCP tool.
type Tool struct {
	Def   mcp.Tool
	Scope string
	// Handle runs the tool on its raw JSON arguments.
	Handle func(ctx context.Context, args json.RawMessage) (any, error)
	// Toolset is the group the tool belongs to (toolsets.go).
	Toolset string
	// Details is the whole description; Def.Description is its brief form
	// (brief.go).
	Details string
	// kind is what the tool does.
	kind kind
	// spec is what decode checks of its arguments (limits.go).
	spec argSpec
	// store keeps the idempotency keys of mutating calls (set by All).
	store *repo.Store
	// calls are the per-key buckets of tool calls (ratelimit.go), shared by
	// every tool of one All.
	calls *Limiter
	// observe, when set, is told of each call's outcome (WithCallObserver).
	observe func(tool, code string, d time.Duration)
	// replay, when set, makes the answer to a replay (idempotency.go) from
	// the first call's arguments and kept result, for a tool whose result
	// carries a secret it can derive again (a signed URL). Without it a
	// replay answers with the kept result as stored.
	replay func(ctx context.Context, args json.RawMessage, kept []byte) (any, error)
}

// newTool builds a tool whose arguments decode strictly into In. Its input
// schema is inferred from In: `json` names, `jsonschema` descriptions, an
// `enum:"a,b"` tag for allowed values; fields without omitempty are required.
func newTool[In any](name, description string, k kind, h func(context.Context, *In) (any, error)) Tool {
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: %v", name, err))
	}
	addEnums(schema, reflect.TypeFor[In]())
	spec := newArgSpec(reflect.TypeFor[In]())
	spec.describe(schema)
	return Tool{
		Def:   mcp.Tool{Name: name, Description: description, InputSchema: schema, Annotations: annotationsOf(k)},
		Scope: k.scope(),
		kind:  k,
		spec:  spec,
		Handle: func(ctx context.Context, raw json.RawMessage) (any, error) {
			in := new(In)
			if err := decode(raw, in, spec); err != nil {
				return nil, err
			}
			return h(repo.WithReadPoint(ctx), in)
		},
	}
}

func addEnums(s *jsonschema.Schema, t reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := jsonName(f)
		if name == "" || s.Properties[name] == nil {
			continue
		}
		if e := f.Tag.Get("enum"); e != "" {
			p := s.Properties[name]
			if p.Items != nil {
				p = p.Items
			}
			for _, v := range strings.Split(e, ",") {
				p.Enum = append(p.Enum, v)
			}
		}
	}
}

func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	if name == "" {
		return f.Name
	}
	return name
}

func requiredFields(t reflect.Type) []string {
	var req []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := jsonName(f)
		if name != "" && !strings.Contains(f.Tag.Get("json"), "omitempty") {
			req = append(req, name)
		}
	}
	return req
}

// decode reads raw into in: the text must be valid UTF-8 (a lone surrogate
// escape counts as invalid), unknown names are refused, each field must have
// its JSON type, required fields must be present and not null, and every
// value must keep within its limits (see argSpec). UUIDs in id fields are
// lower-cased.
func decode(raw json.RawMessage, in any, spec argSpec) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return &repo.Error{Code: repo.CodeInvalid, Message: "arguments must be a JSON object"}
	}
	if !validText(raw) {
		field := "arguments"
		for k, v := range fields {
			if !validText(v) {
				field = k
			}
		}
		return repo.Invalid(field, "is not valid UTF-8 text (an invalid byte sequence, or a \\u escape of a lone surrogate); send text as UTF-8")
	}
	allowed := allowedNames(reflect.TypeOf(in).Elem())
	var unknown []string
	for k := range fields {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return repo.Invalid(unknown[0], "unknown argument; this tool takes: %s", strings.Join(allowed, ", "))
	}
	for _, r := range spec.required {
		if v, ok := fields[r]; !ok || string(v) == "null" {
			return repo.Invalid(r, "is required")
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(in); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "arguments"
			}
			return repo.Invalid(field, "must be %s, not a JSON %s", jsonType(te.Type), te.Value)
		}
		var pe *time.ParseError
		if errors.As(err, &pe) {
			return &repo.Error{Code: repo.CodeInvalid, Message: err.Error()}
		}
		var ie *repo.Error
		if errors.As(err, &ie) {
			return ie
		}
		return &repo.Error{Code: repo.CodeInvalid, Message: "arguments could not be read: " + err.Error()}
	}
	return spec.check(reflect.ValueOf(in).Elem())
}

func allowedNames(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if n := jsonName(t.Field(i)); n != "" {
			names = append(names, n)
		}
	}
	return names
}

func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(jsonType(t.Elem()), "a "), "an ") + "s"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.Kind().String()
}

// SessionHeader lets a client name its own agent session.
const SessionHeader = "X-Agent-Session-Id"

type progressKey struct{}

// Progress reports progress of a long call to a client that asked for it.
func Progress(ctx context.Context, done, total int, msg string) {
	if f, ok := ctx.Value(progressKey{}).(func(int, int, string)); ok {
		f(done, total, msg)
	}
}

func handler(t Tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		log := zerolog.Ctx(ctx)
		actor, err := callActor(ctx, req)
		if err != nil {
			return errorResult(err), nil
		}
		actor.Tool = t.Def.Name
		ctx = audit.WithActor(ctx, actor)
		ctx = withBaseURL(ctx, req)
		extra := new([]mcp.Content)
		ctx = context.WithValue(ctx, contentKey{}, extra)
		if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
			ctx = context.WithValue(ctx, progressKey{}, func(done, total int, msg string) {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(done), Total: float64(total), Message: msg})
			})
		}
		var text []byte
		replay := false
		if wait, ok := t.calls.Take(actor.KeyID); !ok {
			err = rateLimited(wait, t.calls)
		} else if !visible(actor.Scopes, t.Scope) {
			err = &repo.Error{Code: repo.CodePermissionDenied, Message: fmt.Sprintf("%s needs a key with the %s scope; this key has: %s", t.Def.Name, t.Scope, strings.Join(actor.Scopes, ", "))}
		} else if ask, cerr := t.confirmFirst(ctx, req); cerr != nil || ask != nil {
			if ask != nil {
				log.Info().Str("tool", t.Def.Name).Str("agent_id", actor.AgentID).Msg("confirmation asked")
				return ask, nil
			}
			err = cerr
		} else {
			text, replay, err = t.call(ctx, req)
		}
		code := repo.ErrorCode(err)
		if t.observe != nil {
			t.observe(t.Def.Name, code, time.Since(start))
		}
		ev := log.Info()
		if code == repo.CodeInternal {
			ev = log.Error().Err(err)
		}
		ev.Str("tool", t.Def.Name).Str("user_id", actor.UserID).Str("agent_id", actor.AgentID).
			Str("session_id", actor.SessionID).Int64("duration_ms", time.Since(start).Milliseconds()).
			Str("error_code", code).Bool("replay", replay).Msg("call")
		if err != nil {
			return errorResult(err), nil
		}
		res := textResult(text)
		if !replay {
			res.Content = append(res.Content, *extra...)
		}
		return res, nil
	}
}

type contentKey struct{}

// addContent adds content to the call's result after its JSON text: an
// image (render_report's PNG), a link to a resource too large to answer
// inline. A replayed call answers with its JSON alone.
func addContent(ctx context.Context, c ...mcp.Content) {
	if extra, ok := ctx.Value(contentKey{}).(*[]mcp.Content); ok {
		*extra = append(*extra, c...)
	}
}

// call runs the tool and returns its result's JSON, under the call's
// idempotency key when a call of a kind that writes or acts gives one (see
// idempotency.go; a read, of any scope, ignores the key); replay reports a
// result given again.
func (t Tool) call(ctx context.Context, req *mcp.CallToolRequest) (text []byte, replay bool, err error) {
	args := req.Params.Arguments
	key := ""
	if !t.kind.readOnly() {
		if key, err = idempotencyKey(req); err != nil {
			return nil, false, err
		}
	}
	run := func(ctx context.Context) (shown, kept []byte, err error) {
		out, err := t.Handle(ctx, args)
		if err != nil {
			return nil, nil, err
		}
		shown, kept, err = encodeResult(out)
		if err != nil {
			return nil, nil, fmt.Errorf("encode result: %w", err)
		}
		return shown, kept, nil
	}
	if key == "" || t.store == nil {
		text, _, err = run(ctx)
		return text, false, err
	}
	return t.idempotent(ctx, key, args, run)
}

// textResult answers with the result's JSON as text and, the same bytes, as
// structuredContent (every result is a JSON object; see outputs.go).
func textResult(text []byte) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, StructuredContent: json.RawMessage(text)}
}

func errorResult(err error) *mcp.CallToolResult {
	text, _ := json.Marshal(map[string]any{"error": repo.AsError(err)})
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}
}

// ActorKey is where the HTTP layer leaves the authenticated actor in the token's Extra.
const ActorKey = "actor"

// MetaSessionKey is the request _meta field naming the caller's agent
// session, for clients that can set _meta but not HTTP headers.
const MetaSessionKey = "outreach/session_id"

// ImplicitSessionKey is where the HTTP layer leaves, in the token's Extra, the
// function that gives a call of the stateless revision naming no session its
// key's implicit session.
const ImplicitSessionKey = "implicit_session"

// callActor is the authenticated actor of a call, in the agent session it
// names: the X-Agent-Session-Id header, else the outreach/session_id _meta
// field (both must agree when both are sent), else the MCP session on the
// stateful revisions, else the key's implicit session (stateless revision).
func callActor(ctx context.Context, req *mcp.CallToolRequest) (audit.Actor, error) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return audit.Actor{}, &repo.Error{Code: repo.CodePermissionDenied, Message: "no authenticated key on this call"}
	}
	actor, ok := req.Extra.TokenInfo.Extra[ActorKey].(audit.Actor)
	if !ok {
		return audit.Actor{}, &repo.Error{Code: repo.CodePermissionDenied, Message: "no authenticated key on this call"}
	}
	header := strings.TrimSpace(req.Extra.Header.Get(SessionHeader))
	var meta string
	if m := req.Params.GetMeta(); m != nil {
		if v, ok := m[MetaSessionKey]; ok && v != nil {
			s, isString := v.(string)
			if !isString {
				return audit.Actor{}, repo.Invalid("_meta."+MetaSessionKey, "must be a string: a start_session handle or an id of your own")
			}
			meta = strings.TrimSpace(s)
			if meta == "" {
				return audit.Actor{}, repo.Invalid("_meta."+MetaSessionKey, "is empty; leave it out or send a start_session handle")
			}
		}
	}
	switch {
	case header != "" && meta != "" && header != meta:
		return audit.Actor{}, repo.Invalid(SessionHeader, "names session %q but _meta.%s names %q; send one, or the same in both", header, MetaSessionKey, meta)
	case header != "":
		if err := repo.CheckSessionID(SessionHeader, header); err != nil {
			return audit.Actor{}, err
		}
		actor.SessionID = header
	case meta != "":
		if err := repo.CheckSessionID("_meta."+MetaSessionKey, meta); err != nil {
			return audit.Actor{}, err
		}
		actor.SessionID = meta
	case req.Session != nil && req.Session.ID() != "":
		actor.SessionID = req.Session.ID()
	default:
		implicit, ok := req.Extra.TokenInfo.Extra[ImplicitSessionKey].(func(context.Context, audit.Actor) (string, error))
		if !ok {
			actor.SessionID = "key-" + actor.KeyID
			break
		}
		sid, err := implicit(ctx, actor)
		if err != nil {
			return audit.Actor{}, err
		}
		actor.SessionID = sid
	}
	return actor, nil
}
