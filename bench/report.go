package bench

import (
	"fmt"
	"strings"
	"time"
)

// Targets of the benchmark (see docs/performance.md).
const (
	readTarget     = 1.5 // read p50 / (floor p50 + raw p50)
	writeTarget    = 1.5 // mutation p50 / (floor p50 + raw ops p50)
	throughputGoal = 0.6 // 8-client calls/s / the floor-and-raw bound for the same operation
)

func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	switch {
	case f >= 100:
		return fmt.Sprintf("%.0f", f)
	case f >= 10:
		return fmt.Sprintf("%.1f", f)
	}
	return fmt.Sprintf("%.2f", f)
}

// Check is one target, met or not.
type Check struct {
	Operation, Target string
	Value, Goal       float64
	Met               bool
}

// bound is the throughput the floor and the raw operations allow together
// for n clients: each call of the service pays both on the same CPUs, so the
// bound is the harmonic combination of the two measured rates.
func (r *Report) bound(row Row, n int) float64 {
	f, raw := r.Floor[n].Throughput, row.Raw[n].Throughput
	if f == 0 || raw == 0 {
		return 0
	}
	return 1 / (1/f + 1/raw)
}

// Checks evaluates every target on the report's figures.
func (r *Report) Checks() []Check {
	var out []Check
	one, many := r.Config.Clients[0], r.Config.Clients[len(r.Config.Clients)-1]
	for _, row := range r.Rows {
		s1, ok := row.Service[one]
		if !ok {
			continue
		}
		if isRendering(row.Name) {
			goal, what := readGoalFor(row.Name)
			ms := float64(s1.P50) / float64(time.Millisecond)
			out = append(out, Check{row.Name, what + " (ms)", ms, float64(goal / time.Millisecond), s1.P50 <= goal})
			continue
		}
		base := r.Floor[one].P50 + row.Raw[one].P50
		goal, kind := readTarget, "read p50 ≤ 1.5× (floor + raw)"
		if row.Write {
			goal, kind = writeTarget, "mutation p50 ≤ 1.5× (floor + raw ops)"
		}
		v := float64(s1.P50) / float64(base)
		out = append(out, Check{row.Name, kind, v, goal, v <= goal})
		{ // a ratio to a slow raw operation is no speed: an absolute bound beside it
			goal, what := readGoalFor(row.Name)
			ms := float64(s1.P50) / float64(time.Millisecond)
			out = append(out, Check{row.Name, what + " (ms)", ms, float64(goal / time.Millisecond), s1.P50 <= goal})
		}
		if many != one {
			if b := r.bound(row, many); b > 0 {
				v := row.Service[many].Throughput / b
				out = append(out, Check{row.Name, fmt.Sprintf("%d-client calls/s ≥ 0.6× floor-and-raw bound", many), v, throughputGoal, v >= throughputGoal})
			}
			if row.Write {
				v := row.Service[many].Throughput / s1.Throughput
				out = append(out, Check{row.Name, fmt.Sprintf("%d-client calls/s > 1 client's", many), v, 1, v > 1})
			}
		}
		if p, ok := row.Peer[one]; ok {
			v := float64(s1.P50) / float64(p.P50)
			out = append(out, Check{row.Name, "p50 below the peer's", v, 1, v < 1})
		}
	}
	for _, rb := range r.Rollbacks {
		back, write := rb.PerChange()
		v := float64(back) / float64(write)
		out = append(out, Check{fmt.Sprintf("rollback_session of %s create_note calls", thousands(rb.Changes)),
			fmt.Sprintf("per change ≤ the write it undoes (%s ms ÷ %s ms)", ms(back), ms(write)), v, 1, v <= 1})
	}
	return out
}

