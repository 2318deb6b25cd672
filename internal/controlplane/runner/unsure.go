package runner

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// unsureRuns are the runs whose last commit failed with
// store.ErrUnavailable: the write may have landed with its answer lost.
// A commit's effects (offering the steps it made runnable) run only once
// the commit is known, so such a run's new steps would wait for a
// restart's Recover; Resettle offers them on the live plane instead.
type unsureRuns struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (u *unsureRuns) add(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ids == nil {
		u.ids = map[string]bool{}
	}
	u.ids[id] = true
}

// take empties the set and returns what it held, sorted.
func (u *unsureRuns) take() []string {
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
		r.effects(ctx, id, engine.Transition{Run: run, Effects: dispatchEffects(m.Queued(run))})
	}
}

// Resettling runs Resettle every interval until ctx ends. The owner of the
// Runner's goroutines runs it; without it, a run whose commit had an
// unknown outcome moves on at the next restart's Recover.
func (r *Runner) Resettling(ctx context.Context, every time.Duration) error {
	return repeat(ctx, every, r.Resettle)
}
