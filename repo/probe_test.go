package repo

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"outreach/embedded"
	"outreach/ledger"
)

// TestProbesDecideCapabilities runs the probes on the store of this run: on
// the embedded FerretDB v1 filtered updates are not atomic and there is
// nothing else; on a server given by MONGODB_URI the probes must agree with
// what the server does (checked by the tests of each capability) and the
// write mode must follow them.
func TestProbesDecideCapabilities(t *testing.T) {
	ctx := context.Background()
	uri := os.Getenv("MONGODB_URI")
	if uri == "" {
		es, err := embedded.Start(ctx, embedded.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(es.Close)
		uri = es.URI
	}
	s, err := Open(ctx, uri, "probe_test_"+strings.ReplaceAll(uuid.NewString()[:8], "-", ""), Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	for range 3 {
		p := ledger.Probe(ctx, s.client, s.Database())
		t.Logf("%s: %+v", s.Internals().Caps.Server, p)
		if os.Getenv("MONGODB_URI") == "" {
			if p.AtomicUpdates || p.Transactions || p.UnionWith || p.TextSearch {
				t.Errorf("embedded FerretDB v1: probes found %+v, want nothing", p)
			}
		}
		if p.AtomicUpdates != s.Internals().Caps.AtomicUpdates || p.Transactions != s.Internals().Caps.Transactions {
			t.Errorf("probes at start found %+v, now %+v", *s.Internals().Caps, p)
		}
	}
	if *s.Internals().SerialWrites == s.Internals().Caps.AtomicUpdates {
		t.Errorf("serial writes %v with atomic updates %v", *s.Internals().SerialWrites, s.Internals().Caps.AtomicUpdates)
	}
	if want := map[bool]string{true: ModeTransaction, false: ModeOrdered}[s.Internals().Caps.Transactions]; s.Internals().Caps.WriteMode != want {
		t.Errorf("write mode %s with transactions %v", s.Internals().Caps.WriteMode, s.Internals().Caps.Transactions)
	}
	// Transaction mode, even when asked for, only where the probe passed.
	if !s.Internals().Caps.Transactions {
		if t2, err := Open(ctx, uri, s.Database().Name(), Options{Logger: zerolog.Nop(), WriteMode: ModeTransaction}); err == nil {
			t2.Close(ctx)
			t.Error("transaction mode was granted on a server whose transaction probe failed")
		}
	}
	// Each start's probe documents are its own: a run field and ids it prefixes.
	cur, err := s.Database().Collection(collProbes).Find(ctx, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		ID  string `bson:"_id"`
		Run string `bson:"run"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatal(err)
	}
	if len(docs) < 5 {
		t.Errorf("%d probe documents; want at least the 5 of this start", len(docs))
	}
	for _, d := range docs {
		if d.Run == "" || !strings.HasPrefix(d.ID, d.Run+"-") {
			t.Errorf("probe document %q (run %q) belongs to no run", d.ID, d.Run)
		}
	}
}
