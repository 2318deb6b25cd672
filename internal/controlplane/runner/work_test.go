package runner

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// servesNothing is a dispatcher with no executor here.
type servesNothing struct{ acceptAll }

func (servesNothing) Serves(engine.Target) bool { return false }

func claims(t *testing.T, st store.Store) map[string]string {
	t.Helper()
	ws, err := st.ClaimedWork(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, w := range ws {
		out[w.Queue+" "+w.ID] = w.Owner
	}
	return out
}

// Runnable steps live in the store: a step queued here is claimed here in
// its own commit when this replica serves it, and waits for any claimer
// when it does not; once leased, the attempt's entry moves to the lease
// queue under the replica holding it, moves with the lease, and is gone
// when the attempt ends.
func TestStepWorkFollowsTheAttempt(t *testing.T) {
	ctx := context.Background()
	p := &plan.Plan{Name: "one", InitialSteps: []plan.Step{{ID: "s", Kind: plan.KindTool, Server: "x", Tool: "read", Args: plan.Object(`{}`), OnFail: plan.OnFailStop}}}
	st := memstore.New(memstore.Config{})
	a := New(Config{Store: st, Dispatcher: acceptAll{}, Replica: "cp-a"})
	run, _, err := a.Start(ctx, StartRequest{Plan: p, Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	id := WorkID(run.ID, "s", 1)
	if got := claims(t, st); len(got) != 1 || got["tool:x.read "+id] != "cp-a" {
		t.Fatalf("queued where it is served: %v, want claimed by cp-a in tool:x.read", got)
	}
	ev := func(build func(now time.Time) engine.Event) {
		t.Helper()
		if _, err := a.Event(ctx, run.ID, build); err != nil {
			t.Fatal(err)
		}
	}
	ev(func(now time.Time) engine.Event {
		return engine.StepLeased{Step: "s", Attempt: 1, Executor: "edge-1", LeaseID: id, Replica: "cp-a", At: now}
	})
	if got := claims(t, st); len(got) != 1 || got[LeaseQueue+" "+id] != "cp-a" {
		t.Fatalf("leased: %v, want in the lease queue owned by cp-a", got)
	}
	ev(func(now time.Time) engine.Event {
		return engine.LeaseMoved{Step: "s", Attempt: 1, Executor: "edge-1", From: "cp-a", Replica: "cp-b", At: now}
	})
	if got := claims(t, st); len(got) != 1 || got[LeaseQueue+" "+id] != "cp-b" {
		t.Fatalf("moved: %v, want owned by cp-b", got)
	}
	ev(func(now time.Time) engine.Event {
		return engine.StepSucceeded{Step: "s", Attempt: 1, Output: []byte(`{}`), At: now}
	})
	if got := claims(t, st); len(got) != 0 {
		t.Fatalf("done: %v, want no entry", got)
	}

	// Not served here: it waits for any replica, and the run is blocked
	// only when no live replica serves the tool.
	b := New(Config{Store: st, Dispatcher: servesNothing{}, Replica: "cp-b"})
	run2, _, err := b.Start(ctx, StartRequest{Plan: p, Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.WaitingWork(ctx, "tool:x.read", 10)
	if err != nil || len(w) != 1 || w[0].ID != WorkID(run2.ID, "s", 1) {
		t.Fatalf("waiting: %+v %v", w, err)
	}
	if got, _, _ := b.Get(ctx, run2.ID); got.State != engine.Blocked {
		t.Fatalf("nobody serves x.read: run %s, want blocked", got.State)
	}
	if err := a.Announce(ctx, []string{"tool:x.read"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := b.Announce(ctx, nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	run3, _, err := b.Start(ctx, StartRequest{Plan: p, Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := b.Get(ctx, run3.ID); got.State == engine.Blocked {
		t.Fatal("cp-a serves x.read, yet a run started through cp-b is blocked")
	}
	// cp-a claims it and offers it to its dispatcher.
	if n, err := a.Claim(ctx, "tool:x.read", 10); err != nil || n != 2 {
		t.Fatalf("cp-a claimed %d, %v; want both waiting steps", n, err)
	}
	if got := claims(t, st); got["tool:x.read "+WorkID(run3.ID, "s", 1)] != "cp-a" {
		t.Fatalf("after the claim: %v", got)
	}
}

func TestParseWorkIDRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		id        string
		run, step string
		attempt   int
		ok        bool
	}{
		{"r1/s/1", "r1", "s", 1, true},
		{"r1/a/b/12", "r1", "a/b", 12, true},
		{"r1/s/01", "", "", 0, false}, // not what WorkID writes
		{"r1/s", "", "", 0, false},
		{"/s/1", "", "", 0, false},
		{"r1//1", "", "", 0, false},
		{"r1/s/x", "", "", 0, false},
	} {
		run, step, n, ok := ParseWorkID(tc.id)
		if ok != tc.ok || run != tc.run || step != tc.step || n != tc.attempt {
			t.Errorf("ParseWorkID(%q) = %q %q %d %v", tc.id, run, step, n, ok)
		}
	}
}

func FuzzParseWorkID(f *testing.F) {
	f.Add("r1", "s", 3)
	f.Fuzz(func(t *testing.T, run, step string, n int) {
		id := WorkID(run, step, n)
		r, s, a, ok := ParseWorkID(id)
		if ok && WorkID(r, s, a) != id {
			t.Fatalf("%q parsed to %q %q %d", id, r, s, a)
		}
	})
}

// A run from before work queues existed holds a queued step no entry
// names: Recover gives it one, so a replica that serves it claims it.
func TestRecoverGivesOlderRunsTheirWork(t *testing.T) {
	ctx := context.Background()
	p := &plan.Plan{Name: "one", InitialSteps: []plan.Step{{ID: "s", Kind: plan.KindTool, Server: "x", Tool: "read", Args: plan.Object(`{}`), OnFail: plan.OnFailStop}}}
	st := memstore.New(memstore.Config{})
	old := New(Config{Store: st, Dispatcher: servesNothing{}, Replica: "cp-old"})
	run, _, err := old.Start(ctx, StartRequest{Plan: p, Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	ref := store.WorkRef{Queue: "tool:x.read", ID: WorkID(run.ID, "s", 1), RunID: run.ID}
	if err := st.FinishWork(ctx, []store.WorkRef{ref}); err != nil { // as the previous version left it
		t.Fatal(err)
	}
	a := New(Config{Store: st, Dispatcher: &credits{n: 4}, Replica: "cp-a"})
	if err := a.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Claim(ctx, "tool:x.read", 4); err != nil || n != 1 {
		t.Fatalf("after Recover cp-a claimed %d, %v; want the older run's step", n, err)
	}
}
