// Package slackmsg is the service's Slack client: it posts to the team's
// channel through Slack's Web API with a bot token (and reads thread
// replies), or through an incoming-webhook URL in send-only setups. It
// honours Slack's rate limits: an HTTP 429 is waited out for its
// Retry-After, within the caller's deadline.
package slackmsg

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// Ways a message leaves.
const (
	ViaWebAPI  = "web_api"
	ViaWebhook = "incoming_webhook"
)

// Config is the Slack configuration, read from the environment by the
// service. Secrets (the token, the webhook URL) are never logged.
type Config struct {
	// BotToken enables the Web API (posting and reading threads).
	BotToken string
	// Channel is the default channel (an id like C0123 or a name like #press).
	Channel string
	// WebhookURL is an incoming webhook: sends only. Used when there is no token.
	WebhookURL string
	// APIURL overrides Slack's Web API base URL (a local test server).
	APIURL string
	// HTTP is the client to use; nil means one with a 10 s timeout.
	HTTP *http.Client
	// MaxWait caps how long one call waits out rate limits; zero means 30 s.
	MaxWait time.Duration
}

// Client sends to Slack. A nil *Client is "not configured".
type Client struct {
	cfg Config
	api *slack.Client
}

// ErrNotConfigured says no Slack token or webhook is configured.
var ErrNotConfigured = errors.New("Slack is not configured: set OUTREACH_SLACK_BOT_TOKEN (and OUTREACH_SLACK_CHANNEL), or OUTREACH_SLACK_WEBHOOK_URL for sending only")

// ErrNeedsBotToken says a call needs the Web API, which a webhook-only setup lacks.
var ErrNeedsBotToken = errors.New("reading replies needs Slack's Web API: set OUTREACH_SLACK_BOT_TOKEN (a bot token with chat:write and channels:history); an incoming webhook can only send")

// RateLimitedError is a rate limit that outlasted the wait allowed.
type RateLimitedError struct{ RetryAfter time.Duration }

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("Slack rate limit: retry after %s", e.RetryAfter)
}

// New returns a client, or nil when cfg configures neither a token nor a webhook.
func New(cfg Config) *Client {
	if cfg.BotToken == "" && cfg.WebhookURL == "" {
		return nil
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 30 * time.Second
	}
	c := &Client{cfg: cfg}
	if cfg.BotToken != "" {
		opts := []slack.Option{slack.OptionHTTPClient(cfg.HTTP)}
		if cfg.APIURL != "" {
			u := cfg.APIURL
			if !strings.HasSuffix(u, "/") {
				u += "/"
			}
			opts = append(opts, slack.OptionAPIURL(u))
		}
		c.api = slack.New(cfg.BotToken, opts...)
	}
	return c
}

// CanRead reports whether the client can read threads (it has a bot token).
func (c *Client) CanRead() bool { return c != nil && c.api != nil }

// Mode is "web_api", "incoming_webhook", or "" when not configured.
func (c *Client) Mode() string {
	switch {
	case c == nil:
		return ""
	case c.api != nil:
		return ViaWebAPI
	}
	return ViaWebhook
}

// DefaultChannel is the configured channel.
func (c *Client) DefaultChannel() string {
	if c == nil {
		return ""
	}
	return c.cfg.Channel
}

// Sent is where a message went.
type Sent struct {
	Channel string
	TS      string // empty for a webhook send
	Via     string
}

// Post sends text (Slack mrkdwn) to channel (the default when empty), in
// the thread of threadTS when given. A webhook send goes to the webhook's
// own channel.
func (c *Client) Post(ctx context.Context, channel, text, threadTS string) (Sent, error) {
	if c == nil {
		return Sent{}, ErrNotConfigured
	}
	if channel == "" {
		channel = c.cfg.Channel
	}
	if c.api == nil {
		err := c.retry(ctx, func() error {
			return slack.PostWebhookCustomHTTPContext(ctx, c.cfg.WebhookURL, c.cfg.HTTP, &slack.WebhookMessage{Text: text, Channel: channel})
		})
		return Sent{Channel: channel, Via: ViaWebhook}, err
	}
	if channel == "" {
		return Sent{}, errors.New("no channel: pass one or set OUTREACH_SLACK_CHANNEL")
	}
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	if threadTS != "" {
		opts = append(opts, slack.MsgOptionTS(threadTS))
	}
	var ch, ts string
	err := c.retry(ctx, func() error {
		var err error
		ch, ts, err = c.api.PostMessageContext(ctx, channel, opts...)
		return err
	})
	if err != nil {
		return Sent{}, err
	}
	return Sent{Channel: ch, TS: ts, Via: ViaWebAPI}, nil
}

// Reply is one message in a thread.
type Reply struct {
	User string
	Text string
	TS   string
}

// Replies returns the replies in the thread of the message ts in channel,
// oldest first, without the message itself.
func (c *Client) Replies(ctx context.Context, channel, ts string) ([]Reply, error) {
	if c == nil {
		return nil, ErrNotConfigured
	}
	if c.api == nil {
		return nil, ErrNeedsBotToken
	}
	var out []Reply
	cursor := ""
	for {
		var msgs []slack.Message
		var more bool
		var next string
		err := c.retry(ctx, func() error {
			var err error
			msgs, more, next, err = c.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: channel, Timestamp: ts, Cursor: cursor})
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Timestamp == ts {
				continue // the parent message
			}
			user := m.User
			if user == "" {
				user = m.Username
			}
			out = append(out, Reply{User: user, Text: m.Text, TS: m.Timestamp})
		}
		if !more || next == "" {
			return out, nil
		}
		cursor = next
	}
}

// retry runs call, waiting out Slack's rate limits (HTTP 429 with
// Retry-After) while the caller's deadline and MaxWait allow.
func (c *Client) retry(ctx context.Context, call func() error) error {
	waited := time.Duration(0)
	for {
		err := call()
		after, limited := retryAfter(err)
		if !limited {
			return err
		}
		if after <= 0 {
			after = time.Second
		}
		if dl, ok := ctx.Deadline(); (ok && time.Until(dl) < after) || waited+after > c.cfg.MaxWait {
			return &RateLimitedError{RetryAfter: after}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(after):
		}
		waited += after
	}
}

func retryAfter(err error) (time.Duration, bool) {
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return rl.RetryAfter, true
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) && sc.Code == http.StatusTooManyRequests {
		return time.Second, true
	}
	return 0, false
}
