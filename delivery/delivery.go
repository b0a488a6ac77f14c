// Package delivery sends the outbox's notifications to the team's Slack
// channel and to a signed webhook. It runs in every service instance:
// each notification is claimed by a lease written through the store's
// write path (one claimant wins), sent, and finished with one delivery
// record per attempt. A worker that dies mid-delivery leaves its lease to
// expire and another (or the restarted one) sends again: delivery is at
// least once, and every send carries the notification's id so a receiver
// can drop a repeat.
package delivery

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"outreach/audit"
	"outreach/repo"
	"outreach/repo/access"
	"outreach/repo/notify"
	"outreach/repo/outbox"
	"outreach/repo/pipeline"
	"outreach/slackmsg"
)

// Webhook headers. The signature scheme is Stripe's and Slack's: an HMAC
// over the timestamp and the body, so a replayed body with a new
// timestamp fails, and an old one falls outside the tolerance window.
const (
	HeaderSignature = "Outreach-Signature" // t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
	HeaderID        = "Outreach-Delivery-Id"
	HeaderEvent     = "Outreach-Event"
)

// DefaultTolerance is how old a signature a receiver should accept.
const DefaultTolerance = 5 * time.Minute

// Config configures a worker.
type Config struct {
	Slack         *slackmsg.Client
	WebhookURL    string
	WebhookSecret string
	// Interval between scans for due notifications; zero means 2 s.
	Interval time.Duration
	// Lease a worker holds a notification while sending; zero means 30 s.
	Lease time.Duration
	// BackoffBase and BackoffMax bound the retry delay, which doubles per
	// failed attempt with full jitter; zero means 2 s and 10 min.
	BackoffBase, BackoffMax time.Duration
	// Timeout of one webhook request; zero means 5 s.
	Timeout time.Duration
	// Parallel notifications sent at once; zero means 4.
	Parallel int
	Logger   zerolog.Logger
}

// Worker delivers notifications.
type Worker struct {
	store *repo.Store
	cfg   Config
	id    string
	http  *http.Client
}

// New returns a worker with its own id (its lease owner name).
func New(store *repo.Store, cfg Config) *Worker {
	if cfg.Interval == 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.Lease == 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase = 2 * time.Second
	}
	if cfg.BackoffMax == 0 {
		cfg.BackoffMax = 10 * time.Minute
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = 4
	}
	return &Worker{store: store, cfg: cfg, id: "worker-" + uuid.NewString(), http: &http.Client{Timeout: cfg.Timeout}}
}

// Targets are the targets this configuration delivers to.
func Targets(cfg Config) []string {
	var t []string
	if cfg.Slack != nil {
		t = append(t, outbox.TargetSlack)
	}
	if cfg.WebhookURL != "" {
		t = append(t, outbox.TargetWebhook)
	}
	return t
}

