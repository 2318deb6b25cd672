package peerkit

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Progress writes timestamped progress lines, "NAME   12.3s: …", the time
// counted from NewProgress; safe for concurrent use. A nil Progress, or
// one without a writer, writes nothing.
type Progress struct {
	name  string
	mu    sync.Mutex
	w     io.Writer
	began time.Time
}

// NewProgress writes to w, each line led by name (the harness's).
func NewProgress(w io.Writer, name string) *Progress {
	return &Progress{name: name, w: w, began: time.Now()}
}

// Printf writes one line; format has no trailing newline.
func (p *Progress) Printf(format string, args ...any) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%s %6.1fs: "+format+"\n", append([]any{p.name, time.Since(p.began).Seconds()}, args...)...)
}

// Ticker is called with i = 1…n as the iterations of workload key end; it
// reports "KEY: i/n" every tenth of n (and at least every 25), and at n.
func (p *Progress) Ticker(key string, n int) func(i int) {
	step := max(1, min(25, n/10))
	return func(i int) {
		if i%step == 0 || i == n {
			p.Printf("%s: %d/%d", key, i, n)
		}
	}
}

// tallyLines is how many lines a Tally keeps.
const tallyLines = 5

// Tally counts the warnings and errors the measured system logs during
// one workload and keeps the first few lines (each also printed as
// progress, "KEY: SOURCE: line"), so a slow outlier in the figures can be
// explained. Safe for concurrent use.
type Tally struct {
	key, source string
	p           *Progress
	mu          sync.Mutex
	warnings    int
	errors      int
	first       []string
}

// NewTally tallies workload key's lines from source ("river", "sdk").
func NewTally(p *Progress, key, source string) *Tally {
	return &Tally{key: key, source: source, p: p}
}

// Add counts line, an error if isErr and a warning otherwise.
func (t *Tally) Add(isErr bool, line string) {
	t.mu.Lock()
	if isErr {
		t.errors++
	} else {
		t.warnings++
	}
	keep := len(t.first) < tallyLines
	if keep {
		t.first = append(t.first, line)
	}
	t.mu.Unlock()
	if keep {
		t.p.Printf("%s: %s: %s", t.key, t.source, line)
	}
}

// Counts are the warnings and errors so far and a copy of the lines kept.
func (t *Tally) Counts() (warnings, errors int, first []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.warnings, t.errors, append([]string(nil), t.first...)
}
