package runner

import (
	"context"
	"time"
)

// now reads the store's clock and remembers how far it is from ours.
//
// The store read its clock at some instant of the round trip, so the true
// offset lies between t - after and t - before. The offset kept changes
// only when it falls outside that window (to the window's middle): the
// estimate stays put while measurements agree with it, and two timestamps
// this replica takes (a lease and its result) are measured with the same
// offset.
func (r *Runner) now(ctx context.Context) (time.Time, error) {
	before := time.Now()
	t, err := r.store.Now(ctx)
	if err != nil {
		return t, err
	}
	after := time.Now()
	lo, hi := t.Sub(after), t.Sub(before)+time.Microsecond // TIME has µs resolution
	if cur := time.Duration(r.offset.Load()); r.offsetAt.Load() == 0 || cur < lo || cur > hi {
		r.offset.Store(int64(lo + (hi-lo)/2))
	}
	r.offsetAt.Store(after.UnixNano())
	return t, nil
}

// offsetTTL is how long a measured offset between the store's clock and
// ours is trusted before it is measured again.
const offsetTTL = time.Second

// clock is the store's clock estimated from ours and the last offset
// measured (timestamps stay in the store's terms without a round trip);
// it reads the store's clock when it has no recent offset. Deadlines are
// still judged by the store itself when a decision commits (I4).
func (r *Runner) clock(ctx context.Context) (time.Time, error) {
	at := r.offsetAt.Load()
	if at == 0 {
		return r.now(ctx)
	}
	if time.Since(time.Unix(0, at)) > offsetTTL && r.refreshing.CompareAndSwap(false, true) {
		defer r.refreshing.Store(false)
		return r.now(ctx)
	}
	return r.StoreTime(), nil
}

// StoreTime estimates the store's clock from ours and the last offset
// seen.
func (r *Runner) StoreTime() time.Time {
	return time.Now().Add(time.Duration(r.offset.Load())).UTC()
}
