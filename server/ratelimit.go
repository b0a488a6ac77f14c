package server

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"outreach/metrics"
	"outreach/repo"
	"outreach/tools"
)

// limitRequests answers 429 Too Many Requests, with Retry-After in whole
// seconds, to a key over its budget of HTTP requests. The budget is larger
// than the key's budget of tool calls (which answers a tool error,
// rate_limited): it stops a client that floods the endpoint with anything,
// while an agent that merely calls too fast gets the tool error it can read.
// It sits behind authentication, which names the key.
func limitRequests(next http.Handler, limits tools.RateLimits, m *metrics.Metrics) http.Handler {
	l := tools.NewLimiter(limits.Requests, limits.RequestBurst)
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := ""
		if info := auth.TokenInfoFromContext(r.Context()); info != nil {
			key = info.UserID
		}
		if wait, ok := l.Take(key); !ok {
			if m != nil {
				m.RefusedRequest()
			}
			secs := int(math.Ceil(wait.Seconds()))
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": &repo.Error{Code: repo.CodeRateLimited, Retryable: true,
				Message: fmt.Sprintf("this key is over its limit of %g requests a second (bursts of %d); retry after %d s", limits.Requests, limits.RequestBurst, secs),
				Details: map[string]any{"retry_after_ms": wait.Milliseconds() + 1}}})
			return
		}
		next.ServeHTTP(w, r)
	})
}
