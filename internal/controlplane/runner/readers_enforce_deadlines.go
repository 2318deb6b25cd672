package runner

import (
	"context"
	"log/slog"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/tick"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// Get reads a run, applying any deadline that has passed (I4: readers
// enforce the clock, whether or not a background pass ran).
func (r *Runner) Get(ctx context.Context, id string) (*engine.Run, *engine.Machine, error) {
	run, m, err := r.read(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if !OpenAsk(run) {
		return run, m, nil // no clock to enforce
	}
	now, err := r.now(ctx)
	if err != nil {
		return nil, nil, err
	}
	if dueAsk(run, now) {
		// Never show an ask past its deadline as open: apply the expiry
		// (or fail the read).
		tr, err := r.apply(ctx, id, func(now time.Time) engine.Event { return engine.Tick{At: now} })
		if err != nil {
			return nil, nil, err
		}
		return tr.Run, m, nil
	}
	return run, m, nil
}

// OpenAsk reports whether a run holds an ask that still waits, whose
// deadline readers must enforce.
func OpenAsk(run *engine.Run) bool {
	for _, a := range run.Asks {
		if a.State.Open() {
			return true
		}
	}
	return false
}

func dueAsk(run *engine.Run, now time.Time) bool {
	for _, a := range run.Asks {
		if a.State.Open() && !now.Before(a.DueAt()) {
			return true
		}
	}
	return false
}

// Expiries counts asks this replica saw expire.
func (r *Runner) Expiries() int64 { return r.expiries.Load() }

// Sweep is the deadline pass: every interval it reads the asks that are
// due (a reminder, an escalation or a deadline) and applies them, so
// notices go out and on expiry happens even when nobody reads the run.
// Correctness never waits on it: readers apply the same rungs (I4). It
// blocks until ctx ends.
func (r *Runner) Sweep(ctx context.Context, every time.Duration) error {
	return tick.Every(ctx, every, r.sweep)
}

// sweep is one deadline pass.
func (r *Runner) sweep(ctx context.Context) {
	now, err := r.now(ctx)
	if err != nil {
		return
	}
	rows, _, err := r.store.ListAsks(ctx, store.AskQuery{States: []string{string(engine.AskPending), string(engine.AskEvidenceRequested)}, DueBefore: now.Add(time.Millisecond), Limit: 500})
	if err != nil {
		r.log.LogAttrs(ctx, slog.LevelWarn, "deadline pass could not list asks", slog.String("error", err.Error()))
		return
	}
	for _, row := range rows {
		if _, _, err := r.Get(ctx, row.RunID); err != nil && ctx.Err() == nil {
			r.log.LogAttrs(ctx, slog.LevelWarn, "deadline pass could not apply a deadline", slog.String("ask", row.ID), slog.String("error", err.Error()))
		}
	}
}
