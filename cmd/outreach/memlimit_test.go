package main

import (
	"context"
	"math"
	"runtime"
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

// The collector's pace, when asked for: GOGC 100 while the live heap is
// small, then a fixed headroom above it (a lower percentage as the index
// grows), never below the floor; off by default, and with GOGC set the
// runtime's setting stays and nothing paces.
func TestGCPace(t *testing.T) {
	const mib = 1 << 20
	for live, want := range map[uint64]int{0: 100, 10 * mib: 100, 48 * mib: 100, 96 * mib: 50, 250 * mib: 19, 480 * mib: 10, 4096 * mib: 10} {
		if got := gcPercentFor(live, 48*mib); got != want {
			t.Errorf("%d MiB live: GOGC %d, want %d", live/mib, got, want)
		}
	}
	t.Setenv("GOGC", "")
	for _, off := range []string{"", "off"} {
		if paced, err := applyGCPace(context.Background(), off); paced || err != nil {
			t.Errorf("headroom %q: paced %v, %v; want off", off, paced, err)
		}
	}
	if _, err := applyGCPace(context.Background(), "48"); err == nil {
		t.Error("a headroom without a unit was accepted")
	}
	t.Setenv("GOGC", "80")
	if paced, _ := applyGCPace(context.Background(), "64MiB"); paced {
		t.Error("with GOGC set, the service paces the collector")
	}
	// Paced, the percentage follows the live heap, as the last
	// collection found it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hold := make([]byte, 64<<20) // live: the pace moves below 100
	runtime.GC()
	set := make(chan int, 1)
	go paceGC(ctx, time.Hour, 48*mib, func(p int) { set <- p })
	got := <-set
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	if want := gcPercentFor(live[0].Value.Uint64(), 48*mib); got != want || got >= 100 {
		t.Errorf("paced at %d with %d MiB live, want %d (below 100)", got, live[0].Value.Uint64()/mib, want)
	}
	runtime.KeepAlive(hold)
}
