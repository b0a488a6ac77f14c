package main

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"outreach/embedded"
	"outreach/repo"
	"outreach/repo/directory"
	"outreach/repo/pipeline"
)

// TestDemoPlan: the progress bar's total is the number of writes seed --demo
// makes, and two runs on two empty stores write the same records.
func TestDemoPlan(t *testing.T) {
	ctx := context.Background()
	var runs []map[string]int
	var names [][]string
	for i := 0; i < 2; i++ {
		es, err := embedded.Start(ctx, embedded.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer es.Close()
		s, err := repo.Open(ctx, es.URI, "demo", repo.Options{Logger: zerolog.Nop(), Exclusive: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		if err := pipeline.Of(s).Seed(ctx); err != nil {
			t.Fatal(err)
		}
		steps := 0
		counts, err := seedDemo(ctx, s, func(string) { steps++ })
		if err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, n := range counts {
			sum += n
		}
		if sum != steps || steps != demoPlan() {
			t.Errorf("seed --demo made %d steps (counted %d), its plan says %d", steps, sum, demoPlan())
		}
		p, err := directory.Of(s).ListContacts(ctx, directory.ContactFilter{}, 200, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ns []string
		for _, c := range p.Items {
			ns = append(ns, c.FirstName+" "+c.LastName+" "+c.Email)
		}
		runs, names = append(runs, counts), append(names, ns)
	}
	for k, n := range runs[0] {
		if runs[1][k] != n {
			t.Errorf("%s: %d in one run, %d in the other", k, n, runs[1][k])
		}
	}
	if len(names[0]) != 40 {
		t.Fatalf("contacts: %d", len(names[0]))
	}
	seen := map[string]bool{}
	for _, n := range names[0] {
		seen[n] = true
	}
	for _, n := range names[1] {
		if !seen[n] {
			t.Errorf("contact %q is in one run only", n)
		}
	}
}
