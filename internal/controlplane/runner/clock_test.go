package runner

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store/memstore"
)

// The store's clock is estimated from one offset, which moves only when a
// measurement shows it wrong: timestamps a replica takes without a round
// trip stay in the store's terms and consistent with each other.
func TestStoreClockEstimate(t *testing.T) {
	var skew atomic.Int64
	skew.Store(int64(5 * time.Second))
	st := memstore.New(memstore.Config{Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
	r := New(Config{Store: st})
	ctx := context.Background()
	if _, err := r.clock(ctx); err != nil { // the first reading measures
		t.Fatal(err)
	}
	near := func(what string, got, want time.Duration) {
		t.Helper()
		if d := got - want; d < -50*time.Millisecond || d > 50*time.Millisecond {
			t.Fatalf("%s: %v, want about %v", what, got, want)
		}
	}
	near("offset", time.Duration(r.offset.Load()), 5*time.Second)
	moves := 0
	for range 50 { // it moves only when a measurement rules it out
		before := r.offset.Load()
		if _, err := r.now(ctx); err != nil {
			t.Fatal(err)
		}
		if r.offset.Load() != before {
			moves++
		}
		near("offset", time.Duration(r.offset.Load()), 5*time.Second)
	}
	if moves > 10 {
		t.Fatalf("the offset moved on %d of 50 measurements of the same clock", moves)
	}
	skew.Store(int64(-3 * time.Second)) // the store's clock was set back
	if _, err := r.now(ctx); err != nil {
		t.Fatal(err)
	}
	near("offset after a step", time.Duration(r.offset.Load()), -3*time.Second)
	est, err := r.clock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	near("estimate", est.Sub(time.Now()), -3*time.Second)
}
