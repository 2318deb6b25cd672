package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/redisstore"
)

// benchWorld is a control plane on real Redis (AOF with the given fsync
// policy) with one in-process executor over loopback gRPC.
func benchWorld(b *testing.B, fsync string) (*world, tollgatev1.RunServiceClient) {
	b.Helper()
	srv := redistest.Start(b, redistest.Args("--appendfsync", fsync))
	b.Cleanup(cpuMeter(b, srv))
	st, err := redisstore.New(context.Background(), redisstore.Config{URL: srv.URL()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	w := newWorldOn(b, "", noCloseStore{st})
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	w.executor(b, ctx, "edge-1")
	return w, tollgatev1.NewRunServiceClient(w.conn(b, "alice"))
}

// cpuMeter reports the CPU time per benchmark op of this process (client,
// control plane and executor) and of redis-server, measured from the call
// until cleanup: unlike wall time, it barely moves when other work shares
// the machine, and it says where the two cores go.
func cpuMeter(b *testing.B, srv *redistest.Server) func() {
	self0, redis0 := processCPU(), redisCPU(b, srv)
	return func() {
		if b.N == 0 || b.Failed() {
			return
		}
		self, redis := processCPU()-self0, redisCPU(b, srv)-redis0
		b.ReportMetric(float64(self.Microseconds())/float64(b.N), "go-cpu-µs/op")
		b.ReportMetric(float64(redis.Microseconds())/float64(b.N), "redis-cpu-µs/op")
		for _, line := range strings.Split(srv.Log(), "\n") {
			if strings.Contains(line, "fsync") && strings.Contains(line, "too long") {
				b.Logf("redis-server: %s", line) // the disk held writes back
			}
		}
		if os.Getenv("TOLLGATE_BENCH_REDISSTATS") != "" {
			stats, _ := srv.Do("INFO", "commandstats")
			cpu, _ := srv.Do("INFO", "cpu")
			stats += cpu
			b.Logf("N=%d\n%s", b.N, stats)
		}
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU is redis-server's user + system CPU time (INFO cpu).
func redisCPU(b *testing.B, srv *redistest.Server) time.Duration {
	d, err := srv.CPU()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

type noCloseStore struct{ store.Store }

func (noCloseStore) Close() error { return nil }

// runToEnd starts a recipe and waits (on the run's watch stream) until it
// completes; it returns the run.
func runToEnd(b *testing.B, runs tollgatev1.RunServiceClient, recipe string) *tollgatev1.Run {
	ctx := context.Background()
	resp, err := runs.StartRun(ctx, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: recipe}})
	if err != nil {
		b.Fatal(err)
	}
	stream, err := runs.WatchRun(ctx, &tollgatev1.WatchRunRequest{RunId: resp.GetRun().GetId()})
	if err != nil {
		b.Fatal(err)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			b.Fatalf("watch: %v", err)
		}
		if r := ev.GetEvent().GetRun(); r.GetState() == tollgatev1.RunState_RUN_STATE_COMPLETE {
			return r
		} else if terminal(r.GetState()) {
			b.Fatalf("run ended %v: %s", r.GetState(), r.GetStateReason())
		}
	}
}

func terminal(s tollgatev1.RunState) bool {
	return s >= tollgatev1.RunState_RUN_STATE_COMPLETE
}

func percentiles(b *testing.B, ds []time.Duration, prefix string) {
	slices.Sort(ds)
	p := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000 }
	b.ReportMetric(p(0.5), prefix+"p50-ms")
	b.ReportMetric(p(0.99), prefix+"p99-ms")
}

func fsyncs() []string {
	if v := os.Getenv("TOLLGATE_BENCH_FSYNC"); v != "" {
		return []string{v}
	}
	return []string{"everysec", "always"}
}

const threeSteps = "a: notes.search {\"q\": \"1\"}\nb: notes.search {\"q\": \"{a}\"}\nc: notes.search {\"q\": \"{b}\"}\n"

// BenchmarkThreeStepRun: a 3-step sequential run, start to complete, and
// the dispatch latency inside it (step runnable → leased by the executor).
func BenchmarkThreeStepRun(b *testing.B) {
	for _, fsync := range fsyncs() {
		b.Run("fsync="+fsync, func(b *testing.B) {
			_, runs := benchWorld(b, fsync)
			var ends, dispatch []time.Duration
			for b.Loop() {
				start := time.Now()
				r := runToEnd(b, runs, threeSteps)
				ends = append(ends, time.Since(start))
				for _, s := range r.GetSteps() {
					for _, a := range s.GetAttempts() {
						if a.GetLeasedAt() != nil {
							dispatch = append(dispatch, a.GetLeasedAt().AsTime().Sub(queuedAt(r, s.GetStepId())))
						}
					}
				}
			}
			percentiles(b, ends, "run-")
			percentiles(b, dispatch, "dispatch-")
		})
	}
}

// queuedAt is when a step became runnable: its predecessor's finish (the
// engine queues it in the same commit), or the run's start for the first.
func queuedAt(r *tollgatev1.Run, step string) time.Time {
	prev := map[string]string{"b": "a", "c": "b"}[step]
	for _, s := range r.GetSteps() {
		if s.GetStepId() == prev {
			return s.GetAttempts()[0].GetFinishedAt().AsTime()
		}
	}
	return r.GetCreatedAt().AsTime()
}

// BenchmarkFan: a fan of no-op steps, start to complete.
func BenchmarkFan(b *testing.B) {
	for _, n := range []int{10, 100} {
		recipe := "together f:\n"
		for i := range n {
			recipe += fmt.Sprintf("  s%d: notes.search {\"q\": \"%d\"}\n", i, i)
		}
		for _, fsync := range fsyncs() {
			b.Run(fmt.Sprintf("n=%d/fsync=%s", n, fsync), func(b *testing.B) {
				_, runs := benchWorld(b, fsync)
				var ends []time.Duration
				for b.Loop() {
					start := time.Now()
					runToEnd(b, runs, recipe)
					ends = append(ends, time.Since(start))
				}
				percentiles(b, ends, "run-")
			})
		}
	}
}

// BenchmarkSustained: 64 clients each running 1-step runs back to back;
// steps per second and the p99 of a run.
func BenchmarkSustained(b *testing.B) {
	for _, fsync := range fsyncs() {
		b.Run("fsync="+fsync, func(b *testing.B) {
			_, runs := benchWorld(b, fsync)
			const clients = 64
			var mu sync.Mutex
			var lat []time.Duration
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			per := max(1, b.N/clients)
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range per {
						t0 := time.Now()
						runToEnd(b, runs, "a: notes.search {\"q\": \"x\"}\n")
						mu.Lock()
						lat = append(lat, time.Since(t0))
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "steps/s")
			percentiles(b, lat, "run-")
		})
	}
}
