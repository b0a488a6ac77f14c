package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress reports long command-line work: a bar on a terminal, plain lines
// (one per phase) otherwise, so logs and pipes stay readable.
type progress struct {
	w        io.Writer
	what     string
	total, n int
	bar      *progressbar.ProgressBar
	seen     map[string]bool
}

// newProgress starts reporting what; total is the number of steps, or -1
// when unknown (a spinner on a terminal).
func newProgress(w io.Writer, what string, total int) *progress {
	p := &progress{w: w, what: what, total: total, seen: map[string]bool{}}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
			progressbar.OptionShowCount(), progressbar.OptionSetElapsedTime(true), progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }), progressbar.OptionClearOnFinish())
		return p
	}
	if total < 0 {
		fmt.Fprintf(w, "%s…\n", what)
	}
	return p
}

// step records one step of phase.
func (p *progress) step(phase string) {
	p.n++
	if p.bar != nil {
		p.bar.Describe(p.what + ": " + phase)
		p.bar.Add(1)
		return
	}
	if !p.seen[phase] { // a line when a phase begins
		p.seen[phase] = true
		fmt.Fprintf(p.w, "%s: %s (%d/%d)\n", p.what, phase, p.n, p.total)
	}
}

// finish ends the report.
func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
		return
	}
	if p.total >= 0 {
		fmt.Fprintf(p.w, "%s: done (%d steps)\n", p.what, p.n)
	}
}
