package main

import (
	"context"
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
	notes := fs.Int("notes", 1000, "notes to seed (coverage: half as many; email messages: three times as many)")
	cell := fs.Duration("cell", 2*time.Second, "how long each measurement runs")
	clients := fs.String("clients", "1,8", "client counts, comma-separated")
	peer := fs.String("peer", "", "folder holding the peer's node_modules (bench/peer after npm ci); empty: no peer")
	only := fs.String("only", "", "comma-separated parts of operation names to keep (e.g. note,log)")
	out := fs.String("out", "", "also write the table to this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (service and store) here, for go tool pprof")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := bench.Config{Notes: *notes, Cell: *cell, PeerDir: *peer, MongoURI: os.Getenv("MONGODB_URI"), Progress: stderr}
	for _, c := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return fmt.Errorf("-clients %q: want positive numbers, e.g. 1,8", *clients)
		}
		cfg.Clients = append(cfg.Clients, n)
	}
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
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
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	md := rep.Markdown()
	fmt.Fprint(stdout, md)
	if *out != "" {
		return os.WriteFile(*out, []byte(md), 0o644)
	}
	return nil
}
