package peerkit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Percentiles picks p50 and p99 the way Tollgate's benchmarks do: the
// element at int(q·(n−1)) of the sorted sample, in milliseconds; 0 for
// none. ds is not changed.
func Percentiles(ds []time.Duration) (p50, p99 float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	p := func(q float64) float64 { return Ms(s[int(q*float64(len(s)-1))]) }
	return p(0.5), p(0.99)
}

// Ms is d in milliseconds, to the microsecond.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Sustained is a sustained phase: Clients goroutines, each calling one
// timed operation (a job, a run) back to back, until Duration has passed
// or, when Cap > 0, Cap operations have started.
type Sustained struct {
	Key      string // the workload, for progress
	Noun     string // what one operation is, singular, for progress and errors: "job", "run"
	Clients  int
	Duration time.Duration
	Cap      int
}

// Run runs the phase, each client calling one with a context that the
// first error cancels, and reports "KEY: N NOUNs in S s" to p every 5 s.
// It returns the latency one returned for each operation that succeeded
// and the time the whole phase took, or the first error, or an error when
// no operation completed.
func (s Sustained) Run(ctx context.Context, p *Progress, one func(context.Context) (time.Duration, error)) ([]time.Duration, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		lat      []time.Duration
		firstErr error
		budget   atomic.Int64
		done     atomic.Int64
	)
	budget.Store(int64(s.Cap))
	begin := time.Now()
	end := begin.Add(s.Duration)
	stopTicker := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.Printf("%s: %d %ss in %.0f s", s.Key, done.Load(), s.Noun, time.Since(begin).Seconds())
			case <-stopTicker:
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range s.Clients {
		wg.Go(func() {
			for time.Now().Before(end) {
				if s.Cap > 0 && budget.Add(-1) < 0 {
					return
				}
				d, err := one(ctx)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
					return
				}
				done.Add(1)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(stopTicker)
	elapsed := time.Since(begin)
	if firstErr != nil {
		return nil, 0, firstErr
	}
	if len(lat) == 0 {
		return nil, 0, fmt.Errorf("no %s completed", s.Noun)
	}
	return lat, elapsed, nil
}
