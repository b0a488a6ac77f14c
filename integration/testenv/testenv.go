// Package testenv starts the service for tests the way it runs: a store (the
// embedded one in memory by default, the MongoDB of MONGODB_URI when set),
// the real HTTP handler on a loopback port, and MCP clients from the official
// Go SDK speaking Streamable HTTP with a bearer key.
package testenv

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"outreach/audit"
	"outreach/embedded"
	"outreach/mailsync"
	"outreach/metrics"
	"outreach/pitchsend"
	"outreach/repo"
	"outreach/repo/access"
	"outreach/repo/pipeline"
	"outreach/repo/pitches"
	"outreach/server"
	"outreach/tools"
)

// Env is a running service.
type Env struct {
	Store *repo.Store
	URL   string // the /mcp endpoint
	Base  string // the server's base URL
	// AdminKey has every scope.
	AdminKey string
	// AdminUserID owns AdminKey.
	AdminUserID string
	// Sender sends pitches (Options.Pitches), Syncer syncs the inbox
	// (Options.Mail).
	Sender *pitchsend.Sender
	Syncer *mailsync.Syncer
	t      testing.TB
}

// Options tune New.
type Options struct {
	// Lease overrides the store's write lease.
	Lease time.Duration
	// Media overrides the media upload cap and signed-URL lifetime.
	Media pipeline.MediaOptions
	// Mail, when set, configures the shared inbox that sync_emails reads.
	Mail *mailsync.Config
	// DataDir holds the embedded store's files (default: a temporary
	// directory), and DB names the database (default: a fresh name), for
	// tests that open the same store again afterwards (outreach verify).
	DataDir, DB string
	// Tools configure what the tools reach outside the store (Slack).
	Tools []tools.Option
	// TextSearch forces the text-search path "on" or "off" (default: the
	// probe decides, or OUTREACH_TEXT_SEARCH when set).
	TextSearch string
	// OAuth serves OAuth beside the keys (serve --oauth), with the test
	// server's URL as the public URL unless Server.PublicURL is set.
	OAuth bool
	// Server is the HTTP edge's deployment configuration (public URL,
	// trusted proxies, OAuth), and Log, when set, receives the service's log.
	Server server.Config
	Log    io.Writer
	// Pitches, when set, sends pitches through this submission server (its
	// Inbox is the one of Mail; its PublicURL the test server's).
	Pitches *pitchsend.Config
	// Metrics, when set, makes the metrics the edge counts into (and
	// serves behind Server.MetricsToken, when set).
	Metrics func(*repo.Store, *mailsync.Syncer) *metrics.Metrics
}

// New starts a service for the test and stops it when the test ends.
func New(t testing.TB) *Env {
	t.Helper()
	return NewWith(t, Options{})
}

// NewWith is New with options.
func NewWith(t testing.TB, o Options) *Env {
	t.Helper()
	store := OpenStore(t, o)
	topts := append([]tools.Option{}, o.Tools...)
	var syncer *mailsync.Syncer
	if o.Mail != nil {
		m, err := mailsync.New(store, *o.Mail)
		if err != nil {
			t.Fatal(err)
		}
		syncer = m
		topts = append(topts, tools.WithMailSync(m))
	}
	log := zerolog.Nop()
	if o.Log != nil {
		log = zerolog.New(o.Log)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var sender *pitchsend.Sender
	if o.Pitches != nil {
		c := *o.Pitches
		c.Inbox, c.PublicURL = syncer, "http://"+ln.Addr().String()
		if sender, err = pitchsend.New(store, c, zerolog.Nop()); err != nil {
			t.Fatal(err)
		}
		if err := pitches.Of(store).SetPitchPolicy(pitches.PitchPolicy{From: sender.From(), RespondedOnReply: true}); err != nil {
			t.Fatal(err)
		}
		topts = append(topts, tools.WithPitchSender(sender))
	}
	ts := httptest.NewUnstartedServer(nil)
	ts.Listener.Close()
	ts.Listener = ln
	scfg := o.Server
	scfg.OAuth = scfg.OAuth || o.OAuth
	if o.Metrics != nil {
		scfg.Metrics = o.Metrics(store, syncer)
	}
	if scfg.PublicURL == "" && scfg.OAuth {
		scfg.PublicURL = "http://" + ts.Listener.Addr().String()
	}
	ts.Config.Handler = server.NewWithConfig(store, log, scfg, topts...)
	ts.Start()
	t.Cleanup(ts.Close)
	ctx := audit.WithActor(context.Background(), repo.SystemActor("test-setup"))
	key, err := access.Of(store).Bootstrap(ctx)
	if err != nil || key == "" {
		t.Fatalf("bootstrap: %q %v", key, err)
	}
	if err := pipeline.Of(store).Seed(ctx); err != nil {
		t.Fatalf("seed: %v", err)
	}
	u, err := access.Of(store).UserByEmail(ctx, "admin@localhost")
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Store: store, URL: ts.URL + "/mcp", Base: ts.URL, AdminKey: key, AdminUserID: u.ID, Sender: sender, Syncer: syncer, t: t}
}

