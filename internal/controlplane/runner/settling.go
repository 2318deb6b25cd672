package runner

import (
	"sync"

	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// Routing an ask takes a commit of its own: the commit that opens it is
// followed by the ask hook (AskHook.Opened), which may decide it at once
// by a standing approval, or escalate it. Until that hook has run, the run
// parked on the ask is not yet waiting for a person, and a watcher that
// reported it so would tell someone to answer an ask that is about to be
// decided (issue 16). settling counts, by run, the ask hooks of this
// replica's commits not yet run: a commit that opens asks is counted
// before it is written (opening), so a watcher that polls the store
// between the commit and its hook sees the run settling too, and the
// count is released once the hooks ran (effects) or the commit failed.
// Settling reports it. (A watcher on another replica polls, and may
// still see the moment between the two commits.)
type settling struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *settling) add(runID string, d int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	if s.n[runID] += d; s.n[runID] <= 0 {
		delete(s.n, runID)
	}
}

// Settling reports whether an ask hook of run runID runs on this replica
// now: a parked run is then not yet known to wait for a person. Once the
// hook returns, the run's watchers are woken.
func (r *Runner) Settling(runID string) bool {
	r.settling.mu.Lock()
	defer r.settling.mu.Unlock()
	return r.settling.n[runID] > 0
}

// opening is how many ask hooks committing tr will run (its AskOpened
// effects, with an ask hook): what the committer adds to settling before
// the commit and effects releases after the hooks.
func (r *Runner) opening(tr engine.Transition) int {
	if r.asks == nil {
		return 0
	}
	n := 0
	for _, e := range tr.Effects {
		if _, ok := e.(engine.AskOpened); ok {
			n++
		}
	}
	return n
}
