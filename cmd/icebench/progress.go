package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// progress draws a one-line progress bar on stderr for long points (a line per finished point when stderr is
// not a terminal).
type progress struct {
	on    bool
	tty   bool
	mu    sync.Mutex
	label string
	total int64
	start time.Time
	last  time.Time
}

func newProgress(on bool) *progress {
	tty := false
	if fi, err := os.Stderr.Stat(); err == nil {
		tty = fi.Mode()&os.ModeCharDevice != 0
	}
	return &progress{on: on, tty: tty}
}

// begin starts a point of total units.
func (p *progress) begin(label string, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label, p.total, p.start, p.last = label, total, time.Now(), time.Time{}
	if p.on && p.tty {
		p.drawLocked(0)
	}
}

// set reports done units (throttled to a few redraws per second).
func (p *progress) set(done int64) {
	if !p.on || !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) < 200*time.Millisecond && done < p.total {
		return
	}
	p.drawLocked(done)
}

func (p *progress) drawLocked(done int64) {
	p.last = time.Now()
	const width = 30
	frac := 0.0
	if p.total > 0 {
		frac = min(1, float64(done)/float64(p.total))
	}
	n := int(frac * width)
	fmt.Fprintf(os.Stderr, "\r\033[K[%s%s] %3.0f%% %s %s", strings.Repeat("#", n), strings.Repeat(".", width-n),
		frac*100, p.label, time.Since(p.start).Round(100*time.Millisecond))
}

// end finishes the point with a summary.
func (p *progress) end(summary string) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprint(os.Stderr, "\r\033[K")
	}
	fmt.Fprintf(os.Stderr, "%s: %s (%s)\n", p.label, summary, time.Since(p.start).Round(time.Millisecond))
}
