package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// Recover offers again what a previous process left in flight: queued
// steps are offered to the dispatcher, and attempts leased to executors of
// a process that is gone are reported lost (the engine re-leases them, or
// asks when a side effect had started). Call it once at start-up, before
// serving.
func (r *Runner) Recover(ctx context.Context) error {
	tok := ""
	for {
		// A parked run has nothing queued or in flight (the engine parks a
		// run only then), so a million parked runs cost start-up nothing.
		rows, next, err := r.store.ListRuns(ctx, store.RunQuery{States: []string{string(engine.Running), string(engine.Blocked)}, Limit: 500, PageToken: tok})
		if err != nil {
			return fmt.Errorf("recover: %w", err)
		}
		for _, row := range rows {
			if err := r.recoverRun(ctx, row.ID); err != nil {
				r.log.LogAttrs(ctx, slog.LevelWarn, "could not recover run", slog.String("run", row.ID), slog.String("error", err.Error()))
			}
		}
		if next == "" {
			return nil
		}
		tok = next
	}
}

func (r *Runner) recoverRun(ctx context.Context, id string) error {
	run, m, err := r.Get(ctx, id)
	if err != nil {
		return err
	}
	for _, sid := range slices.Sorted(maps.Keys(run.Steps)) {
		s := run.Steps[sid]
		if !s.Status.InFlight() {
			continue
		}
		attempt := s.Attempt
		if _, err := r.apply(ctx, id, func(now time.Time) engine.Event {
			return engine.LeaseLost{Step: sid, Attempt: attempt, At: now}
		}); err != nil && !errors.Is(err, engine.ErrStaleAttempt) && !errors.Is(err, engine.ErrWrongTransition) {
			return err
		}
	}
	run, m, err = r.Get(ctx, id)
	if err != nil {
		return err
	}
	r.effects(ctx, id, engine.Transition{Run: run, Effects: dispatchEffects(m.Queued(run))})
	return nil
}
