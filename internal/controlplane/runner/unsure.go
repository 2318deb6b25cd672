package runner

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/tick"
)

// runSet is a set of run ids, safe for concurrent use. The Runner keeps
// two: the runs whose last commit failed with store.ErrUnavailable (the
// write may have landed with its answer lost: a commit's effects run only
// once the commit is known, so such a run's new steps would wait for a
// restart's Recover; Resettle offers them on the live plane instead), and
// the runs whose in-flight leases belong to another live replica (Takeover
// looks at them again).
type runSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (u *runSet) add(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ids == nil {
		u.ids = map[string]bool{}
	}
	u.ids[id] = true
}

// take empties the set and returns what it held, sorted.
func (u *runSet) take() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for id := range u.ids {
		out = append(out, id)
	}
	u.ids = nil
	slices.Sort(out)
	return out
}

// Resettle offers again the queued steps of every run whose commit had
// an unknown outcome, once the store answers again (a run it still cannot
// read stays for the next call). Offering is idempotent: the dispatcher
// ignores a step it already holds or has waiting. The lease-expiry pass
// calls it.
func (r *Runner) Resettle(ctx context.Context) {
	for _, id := range r.unsure.take() {
		run, m, err := r.Get(ctx, id)
		if err != nil {
			if errors.Is(err, store.ErrUnavailable) {
				r.unsure.add(id)
			}
			continue
		}
		if run.State.Terminal() {
			continue
		}
		// The commit may have claimed its steps for this replica with no
		// offer made: give them back, and whoever serves them (this
		// replica too) claims them again.
		if err := r.releaseQueued(ctx, m, run); err != nil {
			r.unsure.add(id)
		}
	}
}

// Resettling runs Resettle every interval until ctx ends. The owner of the
// Runner's goroutines runs it; without it, a run whose commit had an
// unknown outcome moves on at the next restart's Recover.
func (r *Runner) Resettling(ctx context.Context, every time.Duration) error {
	return tick.Every(ctx, every, r.Resettle)
}
