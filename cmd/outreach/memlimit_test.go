package main

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
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

// The collector's pace: GOGC 100 while the live heap is small, then a
// fixed headroom above it (a lower percentage as the index grows), never
// below the floor; with GOGC set, the runtime's setting stays and nothing
// paces.
func TestGCPace(t *testing.T) {
	for live, want := range map[uint64]int{0: 100, 10 << 20: 100, 48 << 20: 100, 96 << 20: 50, 250 << 20: 19, 480 << 20: 10, 4 << 30: 10} {
		if got := gcPercentFor(live); got != want {
			t.Errorf("%d MiB live: GOGC %d, want %d", live>>20, got, want)
		}
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "80")
	debug.SetGCPercent(80) // as GOGC=80 at start would
	if applyGCPercent(context.Background()) {
		t.Error("with GOGC set, the service paces the collector")
	}
	if p := debug.SetGCPercent(80); p != 80 {
		t.Errorf("with GOGC=80: %d in force", p)
	}
	// Paced, the percentage follows the live heap, as the last
	// collection found it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hold := make([]byte, 64<<20) // live: the pace moves below 100
	runtime.GC()
	set := make(chan int, 1)
	go paceGC(ctx, time.Hour, func(p int) { set <- p })
	got := <-set
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	if want := gcPercentFor(live[0].Value.Uint64()); got != want || got >= 100 {
		t.Errorf("paced at %d with %d MiB live, want %d (below 100)", got, live[0].Value.Uint64()>>20, want)
	}
	runtime.KeepAlive(hold)
}
