package runner

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// effects acts on a committed transition: dispatch runnable steps (a step
// nobody can take makes the run blocked) and cancel abandoned attempts.
func (r *Runner) effects(ctx context.Context, runID string, tr engine.Transition) {
	var refused []engine.StepAttempt
	for _, e := range tr.Effects {
		switch e := e.(type) {
		case engine.AskOpened:
			if r.asks != nil {
				// Counted as settling before the commit (opening):
				// released below, once every hook ran.
				r.asks.Opened(ctx, r, tr.Run, e.Ask)
			}
		case engine.AskNotice:
			if r.asks != nil {
				r.asks.Noticed(ctx, r, tr.Run, e.Ask, e.Kind)
			}
		case engine.AskClosed:
			if r.asks != nil {
				r.asks.Closed(ctx, r, tr.Run, e.Ask, e.State)
			}
		case engine.Dispatch:
			if r.handoff.take(WorkID(runID, e.Step, e.Attempt)) {
				if r.dispatch.Offer(ctx, r, runID, e) {
					continue
				}
				// Claimed in its commit, but the executors here went away
				// meanwhile: back to the store.
				r.Release(ctx, runID, e)
			}
			if r.unserved(QueueOf(e.Target())) {
				refused = append(refused, engine.StepAttempt{Step: e.Step, Attempt: e.Attempt})
			}
		case engine.CancelStep:
			r.dispatch.Cancel(ctx, runID, e)
		case engine.RunEnded:
			r.log.LogAttrs(ctx, slog.LevelInfo, "run ended", slog.String("run", runID), slog.String("state", string(e.State)), slog.String("reason", e.Reason))
		}
	}
	if n := r.opening(tr); n > 0 {
		r.settling.add(runID, -n)
	}
	if tr.Run != nil {
		// Watchers are woken once the ask hooks ran (settling.go): a
		// standing approval decides an ask in the commit after the one
		// that opened it, and a watcher woken by that first commit would
		// read the run parked on an ask nobody is to answer (issue 16).
		r.notify(tr.Run)
	}
	if len(refused) > 0 {
		// Every refusal of this round in one transition: a fan of N steps
		// nobody offers costs one commit, not N commits of the whole run.
		_, err := r.apply(ctx, runID, func(now time.Time) engine.Event {
			return engine.StepsBlocked{Steps: refused, At: now}
		})
		if err != nil && !errors.Is(err, engine.ErrWrongTransition) && !errors.Is(err, engine.ErrStaleAttempt) {
			r.log.LogAttrs(ctx, slog.LevelWarn, "could not mark steps blocked", slog.String("run", runID), slog.Int("steps", len(refused)), slog.String("first", refused[0].Step), slog.String("error", err.Error()))
		}
	}
	for _, rec := range tr.Records {
		if rec.Kind == engine.JournalAskExpired {
			r.expiries.Add(1)
			r.log.LogAttrs(ctx, slog.LevelInfo, "ask expired", slog.String("run", runID), slog.Any("ask", rec.Payload["ask"]), slog.Any("idle_ms", rec.Payload["idle_ms"]))
		}
	}
}
