package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
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
func parseMemoryLimit(s string) (int64, error) {
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
			if n*u.mult < 64<<20 {
				return 0, fmt.Errorf("memory limit %q: at least 64MiB (or off)", s)
			}
			return n * u.mult, nil
		}
	}
	return 0, fmt.Errorf("memory limit %q: want a size such as 256MiB or 1GiB (units B, KiB, MiB, GiB), or off", s)
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

// defaultGCPercent is the collector's GOGC that serve (and bench) set
// unless GOGC is set: the heap may grow by half of what is live between
// collections, not by all of it. Most of what is live at scale is the
// service's own index, built once and kept, which a collection marks
// quickly (its records are bytes in large chunks, no pointers); the heap's
// peak is what the pacer lets the garbage reach above it, so at 100,000
// notes GOGC 100 let the process peak at twice its index (docs/performance.md,
// "Memory at scale").
const defaultGCPercent = 50

// applyGCPercent sets defaultGCPercent unless GOGC is set (the runtime
// has applied it then). It returns the percentage in force.
func applyGCPercent() int {
	if os.Getenv("GOGC") != "" {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}
	debug.SetGCPercent(defaultGCPercent)
	return defaultGCPercent
}
