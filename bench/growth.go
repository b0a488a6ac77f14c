package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// GrowthConfig sizes a growth run: the same reads and writes, one client,
// on a fresh store per size.
type GrowthConfig struct {
	// Sizes are the note counts, one fresh store (or database) each.
	Sizes []int
	// Cell is how long each measurement runs.
	Cell time.Duration
	// MongoURI, when set, is the server each size gets a new database on.
	MongoURI string
	// Seed is the seeding method (Config.Seed).
	Seed string
	// AgentSession is Config.AgentSession.
	AgentSession string
	// MemProfile, when set, gets a heap profile per size, at the end of
	// that size's run: the path with ".<notes>" appended.
	MemProfile string
	// NoRaw is Config.NoRaw.
	NoRaw    bool
	Progress io.Writer
}

// growthOps are the operations the growth table follows: the reads the
// issue's target names (a contact's notes, its interaction log, its
// dossier), a read by id, search and every list's free-text filter, and
// the two commonest writes.
var growthOps = []string{"get_note", "list_notes (by contact)", "get_interaction_log", "get_contact_dossier", "search",
	"list_notes (search)", "list_contacts (search)", "list_outlets (search)", "list_campaigns (search)", "list_opportunities (search)",
	"list_coverage (search)", "search_emails", "create_note", "update_note",
	"render_report (html, a year)", "render_report (pdf, a year)", "render_report (xlsx, a year)", "render_report (png, a year)", "shared report page (GET)"}

// Growth is a growth run's result: one benchmark report per size.
type Growth struct {
	Machine               string
	CPUs                  int
	LoadBefore, LoadAfter string
	Runs                  []*Report
}

// RunGrowth runs the benchmark once per size, one client, on the growth
// operations.
func RunGrowth(ctx context.Context, cfg GrowthConfig) (*Growth, error) {
	g := &Growth{Machine: cpuModel(), CPUs: runtime.NumCPU(), LoadBefore: loadAvg()}
	for _, n := range cfg.Sizes {
		// Hand the previous size's memory back, so the RSS measured at the
		// end of this one is this size's.
		debug.FreeOSMemory()
		mem := ""
		if cfg.MemProfile != "" {
			mem = fmt.Sprintf("%s.%d", cfg.MemProfile, n)
		}
		rep, err := Run(ctx, Config{Notes: n, Cell: cfg.Cell, Clients: []int{1}, MongoURI: cfg.MongoURI,
			Names: growthOps, Backup: true, Seed: cfg.Seed, AgentSession: cfg.AgentSession, MemProfile: mem, NoRaw: cfg.NoRaw, Progress: cfg.Progress})
		if err != nil {
			return nil, fmt.Errorf("%d notes: %w", n, err)
		}
		g.Runs = append(g.Runs, rep)
	}
	g.LoadAfter = loadAvg()
	return g, nil
}

