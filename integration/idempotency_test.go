package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"outreach/audit"
	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/repo/directory"
	"outreach/tools"
)

// collChanges is the number of applied change entries of a collection.
func collChanges(t *testing.T, c *testenv.Client, collection string) int {
	t.Helper()
	var log struct{ Total int }
	c.Must("get_change_log", M{"collection": collection, "limit": 1}, &log)
	return log.Total
}

// headerClient connects with key and sends extra headers on every request.
func headerClient(t *testing.T, env *testenv.Env, key string, extra http.Header) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+key)
		for k, v := range extra {
			r.Header[k] = v
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	c := mcp.NewClient(&mcp.Implementation{Name: "outreach-test", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: env.URL, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// keyed calls tool with an idempotency key in the call's _meta and returns
// its JSON result, or its error (as testenv.Client.Call does).
func keyed(t *testing.T, c *testenv.Client, tool string, args M, key any) (json.RawMessage, *testenv.Error) {
	t.Helper()
	res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args, Meta: mcp.Meta{"idempotency_key": key}})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	text := json.RawMessage(res.Content[0].(*mcp.TextContent).Text)
	if res.IsError {
		var body struct{ Error testenv.Error }
		if err := json.Unmarshal(text, &body); err != nil {
			t.Fatalf("%s: %s", tool, text)
		}
		return nil, &body.Error
	}
	return text, nil
}

func mustKeyed(t *testing.T, c *testenv.Client, tool string, args M, key any) json.RawMessage {
	t.Helper()
	raw, e := keyed(t, c, tool, args, key)
	if e != nil {
		t.Fatalf("%s(%v) with key %v: %s: %s", tool, args, key, e.Code, e.Message)
	}
	return raw
}

func failKeyed(t *testing.T, c *testenv.Client, tool string, args M, key any, code string) *testenv.Error {
	t.Helper()
	raw, e := keyed(t, c, tool, args, key)
	if e == nil || e.Code != code {
		t.Fatalf("%s(%v) with key %v: %s %+v; want %s", tool, args, key, raw, e, code)
	}
	return e
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestIdempotencyKey: a retried mutation with the same key returns the first
// result and writes once; the same key with other arguments or another tool
// is refused and writes nothing; the key is scoped to the API key; the
// Idempotency-Key header works as the _meta key does.
func TestIdempotencyKey(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()

	before := collChanges(t, c, "outlets")
	first := mustKeyed(t, c, "create_outlet", M{"name": "Retry Weekly", "tier": 2}, "k-1")
	again := mustKeyed(t, c, "create_outlet", M{"tier": 2, "name": "Retry Weekly"}, "k-1")
	if diff := cmp.Diff(string(again), string(first)); diff != "" {
		t.Errorf("the retry's result differs from the first (-retry +first):\n%s", diff)
	}
	if got := collChanges(t, c, "outlets"); got != before+1 {
		t.Errorf("%d outlet changes after a call and its retry, want %d", got, before+1)
	}
	var list struct{ Total int }
	c.Must("list_outlets", M{"search": "Retry Weekly"}, &list)
	if list.Total != 1 {
		t.Errorf("%d outlets named Retry Weekly, want 1", list.Total)
	}

	// The same key with other arguments, or for another tool: refused.
	e := failKeyed(t, c, "create_outlet", M{"name": "Other Weekly"}, "k-1", "invalid_argument")
	if e.Field != "_meta.idempotency_key" {
		t.Errorf("reuse with other arguments names %q, want _meta.idempotency_key", e.Field)
	}
	failKeyed(t, c, "create_campaign", M{"name": "Retry Weekly"}, "k-1", "invalid_argument")
	if got := collChanges(t, c, "outlets"); got != before+1 {
		t.Errorf("a refused reuse wrote: %d outlet changes, want %d", got, before+1)
	}
	// Bad keys; reads ignore a key.
	failKeyed(t, c, "create_outlet", M{"name": "Bad Key"}, "", "invalid_argument")
	failKeyed(t, c, "create_outlet", M{"name": "Bad Key"}, 5, "invalid_argument")
	failKeyed(t, c, "create_outlet", M{"name": "Bad Key"}, "a b", "invalid_argument")
	mustKeyed(t, c, "list_outlets", M{}, "k-1")

	// Another API key has its own keys.
	other := env.Client(env.Key("read", "write"), "")
	if id := testenv.ID(t, mustKeyed(t, other, "create_outlet", M{"name": "Other Key Weekly"}, "k-1")); id == testenv.ID(t, first) {
		t.Errorf("another API key's call with the same idempotency key got the first key's result")
	}

	// A failed call releases its key: the retry runs again.
	failKeyed(t, c, "create_outlet", M{"name": "Tiered", "tier": 9}, "k-3", "invalid_argument")
	failKeyed(t, c, "create_outlet", M{"name": "Tiered", "tier": 9}, "k-3", "invalid_argument")

	// The header, and the header with an argument that differs.
	h := headerClient(t, env, env.AdminKey, http.Header{"Idempotency-Key": {"h-1"}})
	call := func(s *mcp.ClientSession, args M, meta mcp.Meta) (string, bool) {
		t.Helper()
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_contact", Arguments: args, Meta: meta})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	contacts := collChanges(t, c, "contacts")
	r1, isErr1 := call(h, M{"first_name": "Hedda", "last_name": "Header"}, nil)
	r2, isErr2 := call(h, M{"first_name": "Hedda", "last_name": "Header"}, mcp.Meta{"idempotency_key": "h-1"})
	if isErr1 || isErr2 || r1 != r2 {
		t.Errorf("header retry: %s / %s", r1, r2)
	}
	if got := collChanges(t, c, "contacts"); got != contacts+1 {
		t.Errorf("%d contact changes after a call and its retry by header, want %d", got, contacts+1)
	}
	if r, isErr := call(h, M{"first_name": "Hedda", "last_name": "Header"}, mcp.Meta{"idempotency_key": "other"}); !isErr {
		t.Errorf("a header and an argument that differ were accepted: %s", r)
	}
}

// TestIdempotencyConcurrent: two calls with the same key at the same time
// write once, and both get the one result.
func TestIdempotencyConcurrent(t *testing.T) {
	env := testenv.New(t)
	admin := env.Admin()
	before := collChanges(t, admin, "outlets")
	key := env.Key("read", "write")
	sessions := []*mcp.ClientSession{env.Client(key, "").Session, env.Client(key, "").Session}
	for round := range 5 {
		results := make([]string, len(sessions))
		var wg sync.WaitGroup
		for i, s := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_outlet",
					Arguments: M{"name": "Race Daily"}, Meta: mcp.Meta{"idempotency_key": "race-" + string(rune('a'+round))}})
				if err != nil || res.IsError {
					t.Errorf("call %d: %v %v", i, err, res)
					return
				}
				results[i] = res.Content[0].(*mcp.TextContent).Text
			}()
		}
		wg.Wait()
		if results[0] == "" || results[0] != results[1] {
			t.Errorf("round %d: concurrent duplicates answered differently:\n%s\n%s", round, results[0], results[1])
		}
	}
	if got := collChanges(t, admin, "outlets"); got != before+5 {
		t.Errorf("%d outlet changes after 5 pairs of concurrent duplicates, want %d", got, before+5)
	}
}

