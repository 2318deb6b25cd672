package dispatch

import (
	"context"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// reattach takes over the leases an executor still runs from an earlier
// stream (Hello.held_leases), so that an executor survives its replica
// (issue 15, item 3). The run's record decides: a lease it says this
// replica holds, and this dispatcher still holds for the executor, is
// bound to the new session; one it says another replica holds (that one
// died, or the stream to it broke) is moved here (engine.LeaseMoved, which
// refuses if the lease was lost or moved meanwhile, or belongs to another
// executor) — even when this dispatcher kept a copy from before, since the
// lease may have moved away and back; any other is stale, and the
// executor is told to cancel it. It returns how many leases the session
// keeps (they hold credits).
func (d *Dispatcher) reattach(ctx context.Context, s *session, refs []*tollgatev1.LeaseRef) int {
	kept := 0
	seen := make(map[string]bool, len(refs))
	for _, ref := range refs {
		id, fence := ref.GetLeaseId(), ref.GetFence()
		if seen[id] {
			continue // named twice: counted once
		}
		seen[id] = true
		if d.adopt(ctx, s, id, fence) {
			kept++
			continue
		}
		d.cfg.Log.Info("a re-attached lease is stale; the executor cancels it", "executor", s.executor, "lease", limits.Short(id), "fence", fence)
		select {
		case s.out <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Cancel{Cancel: &tollgatev1.Cancel{LeaseId: id, Reason: "the lease is no longer current"}}}:
		default:
		}
	}
	return kept
}

// rebind gives a lease this dispatcher holds for the same executor, at the
// same fence, to its new session.
func (d *Dispatcher) rebind(s *session, id string, fence uint64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.leases[id]
	if !ok || uint64(l.offer.d.Attempt) != fence || l.s.executor != s.executor || !l.acked {
		return false
	}
	l.s = s
	l.deadline = d.cfg.Now().Add(d.cfg.LeaseTTL)
	d.cfg.Log.Info("lease re-attached", "executor", s.executor, "lease", id)
	return true
}

// adopt moves a lease another replica held to this one, in the run's
// record, and holds it here.
func (d *Dispatcher) adopt(ctx context.Context, s *session, id string, fence uint64) bool {
	d.mu.Lock()
	rec := d.rec
	d.mu.Unlock()
	runID, step, attempt, ok := runner.ParseWorkID(id)
	if rec == nil || !ok || uint64(attempt) != fence {
		return false
	}
	run, m, err := rec.Get(ctx, runID)
	if err != nil {
		return false
	}
	st := run.Steps[step]
	if st == nil || st.Attempt != attempt || !st.Status.InFlight() || len(st.Attempts) == 0 {
		return false
	}
	a := st.Attempts[len(st.Attempts)-1]
	if a.LeaseID != id || a.Executor != s.executor {
		return false
	}
	t, ok := m.TargetOf(step)
	if !ok {
		return false
	}
	from := a.Replica
	if from == d.cfg.Replica && d.rebind(s, id, fence) {
		return true // ours by the record, and held here
	}
	if _, err := rec.Event(ctx, runID, func(now time.Time) engine.Event {
		return engine.LeaseMoved{Step: step, Attempt: attempt, Executor: s.executor, From: from, Replica: d.cfg.Replica, At: now}
	}); err != nil {
		d.cfg.Log.Info("lease not re-attached", "executor", s.executor, "lease", id, "error", err)
		return false
	}
	dsp := engine.Dispatch{Step: step, Attempt: attempt, Kind: t.Kind, Server: t.Server, Tool: t.Tool, On: t.On}
	l := &lease{id: id, offer: offer{rec: rec, runID: runID, d: dsp}, s: s, deadline: d.cfg.Now().Add(d.cfg.LeaseTTL),
		acked: true, ack: ackRecording, ackDone: make(chan struct{}), fold: make(chan struct{})}
	close(l.ackDone)
	d.mu.Lock()
	if old, ok := d.leases[id]; ok {
		d.delLease(old)
		old.s.credits++ // its session's credit comes back
	}
	d.putLease(l)
	d.mu.Unlock()
	d.cfg.Log.Info("lease re-attached from another replica", "executor", s.executor, "lease", id, "from", from)
	return true
}