// Markdown renders the growth table: sizes as columns, p50 of the service
// and of the raw store per operation, then seeding, opening, memory and load.
func (g *Growth) Markdown() string {
	var b strings.Builder
	if len(g.Runs) == 0 {
		return ""
	}
	first := g.Runs[0]
	fmt.Fprintf(&b, "Machine: %d CPUs (`nproc`), %s; load average %s before, %s after. Store: %s.\n", g.CPUs, g.Machine, g.LoadBefore, g.LoadAfter, first.Store)
	fmt.Fprintf(&b, "1 client, %v per cell, p50 in ms: service / raw store. A fresh store per column; the hot contact, which the reads ask for, "+
		"holds a third of the data up to %d notes, %d coverage and %s email messages (in threads of its own), the same answer from 1,000 notes on. ",
		first.Config.Cell, hotNotes, hotCoverage, thousands(hotMessages))
	if first.Config.AgentSession != "" {
		fmt.Fprintf(&b, "Every measured call names the agent session %q (X-Agent-Session-Id).\n\n", first.Config.AgentSession)
	} else {
		b.WriteString("The measured calls name no agent session: the service finds each call's session (the key's implicit session, on the protocol revision the go-sdk client speaks).\n\n")
	}
	b.WriteString("| operation (1 client, p50 ms: service / raw) |")
	for _, r := range g.Runs {
		fmt.Fprintf(&b, " %s notes |", thousands(r.Config.Notes))
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(g.Runs)) + "\n")
	row := func(label string, cell func(r *Report) string) {
		fmt.Fprintf(&b, "| %s |", label)
		for _, r := range g.Runs {
			fmt.Fprintf(&b, " %s |", cell(r))
		}
		b.WriteString("\n")
	}
	row("*floor: trivial tool*", func(r *Report) string { return ms(r.Floor[1].P50) })
	for i, op := range first.Rows {
		name := op.Name
		if op.Write {
			name += " ✎"
		}
		row(name, func(r *Report) string {
			if i >= len(r.Rows) {
				return "–"
			}
			s, raw := r.Rows[i].Service[1], r.Rows[i].Raw[1]
			out := ms(s.P50) + " / " + ms(raw.P50)
			if s.Errors > 0 {
				out += fmt.Sprintf(" (%d errors)", s.Errors)
			}
			return out
		})
	}
	for i, op := range first.Rows {
		row("allocations per call (KB): "+op.Name, func(r *Report) string {
			if i >= len(r.Rows) {
				return "–"
			}
			return allocs(r.Rows[i].Service[1])
		})
	}
	row("seeding (how)", func(r *Report) string {
		how := "write path"
		if r.SeedMethod == SeedBulk {
			how = "bulk"
		}
		return fmt.Sprintf("%v (%s)", r.SeedTime.Round(100*time.Millisecond), how)
	})
	if first.onServer() {
		growthServerStartRows(row)
	} else {
		row("open the seeded store and start the service", func(r *Report) string { return r.OpenTime.Round(time.Millisecond).String() })
		row("then build the service's own indexes (embedded store, in the background)", func(r *Report) string { return r.IndexTime.Round(time.Millisecond).String() })
		row("restart (clean stop, then start): open the store and start the service", func(r *Report) string { return r.RestartTime.Round(time.Millisecond).String() })
		row("then the service's own indexes ready (from their checkpoint)", func(r *Report) string { return r.RestartIndexTime.Round(time.Millisecond).String() })
		row("start after a crash (changes after the last checkpoint, no clean stop): open the store and start the service", func(r *Report) string {
			return fmt.Sprintf("%v (%d changes)", r.CrashTime.Round(time.Millisecond), r.CrashChanges)
		})
		row("then the service's own indexes ready (the checkpoint and the change entries after it)", func(r *Report) string {
			return r.CrashIndexTime.Round(time.Millisecond).String()
		})
	}
	row("backup while serving (documents; writes paused while its counter is fixed)", func(r *Report) string {
		if r.Backup == nil {
			return "–"
		}
		return fmt.Sprintf("%v (%s; %v)", r.Backup.Backup.Round(time.Millisecond), thousands(int(r.Backup.Documents)), r.Backup.Paused.Round(time.Microsecond))
	})
	row("restore into an empty store, then its verify", func(r *Report) string {
		if r.Backup == nil {
			return "–"
		}
		return fmt.Sprintf("%v (verify %v)", r.Backup.Restore.Round(time.Millisecond), r.Backup.RestoreVerify.Round(time.Millisecond))
	})
	if !first.onServer() {
		row("the first start after the restore (no clean stop since): open the store and start the service, then its own indexes ready (from the checkpoint the restore wrote)", func(r *Report) string {
			if r.Backup == nil {
				return "–"
			}
			return fmt.Sprintf("%v, then %v", r.Backup.StartOpen.Round(time.Millisecond), r.Backup.StartIndex.Round(time.Millisecond))
		})
	}
	rssLabel := "RSS of the bench process at the end (service, clients, embedded store)"
	if first.onServer() {
		rssLabel = "RSS of the bench process at the end (service and its clients; the store runs apart)"
	}
	row(rssLabel, func(r *Report) string { return fmt.Sprintf("%d MB", r.ServerRSS>>20) })
	row("peak RSS while serving (the starts, the service's cells, the backup while serving; a collection before each)", func(r *Report) string { return fmt.Sprintf("%d MB", r.PeakRSS>>20) })
	row("peak RSS over the whole run (with the bulk seeding, the raw store's cells and the restore into a second store, in this process)", func(r *Report) string {
		return fmt.Sprintf("%d MB", r.RunPeakRSS>>20)
	})
	row("RSS once a collection hands freed memory back (what it holds), at the end of serving (before the restore)", func(r *Report) string { return fmt.Sprintf("%d MB", r.HeldRSS>>20) })
	row(heldMemoryLabel, func(r *Report) string { return r.Held.String() })
	row("load average (1 min), start–end", func(r *Report) string {
		return strings.Fields(r.LoadBefore + " ?")[0] + "–" + strings.Fields(r.LoadAfter + " ?")[0]
	})
	b.WriteString("\n✎ a mutation. Raw: the same reads with the driver; for a mutation, the store operations it needs at the least.\n")
	for _, r := range g.Runs {
		fmt.Fprintf(&b, "- %s notes: %s.\n", thousands(r.Config.Notes), r.Seeded)
	}
	writeChecks(&b, g.Checks())
	return b.String()
}

