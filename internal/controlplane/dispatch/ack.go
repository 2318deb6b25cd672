package dispatch

import (
	"context"
	"sync"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

type ackState int

const (
	ackNone       ackState = iota
	ackDeferred            // acked; the lease waits for its result, or the delay, to be recorded
	ackFolded              // the result records the lease with itself
	ackRecording           // the lease is being recorded on its own
	ackUnrecorded          // folded, but the store was unavailable: the result's next copy folds again
	ackRefused             // never acked: the executor refused it before it started (see refusedBeforeAck)
)

// leaseRecordDelay is how long a read-only step's lease may wait to be
// recorded together with its result. Nothing waits on that record: a
// read-only step's lease is not a side effect's permission (only a Start
// is, and it is always recorded before it is acknowledged), and a lease
// that is lost before it is recorded is offered again at the same fence.
// Watchers see the step leased at most this much later.
const leaseRecordDelay = 20 * time.Millisecond

// acked handles an executor's ack of a lease. A side effect's lease is
// recorded at once, on a record worker; a read-only step's waits up to
// leaseRecordDelay for its result to record it in the same commit (the
// result folds it, results.go), and is recorded on its own if none comes.
// handlers counts the work started here; ctx is the stream's, rec
// outlives it.
func (d *Dispatcher) acked(ctx, rec context.Context, s *session, a *tollgatev1.Ack, handlers *sync.WaitGroup) {
	l, ok := d.take(s, a.GetLeaseId(), a.GetFence())
	if !ok {
		d.refuse(s, a.GetLeaseId(), a.GetFence(), "no such lease or a stale fence")
		return
	}
	if l.offer.d.SideEffect {
		if !d.claimAck(l, ackRecording, time.Time{}) {
			return // acked again: the first ack records it
		}
		handlers.Add(1)
		d.handle(func() {
			defer handlers.Done()
			d.recordAck(rec, s, l)
		})
		return
	}
	if !d.claimAck(l, ackDeferred, l.offer.rec.StoreTime()) {
		return // acked again: the first ack records it
	}
	handlers.Add(1)
	go func() {
		defer handlers.Done()
		t := time.NewTimer(leaseRecordDelay)
		defer t.Stop()
		select {
		case <-l.fold:
			return // the result records it
		case <-t.C:
		case <-ctx.Done(): // the stream is over: record what we heard
		}
		d.mu.Lock()
		state := l.ack
		mine := state == ackDeferred && d.leases[l.id] == l
		if mine {
			l.ack = ackRecording
		}
		d.mu.Unlock()
		switch {
		case state == ackFolded, state == ackUnrecorded:
			return // the result records it, and closes ackDone
		case !mine:
			// Lost before it was recorded: it was offered again at
			// the same fence.
			close(l.ackDone)
			return
		}
		handlers.Add(1) // on a record worker, to commit
		d.handle(func() {
			defer handlers.Done()
			d.recordAck(rec, s, l)
		})
	}()
}

// claimAck marks l acknowledged (state, at) unless an ack of it was
// already heard: a lease offered twice to one executor (it expired and was
// offered again at the same fence) is acked twice, and only the first ack
// may record it (and close its ackDone).
func (d *Dispatcher) claimAck(l *lease, state ackState, at time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l.ack != ackNone {
		return false
	}
	l.ack, l.ackedAt = state, at
	return true
}

// ackHeard reports whether l's ack was heard (and so its ackDone closes
// once the ack is handled).
func (d *Dispatcher) ackHeard(l *lease) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return l.ack != ackNone && l.ack != ackRefused
}

// leasedEvent is the engine event for an executor's ack of l.
func (d *Dispatcher) leasedEvent(s *session, l *lease, at time.Time) func(now time.Time) engine.Event {
	return func(now time.Time) engine.Event {
		if !at.IsZero() {
			now = at
		}
		return engine.StepLeased{Step: l.offer.d.Step, Attempt: l.offer.d.Attempt, Executor: s.executor, LeaseID: l.id, Replica: d.cfg.Replica, At: now}
	}
}

// Bounds of the wait before an ack the store could not record is tried
// again.
const (
	ackRetryMin = 50 * time.Millisecond
	ackRetryMax = time.Second
)

// recordAck commits an executor's ack of l on its own. An ack the store
// cannot record now (unavailable, busy) is recorded again while the lease
// lives: its executor holds it (heartbeats keep it) and waits for its
// Start's answer. Offering it again instead would send the same fence and
// grant a second time, which the executor refuses (a grant is used once,
// I7) and the step would never run. The lease gone (expired, its session
// over) or the dispatcher closed ends the retries: lost has then offered
// the unacknowledged lease again. ackDone is closed in every case, so no
// Start or result waits for it forever.
func (d *Dispatcher) recordAck(ctx context.Context, s *session, l *lease) {
	defer close(l.ackDone)
	var err error
	for backoff := ackRetryMin; ; backoff = min(2*backoff, ackRetryMax) {
		_, err = l.offer.rec.Event(ctx, l.offer.runID, d.leasedEvent(s, l, l.ackedAt))
		if err != nil && engineRefusal(err) && d.leasedBefore(ctx, s, l) {
			err = nil // an earlier try was written, its answer lost
		}
		if err == nil || !retryable(err) {
			break
		}
		if !d.holding(l) {
			return // lost meanwhile: offered again already
		}
		d.cfg.Log.Warn("lease ack not recorded yet; trying again", "executor", s.executor, "lease", l.id, "in", backoff, "error", err)
		select {
		case <-time.After(backoff):
		case <-d.stop:
			return
		}
	}
	if err != nil {
		d.drop(l)
		d.refuse(s, l.id, uint64(l.offer.d.Attempt), errkind.ClientText(err))
		if !engineRefusal(err) {
			// Not the engine saying no (a store hiccup): the step is still
			// queued, so offer it again.
			d.reoffer(l.offer)
		}
		return
	}
	d.mu.Lock()
	l.acked = true
	l.deadline = d.cfg.Now().Add(d.cfg.LeaseTTL)
	d.mu.Unlock()
}

// leasedBefore reports whether l's attempt is recorded as leased to s's
// executor under l's id (by an earlier try whose answer was lost).
func (d *Dispatcher) leasedBefore(ctx context.Context, s *session, l *lease) bool {
	run, _, err := l.offer.rec.Get(ctx, l.offer.runID)
	if err != nil {
		return false
	}
	st, ok := run.Steps[l.offer.d.Step]
	if !ok || st.Attempt != l.offer.d.Attempt || st.Status != engine.StatusLeased || len(st.Attempts) == 0 {
		return false
	}
	a := st.Attempts[len(st.Attempts)-1]
	return a.LeaseID == l.id && a.Executor == s.executor
}