// OpenStore opens a fresh, empty store for the test: a new in-memory embedded
// store, or a new database on MONGODB_URI. OUTREACH_WRITE_MODE forces a mode.
func OpenStore(t testing.TB, o Options) *repo.Store {
	t.Helper()
	ctx := context.Background()
	uri := os.Getenv("MONGODB_URI")
	opts := repo.Options{WriteMode: os.Getenv("OUTREACH_WRITE_MODE"), Lease: o.Lease, Logger: zerolog.Nop(), Setup: []func(*repo.Store) error{pipeline.WithMedia(o.Media)},
		TextSearch: o.TextSearch}
	if opts.TextSearch == "" {
		opts.TextSearch = os.Getenv("OUTREACH_TEXT_SEARCH")
	}
	if uri != "" {
		opts.Monitor = recorder
	}
	if uri == "" {
		dir := o.DataDir
		if dir == "" {
			dir = t.TempDir()
		}
		es, err := embedded.Start(ctx, embedded.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(es.Close)
		uri = es.URI
		opts.Exclusive = true
		opts.PrepareStore = es.IndexIDs
		opts.Lookups = es // as the service on a data directory: the backup's ordered reads use them
	}
	db := o.DB
	if db == "" {
		db = "outreach_test_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	}
	store, err := repo.Open(ctx, uri, db, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The service's own indexes (embedded store) build in the background;
	// the tests hold them to the store's answers, so they wait for them.
	if err := store.IndexesReady(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if v, err := store.Verify(context.Background()); err != nil || len(v) > 0 {
			t.Errorf("invariants after the test: %v %+v", err, v)
		}
		store.Close(context.Background())
	})
	return store
}

// Key creates a key for a new agent of the admin user with the given scopes.
func (e *Env) Key(scopes ...string) string {
	e.t.Helper()
	ctx := audit.WithActor(context.Background(), repo.SystemActor("test-setup"))
	_, key, err := access.Of(e.Store).CreateKey(ctx, access.NewKeyInput{UserID: e.AdminUserID, Name: "test " + strings.Join(scopes, "+"), Scopes: scopes})
	if err != nil {
		e.t.Fatal(err)
	}
	return key
}

// Client is an MCP client session.
type Client struct {
	Session *mcp.ClientSession
	t       testing.TB
}

// ClientRevision is the MCP revision Client speaks: the newest with an MCP
// session, as every client did before the service served 2026-07-28.
// ClientAt speaks any other.
const ClientRevision = "2025-11-25"

// Client connects with key (and, when sessionID is set, X-Agent-Session-Id).
func (e *Env) Client(key, sessionID string) *Client {
	e.t.Helper()
	return e.ClientAt(e.URL, ClientRevision, key, sessionID)
}

// ClientAt connects to url on MCP revision version with key (and, when
// sessionID is set, X-Agent-Session-Id).
func (e *Env) ClientAt(url, version, key, sessionID string) *Client {
	e.t.Helper()
	hc := &http.Client{Transport: headers{key: key, session: sessionID}}
	c := mcp.NewClient(&mcp.Implementation{Name: "outreach-test", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		e.t.Fatalf("connect: %v", err)
	}
	e.t.Cleanup(func() { s.Close() })
	return &Client{Session: s, t: e.t}
}

// WrapClient is a Client over a session the test connected itself (with
// an OAuth handler, say).
func WrapClient(t testing.TB, s *mcp.ClientSession) *Client { return &Client{Session: s, t: t} }

// Admin is a client with the admin key.
func (e *Env) Admin() *Client { return e.Client(e.AdminKey, "") }

type headers struct{ key, session string }

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h.key != "" {
		r.Header.Set("Authorization", "Bearer "+h.key)
	}
	if h.session != "" {
		r.Header.Set("X-Agent-Session-Id", h.session)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// Error is a tool's error result.
type Error struct {
	Code      string          `json:"code"`
	Message   string          `json:"message"`
	Field     string          `json:"field"`
	Retryable bool            `json:"retryable"`
	Details   json.RawMessage `json:"details"`
}

// Call calls a tool and returns its JSON result or its error.
func (c *Client) Call(tool string, args any) (json.RawMessage, *Error) {
	c.t.Helper()
	res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		c.t.Fatalf("%s: protocol error: %v", tool, err)
	}
	if len(res.Content) != 1 {
		c.t.Fatalf("%s: %d content items, want 1", tool, len(res.Content))
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		c.t.Fatalf("%s: content is %T, want text", tool, res.Content[0])
	}
	if res.IsError {
		var body struct{ Error Error }
		if err := json.Unmarshal([]byte(text.Text), &body); err != nil || body.Error.Code == "" {
			c.t.Fatalf("%s: error result is not the error model: %s", tool, text.Text)
		}
		return nil, &body.Error
	}
	return json.RawMessage(text.Text), nil
}

// Must calls a tool that must succeed and decodes its result into out (if not nil).
func (c *Client) Must(tool string, args any, out any) json.RawMessage {
	c.t.Helper()
	raw, e := c.Call(tool, args)
	if e != nil {
		c.t.Fatalf("%s(%v): %s: %s", tool, args, e.Code, e.Message)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s: decode %s: %v", tool, raw, err)
		}
	}
	return raw
}

// Fail calls a tool that must fail with code and returns the error.
func (c *Client) Fail(tool string, args any, code string) *Error {
	c.t.Helper()
	raw, e := c.Call(tool, args)
	if e == nil {
		c.t.Fatalf("%s(%v) succeeded with %s; want %s", tool, args, raw, code)
	}
	if e.Code != code {
		c.t.Fatalf("%s(%v): code %s (%s); want %s", tool, args, e.Code, e.Message, code)
	}
	return e
}

// ID decodes the "id" of a JSON record.
func ID(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	var r struct{ ID string }
	if err := json.Unmarshal(raw, &r); err != nil || r.ID == "" {
		t.Fatalf("no id in %s", raw)
	}
	return r.ID
}

// M is a shorthand for tool arguments.
type M = map[string]any
