package dispatch

import (
	"context"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// leaving handles an executor's Leaving (its process is stopping): from
// the first, s gets no new lease and serves nothing here (session.serves),
// so offers only it could take go back to the store for other replicas,
// and what this replica announces no longer names its queues. Leases it
// returns (sent before its Leaving arrived; it runs none of them) that s
// still holds at their fence and never acked are taken back and offered
// again at the same fence, as a never-acked lease of a stream that ended
// is (lost). A returned lease that was acked is left alone: the executor
// runs it, and its result, or the expiry pass, settles it. Its leases run
// on and report as usual; its Drained then ends the stream.
func (d *Dispatcher) leaving(ctx context.Context, s *session, m *tollgatev1.Leaving) {
	d.mu.Lock()
	first := !s.leaving
	s.leaving = true
	var back []*lease
	for _, ref := range m.GetReturned() {
		l, ok := d.leases[ref.GetLeaseId()]
		if !ok || l.s != s || uint64(l.offer.d.Attempt) != ref.GetFence() || l.acked || l.ack != ackNone {
			continue
		}
		d.delLease(l)
		back = append(back, l)
	}
	var orphans []offer
	if first {
		orphans = d.unservedWaiting()
	}
	d.mu.Unlock()
	if first {
		d.cfg.Log.Info("executor leaving: no new leases to it", "executor", s.executor, "session", s.id)
		d.changed()
		d.release(ctx, orphans)
	}
	if len(back) > 0 {
		d.cfg.Log.Info("leases returned by a leaving executor; offered again", "executor", s.executor, "count", len(back))
	}
	d.lost(ctx, back)
}
