package runner

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/faults"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// pending is one event waiting for its run's next commit.
type pending struct {
	build func(now time.Time) engine.Event
	done  chan committed
}

type committed struct {
	tr  engine.Transition
	err error
}

// runQueue gathers the events of one run that arrive while a commit is
// under way, so that a fan's results land in one commit instead of racing
// each other to the store (group commit). Other replicas still meet at the
// store's compare-and-set.
type runQueue struct {
	mu      sync.Mutex
	waiting []*pending
	leader  bool
	refs    int
}

// commitAll applies events in order and commits them, in one commit
// together with any other events of the same run that arrived meanwhile.
// Each event gets its own outcome; the error is the caller giving up.
// Effects are the caller's, after it (they may apply further events to the
// same run).
func (r *Runner) commitAll(ctx context.Context, runID string, builds []func(time.Time) engine.Event) ([]committed, error) {
	r.mu.Lock()
	q, ok := r.queues[runID]
	if !ok {
		q = &runQueue{}
		r.queues[runID] = q
	}
	q.refs++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if q.refs--; q.refs == 0 {
			delete(r.queues, runID)
		}
		r.mu.Unlock()
	}()

	ps := make([]*pending, len(builds))
	for i, b := range builds {
		ps[i] = &pending{build: b, done: make(chan committed, 1)}
	}
	q.mu.Lock()
	q.waiting = append(q.waiting, ps...) // together: one batch takes them all
	lead := !q.leader
	q.leader = true
	q.mu.Unlock()
	if lead {
		// Commit batches until nobody waits; the store calls outlive a
		// caller that gives up, since others' events ride along.
		bctx := context.WithoutCancel(ctx)
		for {
			q.mu.Lock()
			batch := q.waiting
			q.waiting = nil
			if len(batch) == 0 {
				q.leader = false
				q.mu.Unlock()
				break
			}
			q.mu.Unlock()
			r.commitBatch(bctx, runID, batch)
		}
	}
	// Wait for the outcome even if the caller gives up: the batch commits
	// its events anyway, and their effects (a step handed off to this
	// replica in that commit) must run, or the step would stay claimed
	// here and offered to nobody. A batch's commit is bounded (commitBatch).
	out := make([]committed, len(ps))
	for i, p := range ps {
		out[i] = <-p.done
	}
	return out, nil
}

