package tools

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"outreach/repo"
)

// Rate limits per API key, so one runaway agent cannot starve the team: a
// token bucket of tool calls (a call over it is the error rate_limited,
// retryable, with the wait), and a separate, larger bucket of HTTP requests
// at the edge (server/ratelimit.go: 429 with Retry-After), which also counts
// what is not a tool call (tools/list, initialize, notifications).

// RateLimits are the per-key buckets: a sustained rate per second and a
// burst. A rate of 0 turns the bucket off.
type RateLimits struct {
	Calls        float64 // tool calls per second per key
	CallBurst    int
	Requests     float64 // HTTP requests per second per key, at the edge
	RequestBurst int
	// Pages are the requests of the pages reached without a key (a shared
	// report's page, a rendering's download) per client address, a bucket
	// both share: 429 with Retry-After over it.
	Pages     float64
	PageBurst int
}

// DefaultCallRate and DefaultRequestRate are the service's settings unless
// the operator gives others: 10 tool calls a second per key with bursts of
// 100, and 50 HTTP requests a second with bursts of 500.
const (
	DefaultCallRate    = "10,100"
	DefaultRequestRate = "50,500"
	// DefaultPageRate: 2 page requests a second per client address, bursts
	// of 20 (a room opening a link at once behind one address).
	DefaultPageRate = "2,20"
)

// WithRateLimits sets the per-key rate limits; without it there are none
// (the command sets the defaults above).
func WithRateLimits(r RateLimits) Option { return func(o *options) { o.limits = &r } }

// ParseRateLimits reads the settings "RATE" or "RATE,BURST" (per second; a
// burst defaults to ten seconds' worth; "0" turns the limit off) of tool
// calls and of HTTP requests.
func ParseRateLimits(calls, requests string) (RateLimits, error) {
	var r RateLimits
	var err error
	if r.Calls, r.CallBurst, err = parseRate(calls); err != nil {
		return r, fmt.Errorf("rate limit of tool calls %q: %w", calls, err)
	}
	if r.Requests, r.RequestBurst, err = parseRate(requests); err != nil {
		return r, fmt.Errorf("rate limit of HTTP requests %q: %w", requests, err)
	}
	return r, nil
}

// ParseRate reads one setting "RATE" or "RATE,BURST" as ParseRateLimits
// does (the page limit's).
func ParseRate(s string) (perSecond float64, burst int, err error) { return parseRate(s) }

func parseRate(s string) (float64, int, error) {
	perSecond, burst, hasBurst := strings.Cut(strings.TrimSpace(s), ",")
	r, err := strconv.ParseFloat(strings.TrimSpace(perSecond), 64)
	if err != nil || r < 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return 0, 0, fmt.Errorf("want RATE or RATE,BURST: a number of events per second (0: no limit) and a whole number")
	}
	b := int(math.Ceil(r * 10))
	if hasBurst {
		if b, err = strconv.Atoi(strings.TrimSpace(burst)); err != nil || b < 1 {
			return 0, 0, fmt.Errorf("the burst must be a whole number of at least 1")
		}
	}
	return r, max(b, 1), nil
}

// RateLimitsOf returns the rate limits opts set.
func RateLimitsOf(opts ...Option) RateLimits {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if o.limits == nil {
		return RateLimits{}
	}
	return *o.limits
}

// Limiter holds one token bucket per API key (or client address). Past
// MaxLimiterKeys buckets it starts afresh with none, so a flood of new
// addresses cannot grow it without end.
type Limiter struct {
	limit rate.Limit
	burst int
	mu    sync.Mutex
	keys  map[string]*rate.Limiter
}

// MaxLimiterKeys bounds a Limiter's buckets.
const MaxLimiterKeys = 10_000

// NewLimiter returns per-key buckets of perSecond with burst; perSecond 0
// means no limit (a nil Limiter).
func NewLimiter(perSecond float64, burst int) *Limiter {
	if perSecond <= 0 {
		return nil
	}
	return &Limiter{limit: rate.Limit(perSecond), burst: max(burst, 1), keys: map[string]*rate.Limiter{}}
}

// Take takes a token of key's bucket, or returns how long until one is
// there (and takes none).
func (l *Limiter) Take(key string) (wait time.Duration, ok bool) {
	if l == nil {
		return 0, true
	}
	l.mu.Lock()
	b := l.keys[key]
	if b == nil && len(l.keys) >= MaxLimiterKeys {
		clear(l.keys)
	}
	if b == nil {
		b = rate.NewLimiter(l.limit, l.burst)
		l.keys[key] = b
	}
	l.mu.Unlock()
	now := time.Now()
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// rateLimited is the error of a call over its key's limit.
func rateLimited(wait time.Duration, l *Limiter) error {
	ms := wait.Milliseconds() + 1
	return &repo.Error{Code: repo.CodeRateLimited, Retryable: true,
		Message: fmt.Sprintf("this key is over its limit of %g tool calls a second (bursts of %d); retry in %.1f s", float64(l.limit), l.burst, float64(ms)/1000),
		Details: map[string]any{"retry_after_ms": ms, "calls_per_second": float64(l.limit), "burst": l.burst}}
}
