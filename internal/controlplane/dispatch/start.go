package dispatch

import (
	"context"
	"sync"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/faults"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// started handles an executor's Start, sent before it invokes a
// side-effecting tool: the start is recorded (after the lease's ack) and
// only then acknowledged durable (I7), so a side effect whose outcome is
// later unknown is known to have started. A Start for no live lease, at a
// stale fence or with no ack before it is answered not durable, and the
// executor runs nothing. handlers counts the work started here; ctx is
// the stream's, rec outlives it.
func (d *Dispatcher) started(ctx, rec context.Context, s *session, st *tollgatev1.Start, handlers *sync.WaitGroup) {
	l, ok := d.take(s, st.GetLeaseId(), st.GetFence())
	if ok && !d.ackHeard(l) {
		// A Start with no ack before it (or after a refusal) has no
		// ackDone that will close: not durable, so nothing runs.
		ok = false
	}
	handlers.Add(1)
	d.handle(func() {
		defer handlers.Done()
		durable := false
		if ok {
			<-l.ackDone
			err := faults.At(faults.AfterStartReceived) // fail: as a store error
			if err == nil {
				_, err = l.offer.rec.Event(rec, l.offer.runID, func(now time.Time) engine.Event {
					return engine.StepStarted{Step: l.offer.d.Step, Attempt: l.offer.d.Attempt, At: now}
				})
			}
			if err != nil && engineRefusal(err) && d.startedBefore(rec, l) {
				err = nil // an earlier copy of this Start was recorded
			}
			if err != nil && retryable(err) {
				// Not refused: the executor holds the lease (its
				// heartbeats keep it) and sends the Start again.
				d.cfg.Log.Warn("start not recorded yet; the executor sends it again", "executor", s.executor, "lease", l.id, "error", err)
				d.answer(s, &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Refused{Refused: &tollgatev1.Refused{LeaseId: l.id, Fence: st.GetFence(),
					Reason: tollgatev1.RefusedReason_REFUSED_REASON_NOT_RECORDED, Message: "the start is not recorded yet (" + errkind.ClientText(err) + "): send it again"}}})
				return
			}
			durable = err == nil
		}
		// Acknowledged only after the store committed it (I7).
		ack := &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_StartAck{StartAck: &tollgatev1.StartAck{LeaseId: st.GetLeaseId(), Fence: st.GetFence(), Durable: durable}}}
		select {
		case s.out <- ack:
		case <-ctx.Done():
		}
	})
}

// startedBefore reports whether l's attempt is recorded as started (by an
// earlier copy of the same Start whose answer was lost).
func (d *Dispatcher) startedBefore(ctx context.Context, l *lease) bool {
	run, _, err := l.offer.rec.Get(ctx, l.offer.runID)
	if err != nil {
		return false
	}
	st, ok := run.Steps[l.offer.d.Step]
	return ok && st.Attempt == l.offer.d.Attempt && st.Status == engine.StatusStarted
}
