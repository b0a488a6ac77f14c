package integration

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"outreach/integration/testenv"
	"outreach/tools"
)

// TestRateLimitToolCalls: a key over its bucket of tool calls gets
// rate_limited, retryable, with the wait; another key is not affected.
func TestRateLimitToolCalls(t *testing.T) {
	// One token every 100 s: the bucket cannot refill during the test.
	env := testenv.NewWith(t, testenv.Options{Tools: []tools.Option{tools.WithRateLimits(tools.RateLimits{Calls: 0.01, CallBurst: 3})}})
	c := env.Client(env.Key("read", "write"), "")
	for range 3 {
		c.Must("whoami", M{}, nil)
	}
	e := c.Fail("create_outlet", M{"name": "Too Fast"}, "rate_limited")
	if !e.Retryable {
		t.Errorf("rate_limited is not retryable: %+v", e)
	}
	var d struct {
		RetryAfterMS int64 `json:"retry_after_ms"`
	}
	if err := json.Unmarshal(e.Details, &d); err != nil || d.RetryAfterMS < 1000 || d.RetryAfterMS > 100_001 {
		t.Errorf("details %s: want retry_after_ms between 1 s and 100 s", e.Details)
	}
	// Nothing was written by the refused call.
	var list struct{ Total int }
	env.Admin().Must("list_outlets", M{"search": "Too Fast"}, &list)
	if list.Total != 0 {
		t.Errorf("a rate-limited call wrote %d outlets", list.Total)
	}
	// Another key has its own bucket.
	env.Client(env.Key("read"), "").Must("whoami", M{}, nil)
}

// TestRateLimitHTTP: a key over its budget of HTTP requests gets 429 with
// Retry-After at the edge; another key is not affected.
func TestRateLimitHTTP(t *testing.T) {
	env := testenv.NewWith(t, testenv.Options{Tools: []tools.Option{tools.WithRateLimits(tools.RateLimits{Requests: 0.01, RequestBurst: 4})}})
	post := func(key string) *http.Response {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`
		req, _ := http.NewRequest(http.MethodPost, env.URL, bytes.NewBufferString(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	key := env.Key("read")
	for i := range 4 {
		if res := post(key); res.StatusCode != http.StatusOK {
			t.Fatalf("request %d within the budget: status %d", i, res.StatusCode)
		}
	}
	res := post(key)
	if res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("request over the budget: status %d, want 429", res.StatusCode)
	}
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || s < 1 || s > 100 {
		t.Errorf("Retry-After %q: want whole seconds, 1 to 100", res.Header.Get("Retry-After"))
	}
	if res := post(env.Key("read")); res.StatusCode != http.StatusOK {
		t.Errorf("another key: status %d, want 200", res.StatusCode)
	}
}
