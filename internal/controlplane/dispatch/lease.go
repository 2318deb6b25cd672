package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/limits"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// lease is one attempt of a step held by one session. Its fence is the
// attempt: a re-lease has a higher one, and a message carrying another
// fence is refused (take).
type lease struct {
	id       string
	offer    offer
	s        *session
	deadline time.Time
	acked    bool          // the lease is recorded in the run
	ackDone  chan struct{} // closed once the ack has been handled
	// A read-only step's ack is recorded with its result when the result
	// follows soon (one commit instead of two); see leaseRecordDelay.
	ack     ackState // guarded by Dispatcher.mu
	ackedAt time.Time
	fold    chan struct{} // closed when the result takes the ack over
	// recording is set while the lease's result is being recorded: a
	// copy of it that the executor sends meanwhile is left to the first
	// copy's answer. Guarded by Dispatcher.mu.
	recording bool
	// cancelled is set when the engine cancelled this attempt (Cancel):
	// lost before its ack, it is not offered again. Guarded by
	// Dispatcher.mu.
	cancelled bool
}

// leaseFor builds the lease of o for s: the message to send (with a
// signed grant for a side effect, grant.go) and the lease to hold.
func (d *Dispatcher) leaseFor(o offer, s *session) (*tollgatev1.ControlMessage, *lease, error) {
	now := d.cfg.Now()
	id := leaseID(o.runID, o.d.Step, o.d.Attempt)
	kind := tollgatev1.StepKind_STEP_KIND_TOOL
	if o.d.Kind == plan.KindProse {
		kind = tollgatev1.StepKind_STEP_KIND_PROSE
	}
	pl := &tollgatev1.Lease{LeaseId: id, Fence: uint64(o.d.Attempt), RunId: o.runID, StepId: o.d.Step, Attempt: int32(o.d.Attempt),
		Traceparent: telemetry.Traceparent(telemetry.RunTraceID(o.runID), telemetry.SpanID(id), d.cfg.Tracing.Sampled(telemetry.RunTraceID(o.runID))),
		Kind:        kind, Server: o.d.Server, Tool: o.d.Tool, ArgsJson: string(o.d.Args), Prompt: o.d.Prompt, SideEffect: o.d.SideEffect,
		Idempotent: o.d.Idempotent, Deadline: timestamppb.New(now.Add(d.cfg.LeaseTTL)), IdempotencyKey: o.runID + "/" + o.d.Step}
	if o.d.SideEffect {
		g, err := d.grantFor(o, now)
		if err != nil {
			return nil, nil, err
		}
		pl.Grant = g
	}
	msg := &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Lease{Lease: pl}}
	if err := leaseFits(msg); err != nil {
		return nil, nil, err
	}
	return msg, &lease{id: id, offer: o, s: s, deadline: now.Add(d.cfg.LeaseTTL), ackDone: make(chan struct{}), fold: make(chan struct{})}, nil
}

// leaseFits checks a lease against the message limit. The engine never
// dispatches a step whose resolved args or prompt exceed
// limits.MaxValueBytes, so a lease fits by construction; this is the
// stream's own guard should that ever change.
func leaseFits(msg *tollgatev1.ControlMessage) error {
	if n := proto.Size(msg); n > limits.MaxMessageBytes {
		return fmt.Errorf("its lease is %d bytes, more than the %s message limit, so it was not sent: %w", n, limits.Size(limits.MaxMessageBytes), errkind.Undeliverable)
	}
	return nil
}

// take returns s's live lease id if fence is its fence: a message about
// a lease another session holds, or with a stale fence, finds none.
func (d *Dispatcher) take(s *session, id string, fence uint64) (*lease, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.leases[id]
	if !ok || l.s != s || uint64(l.offer.d.Attempt) != fence {
		return nil, false
	}
	return l, true
}

// heartbeat keeps the leases it names (at their fences) alive for
// another TTL, and makes a silent session eligible for leases again.
func (d *Dispatcher) heartbeat(s *session, hb *tollgatev1.Heartbeat) {
	now := d.cfg.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.silent {
		s.silent = false
		d.handOut()
	}
	for _, ref := range hb.GetLeases() {
		if l, ok := d.leases[ref.GetLeaseId()]; ok && l.s == s && uint64(l.offer.d.Attempt) == ref.GetFence() {
			l.deadline = now.Add(d.cfg.LeaseTTL)
		}
	}
}

// holding reports whether l is still this dispatcher's live lease.
func (d *Dispatcher) holding(l *lease) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.leases[l.id] == l
}

// putLease holds l. d.mu is held.
func (d *Dispatcher) putLease(l *lease) {
	d.leases[l.id] = l
	d.byRun[l.offer.runID]++
}

// delLease forgets l. d.mu is held.
func (d *Dispatcher) delLease(l *lease) {
	delete(d.leases, l.id)
	if d.byRun[l.offer.runID]--; d.byRun[l.offer.runID] <= 0 {
		delete(d.byRun, l.offer.runID)
	}
}

// drop forgets a lease and returns its credit.
func (d *Dispatcher) drop(l *lease) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.leases[l.id] == l {
		d.delLease(l)
		l.s.credits++
		d.handOut()
		defer d.freed()
	}
}

// lost handles leases whose executor went away: an acknowledged lease is
// reported lost to the engine (which re-leases or asks, I7); one never
// acknowledged is simply offered again, unless the engine cancelled it
// meanwhile (Cancel): nobody wants that attempt, and a read-only step's
// tool would run on the next executor before its ack is refused.
func (d *Dispatcher) lost(ctx context.Context, ls []*lease) {
	for _, l := range ls {
		if !l.acked {
			d.mu.Lock()
			cancelled := l.cancelled
			d.mu.Unlock()
			if !cancelled {
				d.reoffer(l.offer)
			}
			continue
		}
		_, err := l.offer.rec.Event(ctx, l.offer.runID, func(now time.Time) engine.Event {
			return engine.LeaseLost{Step: l.offer.d.Step, Attempt: l.offer.d.Attempt, Replica: d.cfg.Replica, At: now}
		})
		switch {
		case err == nil, errors.Is(err, engine.ErrStaleAttempt), errors.Is(err, engine.ErrWrongTransition):
		case retryable(err):
			d.cfg.Log.Warn("lease lost, not recorded yet; the next expiry pass tries again", "lease", l.id, "error", err)
			d.mu.Lock()
			d.unrecorded = append(d.unrecorded, l)
			d.mu.Unlock()
		default:
			d.cfg.Log.Error("lease lost, not recorded", "lease", l.id, "error", err)
		}
	}
}
