package dispatch

import (
	"context"
	"time"
)

// reap is the expiry pass, every quarter of the lease TTL: a lease with
// no heartbeat within its TTL is lost (its credit returns and its session
// gets no new lease until heard from again), and losses the store could
// not record before are tried again.
func (d *Dispatcher) reap() {
	t := time.NewTicker(d.cfg.LeaseTTL / 4)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		now := d.cfg.Now()
		var gone []*lease
		d.mu.Lock()
		for _, l := range d.leases {
			if now.After(l.deadline) {
				d.delLease(l)
				l.s.credits++
				l.s.silent = true
				gone = append(gone, l)
			}
		}
		again := d.unrecorded
		d.unrecorded = nil
		d.mu.Unlock()
		if len(gone) > 0 {
			d.freed()
		}
		if len(gone) > 0 {
			d.cfg.Log.Info("leases expired without heartbeat", "count", len(gone))
		}
		if len(gone)+len(again) > 0 {
			d.lost(context.Background(), append(gone, again...))
		}
	}
}
