package runner

import (
	"sync/atomic"

	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// RunWatch follows the commits this replica makes to one run.
type RunWatch struct {
	ch     chan struct{}
	latest atomic.Pointer[engine.Run]
	stop   func()
}

// C receives a signal (coalesced) after each commit this replica makes to
// the run, and on a hint of another replica's commit (Hinted): then
// Latest is not newer, and the watcher reads the store. Hints may be
// lost; watchers poll too.
func (w *RunWatch) C() <-chan struct{} { return w.ch }

// Latest is the newest run this replica has committed since the watch
// began (nil if none): it is durable, and immutable.
func (w *RunWatch) Latest() *engine.Run { return w.latest.Load() }

// Stop ends the watch.
func (w *RunWatch) Stop() { w.stop() }

// poke wakes the watcher with no run in hand: it reads the store.
func (w *RunWatch) poke() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

func (w *RunWatch) offer(run *engine.Run) {
	for {
		cur := w.latest.Load()
		if cur != nil && cur.Version >= run.Version {
			break
		}
		if w.latest.CompareAndSwap(cur, run) {
			break
		}
	}
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// Watch returns a channel that receives a signal (coalesced) after each
// commit this replica makes to the run, and a func to stop watching.
// Other replicas' commits are seen by polling; watchers must poll too.
func (r *Runner) Watch(runID string) (<-chan struct{}, func()) {
	w := r.Follow(runID)
	return w.C(), w.Stop
}

// Follow is Watch that also hands over the runs committed.
func (r *Runner) Follow(runID string) *RunWatch {
	w := &RunWatch{ch: make(chan struct{}, 1)}
	r.mu.Lock()
	if r.watchers[runID] == nil {
		r.watchers[runID] = map[*RunWatch]bool{}
	}
	r.watchers[runID][w] = true
	r.mu.Unlock()
	w.stop = func() {
		r.mu.Lock()
		delete(r.watchers[runID], w)
		if len(r.watchers[runID]) == 0 {
			delete(r.watchers, runID)
		}
		r.mu.Unlock()
	}
	return w
}

// Hinted hears that another replica committed a run (a store hint): the
// run's watchers, and those of every run, are woken to read it (they
// poll too: a lost hint costs latency). It never blocks.
func (r *Runner) Hinted(runID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// What this replica keeps of the run is older now.
	r.cache.Remove(runID)
	for _, id := range []string{runID, AnyRun} {
		for w := range r.watchers[id] {
			w.poke()
		}
	}
}

// notify hands a committed run to the run's watchers.
func (r *Runner) notify(run *engine.Run) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range []string{run.ID, AnyRun} {
		for w := range r.watchers[id] {
			w.offer(run)
		}
	}
}

// AnyRun, passed to Watch, watches every run this replica commits.
const AnyRun = ""