// TestIdempotencyWriteLanded: when a call's write landed but its result was
// not stored, a retry with the same key does not write again; it says what
// was changed.
func TestIdempotencyWriteLanded(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	var who struct {
		KeyID string `json:"key_id"`
	}
	c.Must("whoami", M{}, &who)
	args := M{"name": "Landed Gazette"}
	raw, _ := json.Marshal(args)
	ctx := context.Background()
	claim, outcome, err := env.Store.ClaimIdempotency(ctx, who.KeyID, "landed-1", "create_outlet", tools.ArgsHash("create_outlet", raw))
	if err != nil || outcome != repo.ClaimNew {
		t.Fatalf("claim: %v %v", outcome, err)
	}
	// The first attempt's write lands under the claim ...
	actor := audit.Actor{UserID: env.AdminUserID, AgentID: "agent", SessionID: "landed", KeyID: who.KeyID, Tool: "create_outlet", IdempotencyKey: claim.Tag()}
	o, err := directory.Of(env.Store).CreateOutlet(audit.WithActor(ctx, actor), directory.OutletFields{Name: ptr("Landed Gazette")})
	if err != nil {
		t.Fatal(err)
	}
	// ... but its result is never stored: the claim is given up.
	if err := env.Store.FinishIdempotency(ctx, claim, ""); err != nil {
		t.Fatal(err)
	}
	before := collChanges(t, c, "outlets")
	e := failKeyed(t, c, "create_outlet", M{"name": "Landed Gazette"}, "landed-1", "failed_precondition")
	var details struct {
		Changes []struct {
			RecordID string `json:"record_id"`
		} `json:"changes"`
	}
	if err := json.Unmarshal(e.Details, &details); err != nil || len(details.Changes) != 1 || details.Changes[0].RecordID != o.ID {
		t.Errorf("details %s do not name the landed change of %s", e.Details, o.ID)
	}
	if got := collChanges(t, c, "outlets"); got != before {
		t.Errorf("the retry wrote: %d outlet changes, want %d", got, before)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestIdempotencyRefusedCallFreesItsKey: a refused call wrote nothing and
// releases its key, so the caller may correct the arguments and retry under
// the same key; the key then belongs to the corrected call (its repeat
// replays it, the refused arguments are another call).
func TestIdempotencyRefusedCallFreesItsKey(t *testing.T) {
	env := testenv.New(t)
	c := env.Admin()
	before := collChanges(t, c, "outlets")
	failKeyed(t, c, "create_outlet", M{"name": "Corrected Weekly", "tier": 9}, "fix-1", "invalid_argument")
	failKeyed(t, c, "create_channel", M{"outlet_id": uuid.NewString(), "type": "website", "name": "Nowhere"}, "fix-2", "not_found")

	first := mustKeyed(t, c, "create_outlet", M{"name": "Corrected Weekly", "tier": 2}, "fix-1")
	again := mustKeyed(t, c, "create_outlet", M{"name": "Corrected Weekly", "tier": 2}, "fix-1")
	if string(again) != string(first) {
		t.Errorf("the corrected call's repeat is not its replay:\n%s\n%s", again, first)
	}
	outlet := testenv.ID(t, first)
	mustKeyed(t, c, "create_channel", M{"outlet_id": outlet, "type": "website", "name": "Somewhere"}, "fix-2")
	if got := collChanges(t, c, "outlets"); got != before+1 {
		t.Errorf("%d outlet changes, want %d (the corrected call's)", got, before+1)
	}
	// The key now belongs to the corrected call.
	failKeyed(t, c, "create_outlet", M{"name": "Corrected Weekly", "tier": 9}, "fix-1", "invalid_argument")
}
