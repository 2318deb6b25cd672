package runner

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// acceptAll takes every offer and reports nothing: the test records the
// leases itself.
type acceptAll struct{}

func (acceptAll) Offer(context.Context, Recorder, string, engine.Dispatch) bool { return true }
func (acceptAll) Cancel(context.Context, string, engine.CancelStep)             {}
func (acceptAll) Serves(engine.Target) bool                                     { return true }
func (acceptAll) Free(engine.Target) int                                        { return 1 << 20 }
func (acceptAll) Holding(string) bool                                           { return false }

// flakyAlive is a store whose liveness reads fail while down is set: the
// store is unreachable in the middle of recovery.
type flakyAlive struct {
	store.Store
	down atomic.Bool
}

func (f *flakyAlive) Alive(ctx context.Context, replica string) (bool, error) {
	if f.down.Load() {
		return false, store.ErrUnavailable
	}
	return f.Store.Alive(ctx, replica)
}

// leasedRun starts a one-step run through r and records its step leased
// by replica.
func leasedRun(t *testing.T, r *Runner, replica string) string {
	t.Helper()
	p := &plan.Plan{Name: "one", InitialSteps: []plan.Step{{ID: "s", Kind: plan.KindTool, Server: "x", Tool: "read", Args: plan.Object(`{}`), OnFail: plan.OnFailStop}}}
	run, _, err := r.Start(context.Background(), StartRequest{Plan: p, Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Event(context.Background(), run.ID, func(now time.Time) engine.Event {
		return engine.StepLeased{Step: "s", Attempt: 1, Executor: "edge", LeaseID: "l", Replica: replica, At: now}
	}); err != nil {
		t.Fatal(err)
	}
	return run.ID
}

func stepState(t *testing.T, r *Runner, id string) (engine.StepStatus, int) {
	t.Helper()
	run, _, err := r.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return run.Steps["s"].Status, run.Steps["s"].Attempt
}

// Leases belong to live replicas, against an unlucky operator: a replica
// starting while the store cannot say who is alive must not guess "dead"
// (it would put a live side effect in doubt); it waits and looks again.
// A lease of a replica that is alive stays its own; a lease of a replica
// that left, or that records no replica (older runs), is lost at once.
func TestRecoverLeavesLiveLeasesAndWaitsOutAnOutage(t *testing.T) {
	ctx := context.Background()
	st := &flakyAlive{Store: memstore.New(memstore.Config{})}
	a := New(Config{Store: st, Dispatcher: acceptAll{}, Replica: "cp-a"})
	if err := st.Heartbeat(ctx, "cp-a", time.Hour); err != nil {
		t.Fatal(err)
	}
	live := leasedRun(t, a, "cp-a")
	legacy := leasedRun(t, a, "")
	own := leasedRun(t, a, "cp-b")

	b := New(Config{Store: st, Dispatcher: acceptAll{}, Replica: "cp-b"})
	st.down.Store(true)
	if err := b.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if s, n := stepState(t, b, live); s != engine.StatusLeased || n != 1 {
		t.Fatalf("with the store's liveness unreadable, a live replica's lease went %s (attempt %d)", s, n)
	}
	if s, n := stepState(t, b, legacy); s != engine.StatusQueued || n != 2 {
		t.Fatalf("a lease that names no replica: %s attempt %d, want re-queued as attempt 2", s, n)
	}
	if s, n := stepState(t, b, own); s != engine.StatusLeased || n != 1 {
		t.Fatalf("b's own lease: %s attempt %d, want left alone", s, n)
	}

	st.down.Store(false)
	b.Takeover(ctx) // the store answers; cp-a is still alive
	if s, _ := stepState(t, b, live); s != engine.StatusLeased {
		t.Fatalf("a live replica's lease after the outage: %s", s)
	}
	if err := st.Leave(ctx, "cp-a"); err != nil { // cp-a drained and left
		t.Fatal(err)
	}
	b.Takeover(ctx)
	if s, n := stepState(t, b, live); s != engine.StatusQueued || n != 2 {
		t.Fatalf("once cp-a is gone its lease is lost and re-queued: %s attempt %d", s, n)
	}
	b.Takeover(ctx) // nothing left to await: a no-op
	if s, n := stepState(t, b, live); s != engine.StatusQueued || n != 2 {
		t.Fatalf("a second takeover changed the run: %s attempt %d", s, n)
	}
}
