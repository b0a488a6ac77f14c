package ledger

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"outreach/embedded"
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
	s, err := openDB(ctx, uri, "probe_test_"+strings.ReplaceAll(uuid.NewString()[:8], "-", ""), Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(ctx, s)
	for range 3 {
		p := Probe(ctx, s.client, s.db)
		t.Logf("%s: %+v", s.caps.Server, p)
		if os.Getenv("MONGODB_URI") == "" {
			if p.AtomicUpdates || p.Transactions || p.UnionWith || p.TextSearch {
				t.Errorf("embedded FerretDB v1: probes found %+v, want nothing", p)
			}
		}
		if p.AtomicUpdates != s.caps.AtomicUpdates || p.Transactions != s.caps.Transactions {
			t.Errorf("probes at start found %+v, now %+v", s.caps, p)
		}
	}
	if s.serialWrites == s.caps.AtomicUpdates {
		t.Errorf("serial writes %v with atomic updates %v", s.serialWrites, s.caps.AtomicUpdates)
	}
	if want := map[bool]string{true: ModeTransaction, false: ModeOrdered}[s.caps.Transactions]; s.caps.WriteMode != want {
		t.Errorf("write mode %s with transactions %v", s.caps.WriteMode, s.caps.Transactions)
	}
	// Transaction mode, even when asked for, only where the probe passed.
	if !s.caps.Transactions {
		if t2, err := openDB(ctx, uri, s.db.Name(), Options{Logger: zerolog.Nop(), WriteMode: ModeTransaction}); err == nil {
			closeDB(ctx, t2)
			t.Error("transaction mode was granted on a server whose transaction probe failed")
		}
	}
	// Each start's probe documents are its own: a run field and ids it prefixes.
	cur, err := s.db.Collection(CollProbes).Find(ctx, map[string]any{})
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