// Run scans and delivers until ctx ends.
func (w *Worker) Run(ctx context.Context) {
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := w.RunOnce(ctx); err != nil && ctx.Err() == nil {
			w.cfg.Logger.Warn().Str("error", err.Error()).Msg("notification delivery")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunOnce makes the next-action notifications that fell due, then tries
// every notification that is due, and returns how many it finished trying.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	ctx = audit.WithActor(ctx, repo.SystemActor("notification-delivery"))
	if _, err := pipeline.Of(w.store).NotifyDueActions(ctx, time.Now()); err != nil {
		return 0, err
	}
	due, err := notify.Of(w.store).DueNotifications(ctx, time.Now(), 50)
	if err != nil {
		return 0, err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done int
		errs []error
	)
	sem := make(chan struct{}, w.cfg.Parallel)
	for _, n := range due {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ok, err := w.deliver(ctx, n.ID)
			mu.Lock()
			defer mu.Unlock()
			if ok {
				done++
			}
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return done, errors.Join(errs...)
}

// deliver claims notification id, sends it to each target it has not
// reached, and records the attempts.
func (w *Worker) deliver(ctx context.Context, id string) (bool, error) {
	n, err := notify.Of(w.store).ClaimNotification(ctx, id, w.id, w.cfg.Lease)
	if errors.Is(err, notify.ErrClaimed) || repo.ErrorCode(err) == repo.CodeConflict {
		return false, nil // another worker has it
	}
	if err != nil {
		return false, err
	}
	var attempts []notify.DeliveryAttempt
	retryAt := time.Now()
	for _, ts := range n.Delivery.Targets {
		if ts.DeliveredAt != nil {
			continue
		}
		a := notify.DeliveryAttempt{Target: ts.Target, Attempt: ts.Attempts + 1, StartedAt: time.Now().UTC().Truncate(time.Millisecond)}
		var wait time.Duration
		switch ts.Target {
		case outbox.TargetSlack:
			wait, err = w.sendSlack(ctx, n)
		case outbox.TargetWebhook:
			a.HTTPStatus, err = w.sendWebhook(ctx, n)
		default:
			err = fmt.Errorf("no %s target is configured on this instance", ts.Target)
		}
		a.DurationMS = time.Since(a.StartedAt).Milliseconds()
		a.OK = err == nil
		if err != nil {
			a.Error = err.Error()
			next := time.Now().Add(w.backoff(a.Attempt))
			if wait > 0 {
				next = time.Now().Add(wait) // Slack said when
			}
			if retryAt.Before(next) {
				retryAt = next
			}
		}
		attempts = append(attempts, a)
	}
	_, err = notify.Of(w.store).FinishDelivery(ctx, id, w.id, attempts, retryAt)
	if errors.Is(err, notify.ErrClaimed) {
		return false, nil // the lease ran out: whoever holds it now sends again
	}
	return err == nil, err
}

// backoff is the delay before attempt+1: exponential with full jitter.
func (w *Worker) backoff(attempt int) time.Duration {
	d := w.cfg.BackoffBase
	for i := 1; i < attempt && d < w.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, w.cfg.BackoffMax)
	return d/2 + rand.N(d/2+1)
}

// Payload is the webhook body of a notification.
type Payload struct {
	ID               string         `json:"id"`
	Event            string         `json:"event"`
	OccurredAt       time.Time      `json:"occurred_at"`
	UserID           string         `json:"user_id"`
	OpportunityID    string         `json:"opportunity_id"`
	OpportunityTitle string         `json:"opportunity_title"`
	Text             string         `json:"text"`
	Data             map[string]any `json:"data"`
}

// Body is the webhook body of n: the same bytes on every attempt.
func Body(n *outbox.Notification) ([]byte, error) {
	return json.Marshal(Payload{ID: n.ID, Event: n.Event, OccurredAt: n.OccurredAt.UTC(), UserID: n.UserID,
		OpportunityID: n.OpportunityID, OpportunityTitle: n.Title, Text: n.Text, Data: n.Data})
}

// Sign returns the signature header value of body at time t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(secret, ts, body)
}

func mac(secret, ts string, body []byte) string {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(ts))
	h.Write([]byte("."))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// Verify checks a signature header against body, as a receiver does: a
// valid v1 signature made within tolerance of now.
func Verify(secret, header string, body []byte, tolerance time.Duration, now time.Time) error {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return errors.New("malformed signature header")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return errors.New("signature timestamp outside the tolerance window")
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return errors.New("signature does not match")
}

func (w *Worker) sendWebhook(ctx context.Context, n *outbox.Notification) (int, error) {
	body, err := Body(n)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderID, n.ID)
	req.Header.Set(HeaderEvent, n.Event)
	if w.cfg.WebhookSecret != "" {
		req.Header.Set(HeaderSignature, Sign(w.cfg.WebhookSecret, time.Now(), body))
	}
	resp, err := w.http.Do(req)
	if err != nil {
		// The error names the URL, which may carry a secret: keep its kind only.
		return 0, errors.New("webhook request failed: " + errKind(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("webhook answered %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

func errKind(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout"):
		return "timed out"
	case strings.Contains(err.Error(), "connection refused"):
		return "connection refused"
	}
	return "network error"
}

// sendSlack posts n to the team's channel; a rate limit returns how long to wait.
func (w *Worker) sendSlack(ctx context.Context, n *outbox.Notification) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	to := ""
	if u, err := access.Of(w.store).User(ctx, n.UserID); err == nil && u.SlackUserID != "" {
		to = "<@" + u.SlackUserID + "> " // the subscriber is mentioned
	}
	text := fmt.Sprintf("%s*%s* · %s\n%s\n_notification %s_", to, n.Event, n.Title, n.Text, n.ID)
	_, err := w.cfg.Slack.Post(ctx, "", text, "")
	var rl *slackmsg.RateLimitedError
	if errors.As(err, &rl) {
		return rl.RetryAfter, err
	}
	if err != nil {
		return 0, errors.New("Slack post failed: " + safeSlackErr(err))
	}
	return 0, nil
}

// safeSlackErr keeps Slack's error code but never a URL (a webhook URL is a secret).
func safeSlackErr(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "http") {
		return errKind(err)
	}
	return msg
}
