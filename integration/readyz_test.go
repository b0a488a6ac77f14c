package integration

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"outreach/embedded"
	"outreach/integration/testenv"
	"outreach/repo"
	"outreach/server"
)

// getReady asks /readyz and returns its status code and answer.
func getReady(t *testing.T, base string) (int, server.Readiness) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var rd server.Readiness
	if err := json.Unmarshal(body, &rd); err != nil {
		t.Fatalf("/readyz: %d %q: %v", resp.StatusCode, body, err)
	}
	return resp.StatusCode, rd
}

// waitReady polls /readyz until its answer satisfies ok. Nothing is timed:
// the deadline only keeps a broken build from hanging the suite.
func waitReady(t *testing.T, base string, ok func(int, server.Readiness) bool) (int, server.Readiness) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, rd := getReady(t, base)
		if ok(code, rd) {
			return code, rd
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still answers %d %+v", code, rd)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReadiness holds /readyz to the service's state: ready on a started
// service; 503 naming the reason while the service's indexes are rebuilt
// and while recovery runs (each held there by the write path's test hook);
// ready again once they end. /healthz stays 200 throughout: it is liveness.
func TestReadiness(t *testing.T) {
	env := testenv.New(t)
	if code, rd := getReady(t, env.Base); code != http.StatusOK || !rd.Ready {
		t.Fatalf("/readyz on a started service: %d %+v, want 200 ready", code, rd)
	}
	in := env.Store.Internals()
	// The hook holds the first collection an index build reads, and a
	// recovery pass at its start, until the test lets them go.
	indexRead, recoverStart := make(chan struct{}), make(chan struct{})
	var reads atomic.Int32
	*in.Hook = func(point string) error {
		switch {
		case point == "index-read" && reads.Add(1) == 1:
			<-indexRead
		case point == "recover":
			<-recoverStart
		}
		return nil
	}
	t.Cleanup(func() { *in.Hook = nil })
	healthy := func() {
		t.Helper()
		resp, err := http.Get(env.Base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/healthz while not ready: %d, want 200 (liveness)", resp.StatusCode)
		}
	}

	if in.IndexKept() {
		// A write whose outcome is unknown drops the index to a rebuild.
		in.IndexLost(repo.CollNotes, errors.New("the store failed without a reply"))
		code, rd := getReady(t, env.Base)
		if diff := cmp.Diff(rd, server.Readiness{Reasons: []string{server.ReasonIndexes}}); code != http.StatusServiceUnavailable || diff != "" {
			t.Errorf("/readyz while the indexes build: %d (-got +want) %s", code, diff)
		}
		healthy()
		close(indexRead)
		waitReady(t, env.Base, func(code int, rd server.Readiness) bool { return code == http.StatusOK && rd.Ready })
	}

	done := make(chan error, 1)
	go func() {
		_, err := env.Store.Recover(context.Background(), true)
		done <- err
	}()
	code, rd := waitReady(t, env.Base, func(code int, rd server.Readiness) bool { return code != http.StatusOK })
	if diff := cmp.Diff(rd, server.Readiness{Reasons: []string{server.ReasonRecovering}}); code != http.StatusServiceUnavailable || diff != "" {
		t.Errorf("/readyz while recovery runs: %d (-got +want) %s", code, diff)
	}
	healthy()
	close(recoverStart)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if code, rd := getReady(t, env.Base); code != http.StatusOK || !rd.Ready {
		t.Errorf("/readyz after recovery: %d %+v, want 200 ready", code, rd)
	}
}

// TestReadinessStoreUnreachable: with the store gone, /readyz and /healthz
// answer 503, /readyz saying why.
func TestReadinessStoreUnreachable(t *testing.T) {
	ctx := context.Background()
	es, err := embedded.Start(ctx, embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	store, err := repo.Open(ctx, es.URI, "outreach", repo.Options{Logger: zerolog.Nop(), Exclusive: true, PrepareStore: es.IndexIDs})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		// The store is gone by then: closing writes nothing it could wait for.
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		store.Close(cctx)
	}()
	if err := store.IndexesReady(ctx); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(server.New(store, zerolog.Nop()))
	defer ts.Close()
	if code, rd := getReady(t, ts.URL); code != http.StatusOK || !rd.Ready {
		t.Fatalf("/readyz: %d %+v, want 200 ready", code, rd)
	}
	es.Close()
	code, rd := getReady(t, ts.URL)
	if code != http.StatusServiceUnavailable || !slices.Equal(rd.Reasons, []string{server.ReasonStore}) {
		t.Errorf("/readyz with the store gone: %d %+v, want 503 %q", code, rd, server.ReasonStore)
	}
	resp, err := http.Get(ts.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/healthz with the store gone: %d, want 503", resp.StatusCode)
	}
}
