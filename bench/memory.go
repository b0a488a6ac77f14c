package bench

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
)

// HeldMemory is what the RSS held is made of, read just after a collection
// has handed freed memory back: the live objects of Go's heap (the
// service's index most of it), the rest of what the Go runtime holds (heap
// spans it keeps, goroutine stacks, the collector's own metadata), the
// anonymous memory outside the Go runtime (the embedded store's SQLite
// page caches and the allocations of its C library, which the runtime does
// not count), and the binary's pages (file-backed, shared with the page
// cache). The split is an estimate: the runtime's figure is what it has
// mapped and not released, which may hold a few pages never touched.
type HeldMemory struct {
	HeapLive, GoRest, OutsideGo, File int64
}

// heldMemory reads this process's split (zero where a figure is unknown).
func heldMemory() HeldMemory {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	metrics.Read(samples)
	val := func(i int) int64 {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(samples[i].Value.Uint64())
	}
	var h HeldMemory
	h.HeapLive = val(0)
	goHeld := val(1) - val(2)
	h.GoRest = goHeld - h.HeapLive
	anon, file := statusBytes("RssAnon:"), statusBytes("RssFile:")
	if anon > goHeld {
		h.OutsideGo = anon - goHeld
	}
	h.File = file
	return h
}

// statusBytes is a figure of /proc/self/status given in kB, in bytes.
func statusBytes(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			if f := strings.Fields(v); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// String is the split in MB, as the tables print it.
func (h HeldMemory) String() string {
	return fmt.Sprintf("%d / %d / %d / %d MB", h.HeapLive>>20, h.GoRest>>20, h.OutsideGo>>20, h.File>>20)
}

// heldMemoryLabel names the split's row.
const heldMemoryLabel = "of what it holds: Go's live heap / the Go runtime's rest (spans kept, stacks, the collector's metadata) / " +
	"outside Go (the embedded store's SQLite) / the binary's pages"

// peaks follows the process's peak RSS (VmHWM) phase by phase: each phase
// begins with a collection that hands freed memory back and the kernel's
// count started again, and ends by reading it. Serving phases are what a
// service process does in production (its starts, its calls, a backup
// while it serves); the others are the bench's own work in the same
// process (seeding in bulk, the raw store's cells, which make the embedded
// store decode whole collections, and the restore into a second store with
// indexes of its own).
type peaks struct {
	serving, run int64
	progress     io.Writer // each phase's peak, for finding what made it
}

func (p *peaks) begin() {
	debug.FreeOSMemory()
	resetPeak()
}

func (p *peaks) end(phase string, serving bool) {
	v := statusBytes("VmHWM:")
	if p.progress != nil {
		fmt.Fprintf(p.progress, "peak RSS of %s: %d MB\n", phase, v>>20)
	}
	p.run = max(p.run, v)
	if serving {
		p.serving = max(p.serving, v)
	}
}

// resetPeak starts the kernel's count of this process's peak RSS (VmHWM)
// again, so that each run (each size of a growth run) measures its own;
// where it cannot, the peak is the process's since it started, which is
// never less than the run's.
func resetPeak() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// runtimeClasses names the parts of the Go runtime's rest, for the
// progress line (in MB): the free space inside the heap's spans, the
// collector's and the allocator's metadata, the goroutines' stacks.
func runtimeClasses() string {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/metadata/other:bytes"},
		{Name: "/memory/classes/metadata/mspan/inuse:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
		{Name: "/memory/classes/other:bytes"},
	}
	metrics.Read(samples)
	var b strings.Builder
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			fmt.Fprintf(&b, "%s %d MB; ", strings.TrimSuffix(strings.TrimPrefix(s.Name, "/memory/classes/"), ":bytes"), s.Value.Uint64()>>20)
		}
	}
	return strings.TrimSuffix(b.String(), "; ")
}