// commitBatch applies a batch of events in order to one read of the run
// and commits the result once; each event gets its own outcome. On a
// version conflict or a passed deadline it reads again and re-applies.
func (r *Runner) commitBatch(ctx context.Context, runID string, batch []*pending) {
	fail := func(err error) {
		for _, p := range batch {
			p.done <- committed{err: err}
		}
	}
	conflicts := 0
	fresh, storeClock := false, false
	for range 100 {
		sr, run, m, err := r.load(ctx, runID, fresh)
		if err != nil {
			fail(err)
			return
		}
		// Executor events are judged by this replica's clock (one store
		// round trip fewer); anything a person decides, and any retry after
		// a deadline, by the store's — which the commit checks anyway (I4).
		now, err := r.clock(ctx)
		if err != nil {
			fail(err)
			return
		}
		evs := make([]engine.Event, len(batch))
		for i, p := range batch {
			evs[i] = p.build(now)
			switch evs[i].(type) {
			case engine.Decide, engine.Answer, engine.Cancel, engine.Tick:
				storeClock = true
			}
		}
		if storeClock {
			if now, err = r.now(ctx); err != nil {
				fail(err)
				return
			}
			for i, p := range batch {
				evs[i] = p.build(now)
			}
		}
		cur := run
		outs := make([]committed, len(batch))
		var records []engine.Record
		var deadline time.Time
		applied := 0
		// A batch no deadline binds (executors' reports) is applied with
		// one copy of the run, not one per event: a fan's results cost
		// what they change.
		var trs []engine.Transition
		var errs []error
		if !slices.ContainsFunc(evs, decides) {
			trs, errs = m.ApplyAll(run, evs)
		}
		for i := range batch {
			ev := evs[i]
			var tr engine.Transition
			var err error
			if trs != nil {
				tr, err = trs[i], errs[i]
			} else {
				tr, err = m.Apply(cur, ev)
			}
			if err != nil {
				outs[i] = committed{err: err}
				continue
			}
			if d := deadlineOf(cur, ev); !d.IsZero() && (deadline.IsZero() || d.Before(deadline)) {
				deadline = d
			}
			cur = tr.Run
			records = append(records, tr.Records...)
			outs[i] = committed{tr: tr}
			applied++
		}
		if applied == 0 {
			// Every event refused. The run this replica keeps may be
			// stale (another replica committed since): refused against
			// the stored run, or not at all.
			if !fresh {
				if v, err := r.store.RunVersion(ctx, runID); err == nil && v != run.Version {
					r.forget(runID)
					fresh = true
					continue
				}
			}
			for i, p := range batch {
				p.done <- outs[i]
			}
			return
		}
		cur.Version = run.Version + 1 // one commit, however many events
		c, err := commitFor(run, sr, engine.Transition{Run: cur, Records: records}, sr.Skill)
		if err != nil {
			fail(err)
			return
		}
		c.Deadline = deadline
		var owned []string
		c.Enqueue, c.Finish, owned = r.stepWork(m, run, cur)
		c.Enqueue = append(c.Enqueue, r.outboxWork(cur, batchEffects(cur, outs))...)
		c.Origin = r.replica
		// The asks this commit opens are settling before it is visible
		// (settling.go); effects releases them after their hooks.
		opening := 0
		for i := range batch {
			if outs[i].err == nil {
				opening += r.opening(outs[i].tr)
			}
		}
		r.settling.add(runID, opening)
		if err = faults.At(faults.InGroupCommit); err == nil { // fail: as a failed commit
			err = r.store.Commit(ctx, c)
		}
		if err != nil {
			r.settling.add(runID, -opening)
		}
		switch {
		case err == nil:
			_ = faults.At(faults.AfterCommit) // the callers run the effects once they have the outcomes
			r.handoff.add(owned)
			r.remember(c.Run, cur)
			r.observe(ctx, m, run, cur, records)
			for i, p := range batch {
				o := outs[i]
				if o.err == nil {
					o.tr.Run = cur
					o.tr.Effects = liveEffects(cur, o.tr.Effects)
				}
				p.done <- o
			}
			return
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrDeadline):
			// Someone else moved the run, or a deadline passed between our
			// read of the clock and the commit: read again; the engine then
			// applies the expiry. Back off a little, more each time, so
			// replicas racing on one run spread out.
			r.forget(runID)
			fresh, storeClock = true, true
			conflicts++
			if conflicts > 3 {
				delay := time.Duration(mrand.Int64N(int64(conflicts) * int64(time.Millisecond)))
				select {
				case <-ctx.Done():
					fail(ctx.Err())
					return
				case <-time.After(delay):
				}
			}
		default:
			if errors.Is(err, store.ErrUnavailable) {
				r.unsure.add(runID) // it may have landed; see Resettle
			}
			fail(fmt.Errorf("commit run %s: %w", runID, err))
			return
		}
	}
	fail(errkind.Busy)
}

// batchEffects are the live effects of a batch's applied events, as
// their callers will act on them once the batch commits.
func batchEffects(run *engine.Run, outs []committed) []engine.Effect {
	var out []engine.Effect
	for _, o := range outs {
		if o.err == nil {
			out = append(out, liveEffects(run, o.tr.Effects)...)
		}
	}
	return out
}

func (r *Runner) observe(ctx context.Context, m *engine.Machine, before, after *engine.Run, records []engine.Record) {
	for _, o := range r.observers {
		o.Committed(ctx, m, before, after, records)
	}
}
