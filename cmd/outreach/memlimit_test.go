package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// A memory limit is a size with a unit, or off; anything else, or a size
// too small to run in, is refused with what is allowed.
func TestParseMemoryLimit(t *testing.T) {
	for in, want := range map[string]int64{"256MiB": 256 << 20, "1GiB": 1 << 30, " 512 MiB ": 512 << 20, "off": math.MaxInt64, "0": math.MaxInt64, "70000KiB": 70000 << 10} {
		got, err := parseMemoryLimit(in)
		if err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "256", "256MB", "-1GiB", "1MiB", "lots", "9999999999GiB"} {
		if got, err := parseMemoryLimit(in); err == nil {
			t.Errorf("%q: accepted as %d", in, got)
		}
	}
}

// Without GOGC the service sets its own percentage; with GOGC the
// runtime's (what GOGC said at start) stays.
func TestGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	if got := applyGCPercent(); got != defaultGCPercent || debug.SetGCPercent(defaultGCPercent) != defaultGCPercent {
		t.Errorf("without GOGC: %d in force, want %d", got, defaultGCPercent)
	}
	debug.SetGCPercent(80) // as GOGC=80 at start would
	t.Setenv("GOGC", "80")
	if got := applyGCPercent(); got != 80 || debug.SetGCPercent(80) != 80 {
		t.Errorf("with GOGC=80: %d in force", got)
	}
}
