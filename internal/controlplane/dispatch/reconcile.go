package dispatch

import (
	"context"
	"slices"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// Holding implements runner.Dispatcher.
func (d *Dispatcher) Holding(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.leases[id]; ok {
		return true
	}
	return slices.ContainsFunc(d.waiting, func(o offer) bool { return id == leaseID(o.runID, o.d.Step, o.d.Attempt) })
}

// HeldRuns lists the runs this dispatcher holds leases or waiting offers
// of: the owner reconciles them on a tick as well as on hints, since a
// hint may be lost.
func (d *Dispatcher) HeldRuns() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	set := map[string]bool{}
	for id := range d.byRun {
		set[id] = true
	}
	for _, o := range d.waiting {
		set[o.runID] = true
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	return out
}

// Holds reports whether this dispatcher holds a lease of run, or has one
// of its steps waiting for a credit: whether another replica's commit to
// the run may concern it.
func (d *Dispatcher) Holds(runID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byRun[runID] > 0 {
		return true
	}
	return slices.ContainsFunc(d.waiting, func(o offer) bool { return o.runID == runID })
}

// Reconcile brings what this dispatcher holds of a run in line with the
// run as stored, after another replica committed to it (a cancellation
// through another replica, I7's half that stops work): the executor of an
// attempt that is no longer queued or in flight is told to cancel it, and
// a waiting offer of an attempt no longer queued is dropped. The run is
// read through the Recorder the lease was offered with.
func (d *Dispatcher) Reconcile(ctx context.Context, runID string) {
	d.mu.Lock()
	var rec interface {
		Get(context.Context, string) (*engine.Run, *engine.Machine, error)
	}
	for _, l := range d.leases {
		if l.offer.runID == runID {
			rec = l.offer.rec
			break
		}
	}
	if rec == nil {
		for _, o := range d.waiting {
			if o.runID == runID {
				rec = o.rec
				break
			}
		}
	}
	d.mu.Unlock()
	if rec == nil {
		return
	}
	run, _, err := rec.Get(ctx, runID)
	if err != nil {
		return // the next hint, or the run's own reports, try again
	}
	current := func(step string, attempt int, queuedOnly bool) bool {
		s := run.Steps[step]
		if run.State.Terminal() || s == nil || s.Attempt != attempt {
			return false
		}
		return s.Status == engine.StatusQueued || (!queuedOnly && s.Status.InFlight())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range d.leases {
		if l.offer.runID != runID || l.recording || current(l.offer.d.Step, l.offer.d.Attempt, false) {
			continue // (a lease whose result is being recorded ends by itself)
		}
		select {
		case l.s.out <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Cancel{Cancel: &tollgatev1.Cancel{LeaseId: l.id, Reason: "the run moved on: " + string(run.State)}}}:
		default:
		}
	}
	d.waiting = slices.DeleteFunc(d.waiting, func(o offer) bool {
		return o.runID == runID && !current(o.d.Step, o.d.Attempt, true)
	})
}