// The growth targets: at the largest size (100,000 notes, or a million).
const (
	readyGoal   = 10 * time.Second
	readGoal    = 100 * time.Millisecond
	searchGoal  = 250 * time.Millisecond
	growthRatio = 1.5 // get_note's and the writes' p50 against the smallest size's (the is 1,000 notes)
)

// memoryGoals are the RSS targets at a size: up to 100,000 notes 300 MB
// held (after a collection hands freed memory back) and a peak of 400 MB
// over the run; above (a large agency's million notes) 1 GB held, and
// the peak printed beside it.
func memoryGoals(notes int) (heldMB, peakMB float64) {
	if notes <= 100_000 {
		return 300, 400
	}
	return 1024, 0
}

// readGoalFor is an operation's absolute target: p50 ≤ 250 ms for
// search, ≤ 100 ms for every other read (free-text filters among them)
// and write.
func readGoalFor(name string) (time.Duration, string) {
	if g, ok := renderGoals[name]; ok {
		return g, fmt.Sprintf("p50 ≤ %d ms", g.Milliseconds())
	}
	if name == "search" {
		return searchGoal, "p50 ≤ 250 ms"
	}
	return readGoal, "p50 ≤ 100 ms"
}

// renderGoals are the renderings' targets: a year's coverage report as
// HTML ≤ 1 s, as PDF or XLSX ≤ 3 s, a chart's PNG ≤ 300 ms, a shared
// report's page (from its snapshot) ≤ 100 ms.
var renderGoals = map[string]time.Duration{
	"render_report (html, a year)": time.Second, "render_report (pdf, a year)": 3 * time.Second,
	"render_report (xlsx, a year)": 3 * time.Second, "render_report (png, a year)": 300 * time.Millisecond,
	"shared report page (GET)": 100 * time.Millisecond,
}

// isRendering reports a rendering row, held to its absolute bound alone.
func isRendering(name string) bool { _, ok := renderGoals[name]; return ok }

