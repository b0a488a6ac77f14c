// Package repotest holds what the domain's tests share: a store on the
// embedded server with every area registered with the core, as the
// service runs it. An area's tests that need a store are external tests
// (package x_test), since this package links every area and sits above
// them all.
package repotest

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"outreach/embedded"
	"outreach/repo"
	_ "outreach/repo/access"
	_ "outreach/repo/dossiers"
	_ "outreach/repo/mailboxes"
	_ "outreach/repo/notify"
	_ "outreach/repo/pitches"
	_ "outreach/repo/reports"
)

// OpenEmbedded opens a store in ordered mode on a fresh embedded server,
// closed when t ends.
func OpenEmbedded(t *testing.T) *repo.Store {
	t.Helper()
	ctx := context.Background()
	es, err := embedded.Start(ctx, embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(es.Close)
	s, err := repo.Open(ctx, es.URI, "group_test", repo.Options{WriteMode: repo.ModeOrdered, Exclusive: true, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}
