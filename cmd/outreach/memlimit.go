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
// serve (and bench) set at start unless told otherwise: the collector runs
// more often as the heap nears it, instead of letting the heap grow to
// twice what is live between collections. It is soft: a process whose live
// memory exceeds it keeps running (the collector then takes at most about
// half the CPU). Memory outside the Go runtime (the embedded store's SQLite
// page caches) is not counted.
const defaultMemoryLimit = "256MiB"

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