// Checks evaluates the growth targets on the largest size, against the
// smallest for the ratios.
func (g *Growth) Checks() []Check {
	if len(g.Runs) == 0 {
		return nil
	}
	big, small := g.Runs[0], g.Runs[0]
	for _, r := range g.Runs {
		if r.Config.Notes > big.Config.Notes {
			big = r
		}
		if r.Config.Notes < small.Config.Notes {
			small = r
		}
	}
	at := thousands(big.Config.Notes) + " notes"
	var out []Check
	heldGoal, peakGoal := memoryGoals(big.Config.Notes)
	rssWhat := "peak RSS while serving ≤ %.0f MB (MB; service and embedded store, the starts, every call, a backup)"
	if big.onServer() {
		rssWhat = "peak RSS while serving ≤ %.0f MB (MB; the service and the bench's clients, the store runs apart)"
	}
	if peakGoal > 0 {
		mb := float64(big.PeakRSS >> 20)
		out = append(out, Check{at, fmt.Sprintf(rssWhat, peakGoal), mb, peakGoal, mb <= peakGoal})
	}
	held := float64(big.HeldRSS >> 20)
	out = append(out, Check{at, fmt.Sprintf("RSS held ≤ %.0f MB (MB; after a collection hands freed memory back)", heldGoal), held, heldGoal, held <= heldGoal})
	if big.onServer() {
		out = append(out, serverStartChecks(at, big)...)
	}
	for _, st := range []struct {
		what        string
		open, index time.Duration
	}{
		{"a restart (indexes from their checkpoint)", big.RestartTime, big.RestartIndexTime},
		{fmt.Sprintf("a crash (the checkpoint written while running, then the %d change entries after it)", big.CrashChanges), big.CrashTime, big.CrashIndexTime},
		first(big),
	} {
		if big.onServer() {
			break // the server's start targets, above
		}
		ready := st.open + st.index
		out = append(out, Check{at, fmt.Sprintf("serving with its indexes ready ≤ 10 s after %s (s: open %v + indexes %v)",
			st.what, st.open.Round(time.Millisecond), st.index.Round(time.Millisecond)), ready.Seconds(), readyGoal.Seconds(), ready <= readyGoal})
	}
	if b := big.Backup; b != nil && !big.onServer() {
		ready := b.StartOpen + b.StartIndex
		out = append(out, Check{at, fmt.Sprintf("serving with its indexes ready ≤ 10 s after a restore (s: open %v + indexes %v)",
			b.StartOpen.Round(time.Millisecond), b.StartIndex.Round(time.Millisecond)), ready.Seconds(), readyGoal.Seconds(), ready <= readyGoal})
	}
	out = append(out, backupChecks(at, big.Backup)...)
	for _, row := range big.Rows {
		p50 := row.Service[1].P50
		{ // every operation, writes too: an absolute bound beside the ratios
			goal, what := readGoalFor(row.Name)
			out = append(out, Check{row.Name + " at " + at, what + " (ms)", float64(p50) / float64(time.Millisecond), float64(goal / time.Millisecond), p50 <= goal})
		}
		if (row.Write || row.Name == "get_note") && small != big {
			for _, s := range small.Rows {
				if s.Name == row.Name && s.Service[1].P50 > 0 {
					v := float64(p50) / float64(s.Service[1].P50)
					out = append(out, Check{row.Name, fmt.Sprintf("p50 at %s ≤ 1.5× at %s notes (%s ms ÷ %s ms)", at, thousands(small.Config.Notes), ms(p50), ms(s.Service[1].P50)),
						v, growthRatio, v <= growthRatio})
				}
			}
		}
	}
	return out
}

// first is the first start on the seeded store. Seeded through the write
// path, the seeding's clean stop left a current checkpoint. Seeded in bulk,
// the records and their change entries were written around the service,
// as an import would: no checkpoint describes them and the indexes are
// built from the store, once (following 100,000s of change entries one by
// one costs more than reading every collection).
func first(r *Report) (st struct {
	what        string
	open, index time.Duration
}) {
	st.what = "the first start on the seeded store (indexes from the checkpoint its seeding's clean stop wrote)"
	if r.SeedMethod == SeedBulk {
		st.what = "the first start after a bulk import written around the service (indexes built from the store, once)"
	}
	st.open, st.index = r.OpenTime, r.IndexTime
	return st
}

// thousands writes n with comma separators (100,000).
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
