package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// defaultMemoryLimit is the soft limit on the Go runtime's memory that
// serve (and bench) set at start unless told otherwise: none. A limit
// makes the collector run more often as the heap nears it, instead of
// letting the heap grow to twice what is live between collections; below
// what is live it runs nearly all the time (at 100,000 notes the live heap
// is about 300 MB, and a 256 MiB limit made get_note, the log and the
// dossier 1.3-2 times slower and a restart's checkpoint read 1.5 times
// longer than no limit, side by side). Set it to what the machine or
// container gives the process, less the embedded store's page caches
// (outside the Go runtime, not counted).
const defaultMemoryLimit = "off"

// parseMemoryLimit reads a size with a unit (B, KiB, MiB, GiB), or off/0
// for none.
func parseMemoryLimit(s string) (int64, error) { return parseSize(s, 64<<20) }

// parseSize reads a size with a unit of at least least bytes, or off/0
// (math.MaxInt64).
func parseSize(s string, least int64) (int64, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "off", "0", "none":
		return math.MaxInt64, nil
	}
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
			if err != nil || n <= 0 || n > math.MaxInt64/u.mult {
				break
			}
			if n*u.mult < least {
				return 0, fmt.Errorf("%q: at least %dMiB (or off)", s, least>>20)
			}
			return n * u.mult, nil
		}
	}
	return 0, fmt.Errorf("%q: want a size such as 256MiB or 1GiB (units B, KiB, MiB, GiB), or off", s)
}

// applyMemoryLimit sets the soft memory limit: setting (the flag or
// OUTREACH_MEMORY_LIMIT) when given, else GOMEMLIMIT's when that is set
// (the runtime has applied it), else defaultMemoryLimit. It returns the
// limit in force (math.MaxInt64: none).
func applyMemoryLimit(setting string) (int64, error) {
	if setting == "" {
		if os.Getenv("GOMEMLIMIT") != "" {
			return debug.SetMemoryLimit(-1), nil
		}
		setting = defaultMemoryLimit
	}
	n, err := parseMemoryLimit(setting)
	if err != nil {
		return 0, err
	}
	debug.SetMemoryLimit(n)
	return n, nil
}

// The collector's pace, when OUTREACH_GC_HEADROOM asks for it (and GOGC
// is not set): the heap may grow by that headroom above what the last
// collection found live before the next one runs (GOGC 100, twice what is
// live, while that is less), instead of by all of what is live. At scale
// most of what is live is the service's own index, built once and kept;
// under GOGC 100 the process peaks near twice it (about 530 MB at 100,000
// notes against 320-430 held). Paced with 48 MiB the calls' peaks there
// were 355-425 MB, but a collection then runs every 48 MiB allocated, each
// marking the whole index, and the one run with it showed allocation-heavy
// reads slower than the run before (at a higher load: not measured side by
// side), so it is off by default (docs/performance.md, "Memory at scale").
// The percentage follows the live heap (paceGC), never below minGCPercent,
// so a larger index gets proportionally more room and the collector never
// runs back to back.
const minGCPercent = 10

// gcPercentFor is the GOGC that lets a heap of live bytes grow by
// headroom: with 48 MiB, 100 up to 48 MiB live, 19 at 250 MiB,
// minGCPercent from 480 MiB.
func gcPercentFor(live, headroom uint64) int {
	if live == 0 {
		return 100
	}
	return int(min(100, max(minGCPercent, 100*headroom/live)))
}

// applyGCPace paces the collector (paceGC, until ctx ends) with the
// headroom setting gives (a size of at least 16MiB, as --memory-limit
// reads one; empty or off: none), unless GOGC is set. It reports whether it paces.
func applyGCPace(ctx context.Context, setting string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(setting)) {
	case "", "off", "0", "none":
		return false, nil
	}
	headroom, err := parseSize(setting, 16<<20)
	if err != nil {
		return false, err
	}
	if os.Getenv("GOGC") != "" {
		return false, nil
	}
	go paceGC(ctx, time.Second, uint64(headroom), func(p int) { debug.SetGCPercent(p) })
	return true, nil
}

// paceGC sets (through set) the GOGC gcPercentFor gives for the live heap
// the last collection found, every interval, when it changes.
func paceGC(ctx context.Context, every time.Duration, headroom uint64, set func(int)) {
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	last := -1
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		metrics.Read(live)
		if live[0].Value.Kind() == metrics.KindUint64 {
			if p := gcPercentFor(live[0].Value.Uint64(), headroom); p != last {
				set(p)
				last = p
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
