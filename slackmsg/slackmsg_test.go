package slackmsg

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slack-go/slack/slacktest"
)

// Post waits out a 429 for its Retry-After, and gives up with a
// RateLimitedError when the wait would outlast the caller's deadline.
func TestPostHonoursRetryAfter(t *testing.T) {
	var calls, limited atomic.Int32
	limited.Store(1)
	srv := slacktest.NewTestServer(func(c slacktest.Customize) {
		c.Handle("/chat.postMessage", func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			if limited.Add(-1) >= 0 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": "C1", "ts": "1.000001"})
		})
	})
	srv.Start()
	defer srv.Stop()
	c := New(Config{BotToken: "xoxb-1", Channel: "C1", APIURL: srv.GetAPIURL()})
	start := time.Now()
	sent, err := c.Post(context.Background(), "", "hi", "")
	if err != nil || sent.TS != "1.000001" || sent.Via != ViaWebAPI {
		t.Fatalf("post: %+v %v", sent, err)
	}
	if d := time.Since(start); d < 900*time.Millisecond || calls.Load() != 2 {
		t.Errorf("took %s over %d calls; want about 1s over 2", d, calls.Load())
	}

	limited.Store(1)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = c.Post(ctx, "", "hi", "")
	var rl *RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != time.Second {
		t.Errorf("with a short deadline: %v", err)
	}
}

func TestWebhookOnlyCannotRead(t *testing.T) {
	c := New(Config{WebhookURL: "http://127.0.0.1:1/hook"})
	if c.CanRead() || c.Mode() != ViaWebhook {
		t.Fatalf("mode %s", c.Mode())
	}
	if _, err := c.Replies(context.Background(), "C1", "1.0"); !errors.Is(err, ErrNeedsBotToken) {
		t.Errorf("replies: %v", err)
	}
	if New(Config{}) != nil {
		t.Error("a client without token or webhook")
	}
}
