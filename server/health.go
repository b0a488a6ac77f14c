package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"outreach/repo"
)

// Readiness is /readyz's answer: whether the service answers as fast as it
// should, and, when not, why (each reason a short sentence an operator can
// act on, starting with a fixed phrase a probe may match).
type Readiness struct {
	Ready   bool     `json:"ready"`
	Reasons []string `json:"reasons,omitempty"`
}

// The reasons /readyz gives, in the order they are checked.
const (
	ReasonStore       = "store unreachable: the database does not answer"
	ReasonRecovering  = "recovery running: writes a crash or a failure left in doubt are being settled"
	ReasonIndexes     = "indexes building: the service's own indexes are being built; queries read the store meanwhile, more slowly"
	ReasonIndexBehind = "index behind: the service's own index has not followed the change log up to the store's counter for a while (a write in flight or abandoned by another instance); queries read the store meanwhile, more slowly"
)

// readiness checks the store and the engine's state; the ping is bounded so
// that a probe gets its answer before its own timeout.
func readiness(ctx context.Context, store *repo.Store) Readiness {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := store.Ping(ctx); err != nil {
		return Readiness{Reasons: []string{ReasonStore}}
	}
	var r Readiness
	h := store.Health()
	if h.Recovering {
		r.Reasons = append(r.Reasons, ReasonRecovering)
	}
	if h.IndexKept && h.IndexBuilding {
		r.Reasons = append(r.Reasons, ReasonIndexes)
	}
	if h.IndexKept && h.IndexBehind {
		r.Reasons = append(r.Reasons, ReasonIndexBehind)
	}
	r.Ready = len(r.Reasons) == 0
	return r
}

// mountHealth serves /healthz (liveness: the process serves and its store
// answers) and /readyz (readiness: 503 with the reasons until the service
// answers as fast as it should). Neither needs a key; neither says more
// than the reasons above.
func mountHealth(mux *http.ServeMux, store *repo.Store) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if err := store.Ping(ctx); err != nil {
			http.Error(w, "store unavailable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		rd := readiness(r.Context(), store)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if !rd.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(rd)
	})
}
