package executor

import (
	"context"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// leaveGrace bounds the tail of leave: the abandoned leases' results
// being delivered, and the control plane's end of the stream after
// Drained. An orchestrator's grace period (Kubernetes'
// terminationGracePeriodSeconds) should exceed DrainTimeout by more.
const leaveGrace = 5 * time.Second

// leave is the executor-initiated drain, run once Run's context ended
// (SIGTERM): the executor says Leaving on its stream (a stream opened
// later says it right after its welcome, session), so the control plane
// sends no new lease, and a lease already on its way is handed back, not
// run. The leases being run go on, their starts and results sent as
// usual, on a new stream if this one breaks, until they end or timeout
// passes; those still running then are cancelled and reported abandoned,
// exactly as after a control plane's Drain (conn.drain), and the
// executor sends Drained and waits (up to leaveGrace) for the control
// plane to end the stream. It returns once kill was called and every
// lease goroutine has returned.
func (c *conn) leave(timeout time.Duration, kill context.CancelFunc) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	c.mu.Lock()
	c.leaving = true // before running.Wait below: no lease is added after it
	l, n := c.cur, len(c.held)
	c.mu.Unlock()
	c.cfg.Log.Info("stopping: no new leases; the running ones may finish", "running", n, "drain_timeout", timeout)
	if l != nil {
		_ = l.send(leavingMsg()) // a stream that broke: the next one says it
	}
	done := make(chan struct{})
	go func() { c.running.Wait(); close(done) }() // ends once every lease's goroutine has (kill below ends them)
	defer func() { kill(); <-done }()
	drained := &tollgatev1.Drained{}
	var tail *time.Timer
	select {
	case <-done:
		tail = time.NewTimer(leaveGrace)
	case <-deadline.C:
		drained.Abandoned = c.abandon()
		c.cfg.Log.Warn("stopping: drain timeout; leases still running are cancelled and abandoned", "abandoned", len(drained.Abandoned))
		tail = time.NewTimer(leaveGrace)
		select {
		case <-done:
		case <-tail.C:
			// Their results could not be delivered in time: the stream
			// ends under them, and the control plane handles them as a
			// broken stream's leases.
			c.cfg.Log.Warn("stopping: results of abandoned leases not all recorded", "left", c.heldCount())
			return
		}
	}
	defer tail.Stop()
	c.mu.Lock()
	l = c.cur
	c.mu.Unlock()
	if l == nil {
		c.cfg.Log.Info("stopped; no stream is open to say drained on")
		return
	}
	c.cfg.Log.Info("drained", "abandoned", len(drained.Abandoned))
	l.drained(drained)
	select {
	case <-l.done: // the control plane ended the stream
	case <-tail.C:
	}
}

// abandon cancels every lease being run and returns them, at their
// fences, for Drained.
func (c *conn) abandon() []*tollgatev1.LeaseRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tollgatev1.LeaseRef
	for id, w := range c.held {
		out = append(out, &tollgatev1.LeaseRef{LeaseId: id, Fence: w.lease.GetFence()})
		w.abandoned = true
		w.cancel()
	}
	return out
}

// leftAll reports whether the executor is leaving with no lease left:
// no stream is needed any more.
func (c *conn) leftAll() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaving && len(c.held) == 0
}

// leavingMsg is a Leaving returning the leases named (none: the first).
func leavingMsg(returned ...*tollgatev1.LeaseRef) *tollgatev1.ExecutorMessage {
	return &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Leaving{Leaving: &tollgatev1.Leaving{Returned: returned}}}
}
