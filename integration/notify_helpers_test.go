package integration

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slack-go/slack/slacktest"

	"outreach/audit"
	"outreach/repo"
)

// fakeSlack is the Slack library's own test server (slacktest), with
// chat.postMessage recording every post under a unique ts, an optional run
// of HTTP 429 answers with Retry-After, and conversations.replies (which
// slacktest lacks) answering from the threads the test writes.
type fakeSlack struct {
	srv *slacktest.Server
	// Token is the bot token the server expects.
	Token string

	mu       sync.Mutex
	posts    []slackPost
	replies  map[string][]map[string]string // channel/ts -> replies
	limited  int                            // next this many posts answer 429
	failing  bool                           // posts answer ok:false
	failures int
	hits429  int
	badToken int
	seq      int
}

type slackPost struct {
	Channel, Text, ThreadTS, TS string
}

func newFakeSlack(t *testing.T) *fakeSlack {
	f := &fakeSlack{Token: "xoxb-test-token", replies: map[string][]map[string]string{}}
	f.srv = slacktest.NewTestServer(func(c slacktest.Customize) {
		c.Handle("/chat.postMessage", f.post)
		c.Handle("/conversations.replies", f.thread)
	})
	f.srv.Start()
	t.Cleanup(f.srv.Stop)
	return f
}

// APIURL is the Web API base URL.
func (f *fakeSlack) APIURL() string { return f.srv.GetAPIURL() }

func (f *fakeSlack) form(r *http.Request) url.Values {
	body, _ := io.ReadAll(r.Body)
	v, _ := url.ParseQuery(string(body))
	for k, vs := range r.URL.Query() {
		v[k] = vs
	}
	return v
}

func (f *fakeSlack) authorized(r *http.Request, v url.Values) bool {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if tok == "" {
		tok = v.Get("token")
	}
	return tok == f.Token
}

func (f *fakeSlack) post(w http.ResponseWriter, r *http.Request) {
	v := f.form(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.authorized(r, v) {
		f.badToken++
		json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	if f.failing {
		f.failures++
		json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "service_unavailable"})
		return
	}
	if f.limited > 0 {
		f.limited--
		f.hits429++
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	f.seq++
	ts := fmt.Sprintf("%d.%06d", time.Now().Unix(), f.seq)
	f.posts = append(f.posts, slackPost{Channel: v.Get("channel"), Text: v.Get("text"), ThreadTS: v.Get("thread_ts"), TS: ts})
	json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": v.Get("channel"), "ts": ts})
}

func (f *fakeSlack) thread(w http.ResponseWriter, r *http.Request) {
	v := f.form(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.authorized(r, v) {
		json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	ch, ts := v.Get("channel"), v.Get("ts")
	var parent *slackPost
	for i := range f.posts {
		if f.posts[i].Channel == ch && f.posts[i].TS == ts {
			parent = &f.posts[i]
		}
	}
	if parent == nil {
		json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "thread_not_found"})
		return
	}
	msgs := []map[string]string{{"type": "message", "user": "UBOT", "text": parent.Text, "ts": ts, "thread_ts": ts}}
	msgs = append(msgs, f.replies[ch+"/"+ts]...)
	json.NewEncoder(w).Encode(map[string]any{"ok": true, "messages": msgs, "has_more": false})
}

// reply adds a person's reply to the thread of ts.
func (f *fakeSlack) reply(channel, ts, user, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	f.replies[channel+"/"+ts] = append(f.replies[channel+"/"+ts], map[string]string{"type": "message", "user": user, "text": text,
		"ts": fmt.Sprintf("%d.%06d", time.Now().Unix(), f.seq), "thread_ts": ts})
}

// postsContaining returns the posts whose text contains s.
func (f *fakeSlack) postsContaining(s string) []slackPost {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []slackPost
	for _, p := range f.posts {
		if strings.Contains(p.Text, s) {
			out = append(out, p)
		}
	}
	return out
}

// receiver is a webhook receiver that checks every request's signature
// itself (HMAC-SHA256 over "<t>.<body>", five minutes' tolerance) and
// counts accepted deliveries by their id. It can be down (503) or hang.
type receiver struct {
	secret string
	srv    *httptest.Server
	down   atomic.Bool
	hang   atomic.Bool

	mu       sync.Mutex
	accepted map[string]int
	bodies   map[string]map[string]any
	refused  int
	badSig   int
}

func newReceiver(t *testing.T, secret string) *receiver {
	r := &receiver{secret: secret, accepted: map[string]int{}, bodies: map[string]map[string]any{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if r.hang.Load() {
		select {
		case <-req.Context().Done():
		case <-time.After(5 * time.Second):
		}
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down.Load() {
		r.refused++
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if err := r.check(req.Header.Get("Outreach-Signature"), body); err != nil {
		r.badSig++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var p map[string]any
	if err := json.Unmarshal(body, &p); err != nil || p["id"] != req.Header.Get("Outreach-Delivery-Id") {
		r.badSig++
		http.Error(w, "body id differs from the delivery id", http.StatusBadRequest)
		return
	}
	id := p["id"].(string)
	r.accepted[id]++
	r.bodies[id] = p
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) check(header string, body []byte) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return fmt.Errorf("no signature")
	}
	if d := time.Since(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("stale signature")
	}
	m := hmac.New(sha256.New, []byte(r.secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	if !hmac.Equal([]byte(hex.EncodeToString(m.Sum(nil))), []byte(sig)) {
		return fmt.Errorf("bad signature")
	}
	return nil
}

func (r *receiver) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.accepted[id]
}

func (r *receiver) stats() (accepted map[string]int, refused, badSig int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.accepted {
		out[k] = v
	}
	return out, r.refused, r.badSig
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// httpFunc is a handler that hands each request's body to f and answers 200 ok.
type httpFunc func(body []byte)

func (f httpFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f(body)
	io.WriteString(w, "ok")
}

// contextWithSystem attributes direct store calls of a test to the service.
func contextWithSystem(ctx context.Context) context.Context {
	return audit.WithActor(ctx, repo.SystemActor("test"))
}
