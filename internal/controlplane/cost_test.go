package controlplane

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/internal/store/redisstore"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// widePlan is a plan of n independent read-only steps: the widest run a
// recipe can ask for, each step runnable at the start.
func widePlan(n int, name string) *plan.Plan {
	p := &plan.Plan{Name: name}
	for i := range n {
		p.InitialSteps = append(p.InitialSteps, plan.Step{ID: fmt.Sprintf("s%05d", i), Kind: plan.KindTool,
			Server: "nowhere", Tool: "read", Args: plan.Object(`{}`), OnFail: plan.OnFailStop})
	}
	return p
}

// countingStore counts the commits and the run bytes written through it.
type countingStore struct {
	store.Store
	mu      sync.Mutex
	commits int
	bytes   int
}

func (c *countingStore) Commit(ctx context.Context, cm store.Commit) error {
	c.mu.Lock()
	c.commits++
	c.bytes += len(cm.Run.Data)
	c.mu.Unlock()
	return c.Store.Commit(ctx, cm)
}

func (c *countingStore) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.commits, c.bytes
}

// startWide starts a run of n independent steps with no executor that
// offers their tool, and returns the commits and run bytes it took to
// reach "every step blocked".
func startWide(t testing.TB, n int) (commits, bytes int) {
	st := &countingStore{Store: memstore.New(memstore.Config{})}
	r := runner.New(runner.Config{Store: st})
	run, _, err := r.Start(context.Background(), runner.StartRequest{Plan: widePlan(n, "wide"), Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := r.Get(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != engine.Blocked {
		t.Fatalf("run is %s, want blocked", got.State)
	}
	for id, s := range got.Steps {
		if !s.Blocked {
			t.Fatalf("step %s is not blocked", id)
		}
	}
	return st.counts()
}

// Item 11: starting a run costs in proportion to its steps. Counters, not
// clocks: twice the steps may take at most a constant number of commits
// and about twice the bytes written, never four times.
func TestItem11_StartRunIsLinearInSteps(t *testing.T) {
	c1, b1 := startWide(t, 200)
	c2, b2 := startWide(t, 400)
	t.Logf("200 steps: %d commits, %d bytes; 400 steps: %d commits, %d bytes", c1, b1, c2, b2)
	if c2 > c1 {
		t.Errorf("commits grow with steps: %d for 200 steps, %d for 400", c1, c2)
	}
	if float64(b2) > 2.2*float64(b1) {
		t.Errorf("bytes written grow faster than steps: %d for 200 steps, %d for 400 (×%.1f)", b1, b2, float64(b2)/float64(b1))
	}
}

// BenchmarkStartRun10kSteps starts a run of 10,000 independent steps that
// no executor offers, until every step is blocked: Memory is the engine's
// and the runner's cost alone; Redis adds a real redis-server
// (appendfsync always).
func BenchmarkStartRun10kSteps(b *testing.B) {
	p := widePlan(10000, "wide")
	bench := func(b *testing.B, st store.Store) {
		r := runner.New(runner.Config{Store: st})
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := r.Start(context.Background(), runner.StartRequest{Plan: p, Requester: "alice"}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("Memory", func(b *testing.B) { bench(b, memstore.New(memstore.Config{})) })
	b.Run("Redis", func(b *testing.B) {
		srv := redistest.Start(b)
		st, err := redisstore.New(context.Background(), redisstore.Config{URL: srv.URL()})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		bench(b, st)
	})
}

// stubExec takes every offer and reports its lease, start and result in
// one Events call, as an executor of instant read-only tools would.
type stubExec struct{}

func (x *stubExec) Offer(ctx context.Context, rec runner.Recorder, runID string, d engine.Dispatch) bool {
	go func() {
		_, _ = rec.Events(context.WithoutCancel(ctx), runID,
			func(now time.Time) engine.Event {
				return engine.StepLeased{Step: d.Step, Attempt: d.Attempt, Executor: "stub", LeaseID: d.Step, At: now}
			},
			func(now time.Time) engine.Event { return engine.StepStarted{Step: d.Step, Attempt: d.Attempt, At: now} },
			func(now time.Time) engine.Event {
				return engine.StepSucceeded{Step: d.Step, Attempt: d.Attempt, Output: []byte(`{"ok":true}`), At: now}
			})
	}()
	return true
}

func (x *stubExec) Cancel(context.Context, string, engine.CancelStep) {}

func (x *stubExec) Serves(engine.Target) bool { return true }

func (x *stubExec) Holding(string) bool { return false }

func (x *stubExec) Free(engine.Target) int { return 1 << 20 }

// runWide runs a plan of n independent steps to completion with a stub
// executor and returns the commits and run bytes written.
func runWide(t testing.TB, st *countingStore, n int) (commits, bytes int) {
	x := &stubExec{}
	r := runner.New(runner.Config{Store: st, Dispatcher: x})
	w := r.Follow(runner.AnyRun)
	defer w.Stop()
	if _, _, err := r.Start(context.Background(), runner.StartRequest{Plan: widePlan(n, "wide"), Requester: "alice"}); err != nil {
		t.Fatal(err)
	}
	for {
		if l := w.Latest(); l != nil && l.State.Terminal() {
			if l.State != engine.Complete {
				t.Fatalf("run %s: %s", l.State, l.Reason)
			}
			return st.counts()
		}
		<-w.C()
	}
}

// BenchmarkRun10kStepsToCompletion runs 10,000 independent steps to
// completion with a stub executor (memstore): every lease and result is a
// transition of a 10,000-step run.
func BenchmarkRun10kStepsToCompletion(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		st := &countingStore{Store: memstore.New(memstore.Config{})}
		c, by := runWide(b, st, 10000)
		b.ReportMetric(float64(c), "commits/op")
		b.ReportMetric(float64(by)/(1<<20), "MiB-written/op")
	}
}

// acceptAll takes every offer and reports nothing.
type acceptAll struct{}

func (acceptAll) Offer(context.Context, runner.Recorder, string, engine.Dispatch) bool { return true }
func (acceptAll) Cancel(context.Context, string, engine.CancelStep)                    {}
func (acceptAll) Serves(engine.Target) bool                                            { return true }
func (acceptAll) Free(engine.Target) int                                               { return 1 << 20 }
func (acceptAll) Holding(string) bool                                                  { return false }

// leaseBytes starts a run of n queued steps and returns the bytes
// allocated to commit k of their leases in one batch.
func leaseBytes(t *testing.T, n, k int) uint64 {
	r := runner.New(runner.Config{Store: memstore.New(memstore.Config{}), Dispatcher: acceptAll{}})
	ctx := context.Background()
	run, _, err := r.Start(ctx, runner.StartRequest{Plan: widePlan(n, "wide"), Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	builds := make([]func(time.Time) engine.Event, k)
	for i := range builds {
		step := fmt.Sprintf("s%05d", i)
		builds[i] = func(now time.Time) engine.Event {
			return engine.StepLeased{Step: step, Attempt: 1, Executor: "x", LeaseID: step, At: now}
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := r.Events(ctx, run.ID, builds...); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Item 11: a transition costs what it changed, not the run's size. On a
// run of 4,000 steps, each further lease in a batch may allocate a few
// kilobytes (its records, its copy of one step), not a copy of the run
// (counted in bytes allocated, not time).
func TestItem11_TransitionCostFollowsWhatChanged(t *testing.T) {
	const n = 4000
	b1, b2 := leaseBytes(t, n, 50), leaseBytes(t, n, 250)
	per := (int64(b2) - int64(b1)) / 200
	t.Logf("run of %d steps: 50 leases %d B, 250 leases %d B: %d B per further lease", n, b1, b2, per)
	if per > 16<<10 {
		t.Errorf("each lease on a run of %d steps allocates %d B: the transition copies the run", n, per)
	}
}
