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
	"github.com/tollgate-dev/tollgate/internal/tick"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// Recover offers again what a previous process left in flight: queued
// steps are offered to the dispatcher, and attempts leased by a replica
// that is gone are reported lost (the engine re-leases them, or asks when
// a side effect had started). Leases belong to live replicas: an attempt
// whose replica still renews its heartbeat is left to it, and Takeover
// looks at it again. Call Recover once at start-up, before serving.
func (r *Runner) Recover(ctx context.Context) error {
	if err := r.ReleaseClaims(ctx, true); err != nil {
		// The takeover pass tries again.
		r.log.LogAttrs(ctx, slog.LevelWarn, "could not release the claims of replicas gone", slog.String("error", err.Error()))
	}
	tok := ""
	for {
		// A parked run has nothing queued or in flight (the engine parks a
		// run only then), so a million parked runs cost start-up nothing.
		rows, next, err := r.store.ListRuns(ctx, store.RunQuery{States: []string{string(engine.Running), string(engine.Blocked)}, Limit: 500, PageToken: tok})
		if err != nil {
			return fmt.Errorf("recover: %w", err)
		}
		for _, row := range rows {
			r.recoverOrAwait(ctx, row.ID)
		}
		if next == "" {
			return nil
		}
		tok = next
	}
}

// Takeover recovers the runs Recover left to other live replicas, once
// their replica's heartbeat has lapsed (a replica that died); a run whose
// replica still lives waits for the next pass.
func (r *Runner) Takeover(ctx context.Context) {
	if err := r.ReleaseClaims(ctx, false); err != nil && ctx.Err() == nil {
		r.log.LogAttrs(ctx, slog.LevelWarn, "could not release the claims of replicas gone", slog.String("error", err.Error()))
	}
	for _, id := range r.awaiting.take() {
		r.recoverOrAwait(ctx, id)
	}
}

// TakingOver runs Takeover every interval until ctx ends.
func (r *Runner) TakingOver(ctx context.Context, every time.Duration) error {
	return tick.Every(ctx, every, r.Takeover)
}

func (r *Runner) recoverOrAwait(ctx context.Context, id string) {
	awaiting, err := r.recoverRun(ctx, id)
	if err != nil {
		r.log.LogAttrs(ctx, slog.LevelWarn, "could not recover run", slog.String("run", id), slog.String("error", err.Error()))
	}
	if awaiting || errors.Is(err, store.ErrUnavailable) {
		r.awaiting.add(id)
	}
}

// recoverRun reports lost every in-flight attempt of run id whose replica
// is gone, and offers its queued steps; awaiting says some attempt belongs
// to a replica that is still alive.
func (r *Runner) recoverRun(ctx context.Context, id string) (awaiting bool, err error) {
	run, m, err := r.Get(ctx, id)
	if err != nil {
		return false, err
	}
	if run.State.Terminal() {
		return false, nil
	}
	// A run from before work queues existed holds steps no entry names:
	// give each its entry (queued ones wait for any replica that serves
	// them; in-flight ones belong to their lease's replica). A no-op for
	// every run since.
	var ws []store.Work
	for sid, s := range run.Steps {
		if w, ok := r.entry(m, run, sid, s); ok {
			ws = append(ws, w)
		}
	}
	if len(ws) > 0 {
		if n, err := r.store.EnsureWork(ctx, ws); err != nil {
			return false, err
		} else if n > 0 {
			r.log.LogAttrs(ctx, slog.LevelInfo, "gave steps of an older run their work entries", slog.String("run", id), slog.Int("entries", n))
		}
	}
	for _, sid := range slices.Sorted(maps.Keys(run.Steps)) {
		s := run.Steps[sid]
		if !s.Status.InFlight() {
			continue
		}
		alive, err := r.ownerAlive(ctx, s)
		if err != nil {
			return false, err
		}
		if alive {
			awaiting = true
			continue
		}
		attempt, owner := s.Attempt, ownerOf(s)
		if _, err := r.apply(ctx, id, func(now time.Time) engine.Event {
			// Lost only if still held by the replica judged gone: a lease
			// its executor re-attached elsewhere meanwhile is not.
			return engine.LeaseLost{Step: sid, Attempt: attempt, Replica: owner, At: now}
		}); err != nil && !errors.Is(err, engine.ErrStaleAttempt) && !errors.Is(err, engine.ErrWrongTransition) {
			return awaiting, err
		}
	}
	// Queued steps wait in the store; the claims of replicas gone were
	// released (ReleaseClaims), and whoever serves them claims them.
	return awaiting, nil
}

// leaseOf is the lease id of step s's current attempt.
func leaseOf(s *engine.StepRun) string {
	for _, a := range s.Attempts {
		if a.N == s.Attempt {
			return a.LeaseID
		}
	}
	return ""
}

// ownerOf is the replica holding step s's current lease ("" unknown).
func ownerOf(s *engine.StepRun) string {
	owner := ""
	for _, a := range s.Attempts {
		if a.N == s.Attempt {
			owner = a.Replica
		}
	}
	return owner
}

// ownerAlive reports whether the replica holding step s's current lease
// is alive: this replica, or another whose heartbeat has not lapsed. An
// attempt that records no replica (leased before replicas were recorded)
// has no owner to wait for.
func (r *Runner) ownerAlive(ctx context.Context, s *engine.StepRun) (bool, error) {
	owner := ownerOf(s)
	switch {
	case owner == "":
		return false, nil
	case owner == r.replica:
		// Ours if held here; one recorded under our name that we do not
		// hold is from an earlier process of this replica: its executor
		// gets one lease TTL after our start to re-attach it.
		return r.dispatch.Holding(leaseOf(s)) || time.Since(r.born) < r.grace, nil
	}
	return r.store.Alive(ctx, owner)
}