// Markdown renders the report: the machine, the table, the targets.
func (r *Report) Markdown() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "Machine: %d CPUs (`nproc`), %s; load average %s before, %s after. Store: %s.\n", r.CPUs, r.Machine, r.LoadBefore, r.LoadAfter, r.Store)
	fmt.Fprintf(&b, "Data: %s (seeded in %v, %s; store reopened and service started in %v). %v per cell. Times in ms.\n\n",
		r.Seeded, r.SeedTime.Round(time.Second), r.SeedMethod, r.OpenTime.Round(time.Millisecond), c.Cell)
	fmt.Fprintf(&b, "| operation | clients | p50 | p99 | calls/s | floor p50 | raw p50 (store ops) | raw calls/s | p50 ÷ (floor + raw) | peer p50 | allocs/call (KB) | load |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, n := range c.Clients {
		f := r.Floor[n]
		fmt.Fprintf(&b, "| *floor: trivial tool* | %d | %s | %s | %.0f | | | | | | %s | %.2f |\n", n, ms(f.P50), ms(f.P99), f.Throughput, allocs(f), f.Load)
	}
	for _, row := range r.Rows {
		for _, n := range c.Clients {
			s, raw, f := row.Service[n], row.Raw[n], r.Floor[n]
			peer := "–"
			if p, ok := row.Peer[n]; ok {
				peer = ms(p.P50)
			}
			name := row.Name
			if row.Write {
				name += " ✎"
			}
			errs := ""
			if s.Errors > 0 {
				errs = fmt.Sprintf(" (%d errors)", s.Errors)
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %.1f%s | %s | %s (%d) | %.1f | %.2f | %s | %s | %.2f |\n", name, n, ms(s.P50), ms(s.P99), s.Throughput, errs,
				ms(f.P50), ms(raw.P50), row.RawOps, raw.Throughput, float64(s.P50)/float64(f.P50+raw.P50), peer, allocs(s), s.Load)
		}
	}
	fmt.Fprintf(&b, "\n✎ a mutation. Raw: the same reads with the driver; for a mutation, the store operations it needs at the least "+
		"(link look-ups, the change counter, the record, its change entry), counted in brackets. "+
		"Allocs/call: heap allocations of the whole process per call (service, client and, on the embedded store, the store), with their kilobytes; "+
		"the floor's row is the client's and the SDK's share.\n")
	if len(r.Rollbacks) > 0 {
		b.WriteString("\n| session rollback (1 client) | changes | the writes, total | per write | rollback_session | per change | per change ÷ per write |\n|---|---|---|---|---|---|---|\n")
		for _, rb := range r.Rollbacks {
			back, write := rb.PerChange()
			fmt.Fprintf(&b, "| create_note calls, then rollback_session | %s | %v | %s | %v | %s | %.2f |\n", thousands(rb.Changes),
				rb.Write.Round(time.Millisecond), ms(write), rb.Rollback.Round(time.Millisecond), ms(back), float64(back)/float64(write))
		}
	}
	if r.ServerRSS > 0 {
		fmt.Fprintf(&b, "RSS at the end: this process (service, store, clients) %d MB, %d MB once a collection hands freed memory back; its peak while serving %d MB, over the whole run %d MB", r.ServerRSS>>20, r.HeldRSS>>20, r.PeakRSS>>20, r.RunPeakRSS>>20)
		if r.PeerRSS > 0 {
			fmt.Fprintf(&b, "; the peer %d MB", r.PeerRSS>>20)
		}
		b.WriteString(".\n")
	}
	if r.PeerNote != "" {
		fmt.Fprintf(&b, "%s.\n", r.PeerNote)
	}
	writeChecks(&b, r.Checks())
	return b.String()
}

// writeChecks renders the targets, met or missed, with their figures.
func writeChecks(b *strings.Builder, checks []Check) {
	met := 0
	for _, ch := range checks {
		if ch.Met {
			met++
		}
	}
	fmt.Fprintf(b, "\nTargets: %d of %d met.\n\n| operation | target | value | goal | met |\n|---|---|---|---|---|\n", met, len(checks))
	for _, ch := range checks {
		mark := "**missed**"
		if ch.Met {
			mark = "met"
		}
		fmt.Fprintf(b, "| %s | %s | %.2f | %g | %s |\n", ch.Operation, ch.Target, ch.Value, ch.Goal, mark)
	}
}

// allocs is a cell's allocations per call, with their kilobytes.
func allocs(s Stats) string {
	return fmt.Sprintf("%s (%.0f)", thousands(int(s.AllocsPerCall+0.5)), s.BytesPerCall/1024)
}
