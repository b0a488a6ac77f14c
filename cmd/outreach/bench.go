package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"outreach/bench"
)

// benchCommand runs the benchmark (package bench) and prints its Markdown
// table. It starts its own store, service, floor and peer; it never touches
// a running server's data.
func benchCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	notes := fs.Int("notes", 1000, "notes to seed (coverage: half as many; email messages: three times as many, in threads of 50); "+
		"the contact the reads ask for holds a third of each, at most 333 notes, 167 coverage and 1,000 messages in 20 threads of its own, "+
		"so from 1,000 notes on every size asks for the same answer")
	growth := fs.String("growth", "", "note counts, comma-separated (e.g. 1000,10000,100000): the growth table instead of the main one; "+
		"a fresh store (or database on MONGODB_URI) per size, 1 client, get_note, list_notes by contact, the interaction log, "+
		"the dossier, search, every list's free-text filter, create_note and update_note, with seeding time, the time to reopen "+
		"the seeded store and start the service, and RSS")
	seedHow := fs.String("seed", bench.SeedAuto, "how notes, coverage, email threads, opportunities and campaigns are stored: write (each through the write path), "+
		"bulk (batches of 1,000 with the change entries the write path would write), auto (bulk above 2,000 notes)")
	cell := fs.Duration("cell", 2*time.Second, "how long each measurement runs")
	clients := fs.String("clients", "1,8", "client counts, comma-separated")
	peer := fs.String("peer", "", "folder holding the peer's node_modules (bench/peer after npm ci); empty: no peer")
	only := fs.String("only", "", "comma-separated parts of operation names to keep (e.g. note,log)")
	out := fs.String("out", "", "also write the table to this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (service and store) here, for go tool pprof")
	memProfile := fs.String("memprofile", "", "write a heap profile (service and store, after a collection) at the end of the run here, for go tool pprof; "+
		"with -growth, one per size: the path with .<notes> appended")
	noRaw := fs.Bool("noraw", false, "leave out the raw store's measurements (their figures print as zero), so that a profile is the service's alone")
	rollback := fs.String("rollback", "100,10000", "session sizes whose rollback is measured (that many create_note calls in a session, then rollback_session), comma-separated; empty: none")
	session := fs.String("session", "", "an agent session id every measured call names (X-Agent-Session-Id); empty: none, the service finds the key's implicit session per call")
	memoryLimit := fs.String("memory-limit", env("OUTREACH_MEMORY_LIMIT", ""), "soft limit on the Go runtime's memory, as serve sets it (default "+defaultMemoryLimit+", or GOMEMLIMIT when set; off: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := applyMemoryLimit(*memoryLimit); err != nil {
		return fmt.Errorf("-memory-limit: %w", err)
	}
	if _, err := applyGCPace(ctx, env("OUTREACH_GC_HEADROOM", "")); err != nil {
		return fmt.Errorf("OUTREACH_GC_HEADROOM: %w", err)
	}
	switch *seedHow {
	case bench.SeedAuto, bench.SeedWrite, bench.SeedBulk:
	default:
		return fmt.Errorf("-seed %q: want auto, write or bulk", *seedHow)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *growth != "" {
		sizes, err := positiveInts(*growth)
		if err != nil {
			return fmt.Errorf("-growth %q: %w", *growth, err)
		}
		g, err := bench.RunGrowth(ctx, bench.GrowthConfig{Sizes: sizes, Cell: *cell, MongoURI: os.Getenv("MONGODB_URI"), Seed: *seedHow,
			AgentSession: *session, MemProfile: *memProfile, NoRaw: *noRaw, Progress: stderr})
		if err != nil {
			return err
		}
		return output(g.Markdown(), *out, stdout)
	}
	cfg := bench.Config{Notes: *notes, Cell: *cell, PeerDir: *peer, MongoURI: os.Getenv("MONGODB_URI"), Seed: *seedHow, AgentSession: *session,
		MemProfile: *memProfile, NoRaw: *noRaw, Progress: stderr}
	var err error
	if cfg.Clients, err = positiveInts(*clients); err != nil {
		return fmt.Errorf("-clients %q: %w", *clients, err)
	}
	if *rollback != "" {
		if cfg.Rollback, err = positiveInts(*rollback); err != nil {
			return fmt.Errorf("-rollback %q: %w", *rollback, err)
		}
	}
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	return output(rep.Markdown(), *out, stdout)
}

// output prints the table, and writes it to the file out when given.
func output(md, out string, stdout io.Writer) error {
	fmt.Fprint(stdout, md)
	if out != "" {
		return os.WriteFile(out, []byte(md), 0o644)
	}
	return nil
}

// positiveInts reads a comma-separated list of positive numbers.
func positiveInts(list string) ([]int, error) {
	var out []int
	for _, c := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return nil, errors.New("want positive numbers, comma-separated")
		}
		out = append(out, n)
	}
	return out, nil
}
