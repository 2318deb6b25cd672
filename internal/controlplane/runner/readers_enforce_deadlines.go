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

// GetRuns is Get for the runs of a page, with Get's guarantees for each:
// runs[i] is ids[i]'s run (an id may repeat: one read, the same run), read
// after the call began, with any deadline that has passed by the store's
// clock applied (I4). It reads them in one round trip (readRuns), then,
// if any holds an open ask, the store's clock once, after them all; each
// run with a due ask is moved as Get moves it, one after another. It
// fails as Get would for the first run in ids' order that cannot be read
// or moved (ErrNotFound for one the store does not hold); the runs read
// before a failure may have been moved.
func (r *Runner) GetRuns(ctx context.Context, ids []string) ([]*engine.Run, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	at := make(map[string]int, len(ids)) // id → its place in distinct
	distinct := make([]string, 0, len(ids))
	for _, id := range ids {
		if _, ok := at[id]; !ok {
			at[id] = len(distinct)
			distinct = append(distinct, id)
		}
	}
	runs, err := r.readRuns(ctx, distinct)
	if err != nil {
		return nil, err
	}
	var now time.Time
	for i, run := range runs {
		if !OpenAsk(run) {
			continue // no clock to enforce
		}
		if now.IsZero() {
			if now, err = r.now(ctx); err != nil {
				return nil, err
			}
		}
		if dueAsk(run, now) {
			// Never show an ask past its deadline as open.
			tr, err := r.apply(ctx, distinct[i], func(now time.Time) engine.Event { return engine.Tick{At: now} })
			if err != nil {
				return nil, err
			}
			runs[i] = tr.Run
		}
	}
	out := make([]*engine.Run, len(ids))
	for i, id := range ids {
		out[i] = runs[at[id]]
	}
	return out, nil
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
