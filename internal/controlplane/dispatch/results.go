package dispatch

import (
	"context"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/faults"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// result records an executor's result of a lease at its fence (with the
// lease itself when its ack was deferred: one commit, folded) and answers
// the executor (settle).
func (d *Dispatcher) result(ctx context.Context, s *session, r *tollgatev1.Result) {
	l, ok := d.take(s, r.GetLeaseId(), r.GetFence())
	if !ok {
		d.refuse(s, r.GetLeaseId(), r.GetFence(), "no such lease or a stale fence: the result is not recorded")
		return
	}
	d.mu.Lock()
	if l.recording {
		// A copy of a result being recorded: the first copy's answer
		// answers the executor.
		d.mu.Unlock()
		return
	}
	if l.ack == ackNone || l.ack == ackRefused {
		// No ack came first (an executor acks before it starts anything).
		l.recording = true
		l.ack = ackRefused // an ack sent after this is not recorded
		d.mu.Unlock()
		d.refusedBeforeAck(ctx, s, l, r)
		return
	}
	l.recording = true
	first := l.ack == ackDeferred
	folded := first || l.ack == ackUnrecorded
	if first {
		close(l.fold)
	}
	if folded {
		l.ack = ackFolded
	}
	d.mu.Unlock()
	if !folded {
		<-l.ackDone
	}
	step, attempt := l.offer.d.Step, l.offer.d.Attempt
	var build func(now time.Time) engine.Event
	switch o := r.GetOutcome().(type) {
	case *tollgatev1.Result_OutputJson:
		build = func(now time.Time) engine.Event {
			return engine.StepSucceeded{Step: step, Attempt: attempt, Output: []byte(o.OutputJson), At: now}
		}
	case *tollgatev1.Result_ToolError:
		build = func(now time.Time) engine.Event {
			return engine.StepFailed{Step: step, Attempt: attempt, Error: "tool error: " + o.ToolError.GetMessage(), At: now}
		}
	case *tollgatev1.Result_TransportError:
		if o.TransportError.GetOutcomeUnknown() {
			build = func(now time.Time) engine.Event { return engine.LeaseLost{Step: step, Attempt: attempt, At: now} }
		} else {
			build = func(now time.Time) engine.Event {
				return engine.StepFailed{Step: step, Attempt: attempt, Error: "transport: " + o.TransportError.GetMessage(), At: now}
			}
		}
	case *tollgatev1.Result_Refusal:
		build = func(now time.Time) engine.Event {
			return engine.StepFailed{Step: step, Attempt: attempt, Error: "executor refused: " + o.Refusal.GetMessage(), At: now}
		}
	}
	var builds []func(time.Time) engine.Event
	if folded {
		// The lease and its result are recorded in one commit.
		builds = append(builds, d.leasedEvent(s, l, l.ackedAt))
	}
	if build != nil {
		builds = append(builds, build)
	}
	var err error
	if len(builds) > 0 {
		if err = faults.At(faults.AfterResultReceived); err == nil { // fail: as a store error
			_, err = l.offer.rec.Events(ctx, l.offer.runID, builds...)
		}
	}
	if first {
		close(l.ackDone)
	}
	d.settle(ctx, s, l, r.GetFence(), folded, err)
}

// settle answers an executor's result once recording it was tried (err
// is how that went). Recorded, now or by an earlier copy of the same
// result: ResultAck, and the lease is done. The store unavailable:
// NOT_RECORDED, and the lease is kept (its heartbeats keep it alive) for
// the copy the executor sends again; the executor holds the result until
// it is recorded, so a side effect's outcome is not lost in an outage.
// Refused by the engine (a stale fence, a run that moved on): Refused,
// for good. Anything else: Refused, and the lease is reported lost, so
// the run never waits for a result that will not be recorded.
func (d *Dispatcher) settle(ctx context.Context, s *session, l *lease, fence uint64, folded bool, err error) {
	switch {
	case err == nil:
	case retryable(err):
		d.mu.Lock()
		l.recording = false
		if folded {
			l.ack = ackUnrecorded
		}
		d.mu.Unlock()
		d.cfg.Log.Warn("result not recorded yet; the executor sends it again", "executor", s.executor, "lease", l.id, "fence", fence, "error", err)
		// Nothing about the store (its socket or address) goes to the
		// executor.
		d.answer(s, &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Refused{Refused: &tollgatev1.Refused{LeaseId: l.id, Fence: fence,
			Reason: tollgatev1.RefusedReason_REFUSED_REASON_NOT_RECORDED, Message: "the result is not recorded yet (" + store.ErrUnavailable.Error() + "): send it again"}}})
		return
	case engineRefusal(err) && d.reported(ctx, l):
		// An earlier copy was recorded; this one was not applied again.
	default:
		d.drop(l)
		d.refuse(s, l.id, fence, errkind.ClientText(err))
		if !engineRefusal(err) {
			d.lost(ctx, []*lease{l})
		}
		return
	}
	d.drop(l)
	d.answer(s, &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_ResultAck{ResultAck: &tollgatev1.ResultAck{LeaseId: l.id, Fence: fence}}})
}

// reported reports whether l's attempt already ended with a result its
// executor reported (recorded by an earlier copy of the same result).
func (d *Dispatcher) reported(ctx context.Context, l *lease) bool {
	run, _, err := l.offer.rec.Get(ctx, l.offer.runID)
	return err == nil && run.Reported(l.offer.d.Step, l.offer.d.Attempt)
}

// refusedBeforeAck records the result of a lease its executor never
// acknowledged. An executor acks a lease before it starts anything, and
// refuses one it will not run (a grant that does not verify, a tool it
// takes as side-effecting that the plan did not) before acking it: nothing
// ran, so this is no lost lease to offer again (the refusal would come
// back, or the used grant would be refused as reused), and no side effect
// can be in doubt (its Start, which needs the ack, was never recorded).
// The still-queued step fails with the executor's reason, in one commit
// (StepRefused), and the run goes on as its on_fail says. Any other
// outcome without an ack breaks the protocol and fails the step the same
// way. Copies of the result are answered like any result's (settle).
func (d *Dispatcher) refusedBeforeAck(ctx context.Context, s *session, l *lease, r *tollgatev1.Result) {
	why := "sent a result without acknowledging the lease"
	if ref := r.GetRefusal(); ref != nil {
		why = "refused the lease before starting it: " + ref.GetMessage()
	}
	why = limits.Truncate("executor "+s.executor+" "+why, limits.MaxErrorBytes)
	_, err := l.offer.rec.Event(ctx, l.offer.runID, func(now time.Time) engine.Event {
		return engine.StepRefused{Step: l.offer.d.Step, Attempt: l.offer.d.Attempt, Reason: why, At: now}
	})
	d.settle(ctx, s, l, r.GetFence(), false, err)
}
