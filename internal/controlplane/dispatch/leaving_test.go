package dispatch

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/executor"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/grant"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// oneReplica is a dispatcher and its runner on a memory store, running
// until stop, which waits for them.
func oneReplica(t *testing.T, cfg Config) (rep *replica, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st := memstore.New(memstore.Config{})
	if err := st.Heartbeat(ctx, "cp-a", time.Hour); err != nil {
		t.Fatal(err)
	}
	cfg.Replica = "cp-a"
	d := New(cfg)
	r := runner.New(runner.Config{Store: st, Dispatcher: d, Replica: "cp-a", LeaseTTL: d.cfg.LeaseTTL})
	var running sync.WaitGroup
	running.Go(func() { _ = d.Run(ctx, r) })
	return &replica{d: d, r: r}, func() { cancel(); running.Wait() }
}

// connectAs opens a stream of executor name to rep offering x.read with
// credits; it returns once welcomed, and a func that ends the stream and
// waits for the dispatcher to be done with it.
func (rep *replica) connectAs(t *testing.T, name string, credits uint32) (*fakeStream, func()) {
	t.Helper()
	fs := newFakeStream(name)
	fs.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Hello{Hello: &tollgatev1.Hello{ExecutorId: name, CapacityCredits: credits,
		Tools: []*tollgatev1.Tool{{Server: "x", Tool: "read", Annotations: &tollgatev1.ToolAnnotations{ReadOnlyHint: true}}}}}}
	done := make(chan struct{})
	go func() { defer close(done); _ = rep.d.Connect(fs) }()
	for (<-fs.out).GetWelcome() == nil {
	}
	// The session serves once registered, just after its welcome: a step
	// offered before then goes back to the store, which no claim loop
	// reads here.
	waitFor(t, name+"'s session registered", func() bool {
		rep.d.mu.Lock()
		defer rep.d.mu.Unlock()
		for s := range rep.d.sessions {
			if s.executor == name {
				return true
			}
		}
		return false
	})
	return fs, func() { fs.closeSend(); <-done }
}

func nextLease(t *testing.T, fs *fakeStream) *tollgatev1.Lease {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m := <-fs.out:
			if l := m.GetLease(); l != nil {
				return l
			}
		case <-deadline:
			t.Fatal("timed out waiting for a lease")
		}
	}
}

func connectedIDs(d *Dispatcher) []string {
	var out []string
	for _, e := range d.Connected() {
		out = append(out, e.ID)
	}
	return out
}

// An executor that says Leaving gets no new lease, and is no longer
// listed as connected; a lease it returns (one on its way when it said
// so, never acked) goes to another executor at the same fence; a lease
// that was acked is not taken back even if returned: its executor runs it.
func TestLeavingExecutorGetsNoNewLeaseAndItsReturnedLeaseGoesElsewhere(t *testing.T) {
	defer goleak.VerifyNone(t)
	rep, stop := oneReplica(t, Config{LeaseTTL: time.Hour})
	defer stop()
	ctx := context.Background()
	fs1, end1 := rep.connectAs(t, "edge-1", 4)
	defer end1()
	fs2, end2 := rep.connectAs(t, "edge-2", 1)
	defer end2()

	p := &plan.Plan{Name: "one", InitialSteps: []plan.Step{{ID: "s", Kind: plan.KindTool, Server: "x", Tool: "read", Args: plan.Object(`{}`), OnFail: plan.OnFailStop}}}
	if _, _, err := rep.r.Start(ctx, runner.StartRequest{Plan: p, Requester: "alice"}); err != nil {
		t.Fatal(err)
	}
	l := nextLease(t, fs1) // the executor with the most credits
	fs1.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Leaving{Leaving: &tollgatev1.Leaving{}}}
	waitFor(t, "edge-1 no longer listed", func() bool { ids := connectedIDs(rep.d); return len(ids) == 1 && ids[0] == "edge-2" })
	fs1.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Leaving{Leaving: &tollgatev1.Leaving{
		Returned: []*tollgatev1.LeaseRef{{LeaseId: l.GetLeaseId(), Fence: l.GetFence()}}}}}
	again := nextLease(t, fs2)
	if again.GetLeaseId() != l.GetLeaseId() || again.GetFence() != l.GetFence() {
		t.Fatalf("edge-2 got %s@%d, want the returned %s@%d", again.GetLeaseId(), again.GetFence(), l.GetLeaseId(), l.GetFence())
	}

	// edge-2 acks it, then (leaving too) returns it: it stays edge-2's.
	fs2.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Ack{Ack: &tollgatev1.Ack{LeaseId: again.GetLeaseId(), Fence: again.GetFence()}}}
	waitFor(t, "the ack recorded", func() bool {
		rep.d.mu.Lock()
		defer rep.d.mu.Unlock()
		x := rep.d.leases[again.GetLeaseId()]
		return x != nil && x.acked
	})
	fs2.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Leaving{Leaving: &tollgatev1.Leaving{
		Returned: []*tollgatev1.LeaseRef{{LeaseId: again.GetLeaseId(), Fence: again.GetFence()}}}}}
	waitFor(t, "edge-2 no longer listed", func() bool { return len(connectedIDs(rep.d)) == 0 })
	rep.d.mu.Lock()
	x := rep.d.leases[again.GetLeaseId()]
	rep.d.mu.Unlock()
	if x == nil || x.s.executor != "edge-2" {
		t.Fatal("an acked lease was taken back from the executor running it")
	}
	if w := rep.d.Wants(); len(w) != 0 {
		t.Fatalf("with every executor leaving the replica still wants work: %v", w)
	}
	for _, fs := range []*fakeStream{fs1, fs2} {
		for len(fs.out) > 0 {
			if m := <-fs.out; m.GetLease() != nil {
				t.Fatalf("a lease went to a leaving executor: %v", m)
			}
		}
	}
}

// payHost hosts x.pay, a side effect, whose call blocks until release.
type payHost struct {
	entered chan struct{}
	release chan struct{}
	calls   atomic.Int32
}

func (h *payHost) Tools() []executor.ToolSpec { return []executor.ToolSpec{{Server: "x", Name: "pay"}} }

func (h *payHost) Call(ctx context.Context, _, _ string, _ json.RawMessage, _ string) (json.RawMessage, error) {
	h.calls.Add(1)
	h.entered <- struct{}{}
	select {
	case <-h.release:
		return json.RawMessage(`{"paid":true}`), nil
	case <-ctx.Done():
		return nil, &executor.TransportError{Message: "cancelled", OutcomeUnknown: true}
	}
}

// principal gives every stream the identity of executor edge-1, as the
// mTLS listener would, and counts the leases sent on it.
type principal struct {
	grpc.ServerStream
	ctx    context.Context
	leases *atomic.Int32
}

func (p principal) Context() context.Context { return p.ctx }

func (p principal) SendMsg(m any) error {
	if cm, ok := m.(*tollgatev1.ControlMessage); ok && cm.GetLease() != nil {
		p.leases.Add(1)
	}
	return p.ServerStream.SendMsg(m)
}

// The executor binary's SIGTERM, against the real dispatcher over gRPC:
// a side effect the executor runs when its context ends finishes and its
// result is recorded (succeeded, not in doubt); while it drains, a new
// run's step is not leased to it (nobody here serves it); once its lease
// is done it says Drained and the dispatcher ends the stream.
func TestExecutorLeavingOverGRPCFinishesItsSideEffect(t *testing.T) {
	defer goleak.VerifyNone(t)
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	rep, stop := oneReplica(t, Config{LeaseTTL: 3 * time.Second, SigningKey: priv, KeyID: "cp"})
	defer stop()

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int32 // leases sent to edge-1
	srv := grpc.NewServer(grpc.StreamInterceptor(func(s any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(s, principal{ss, identity.WithPrincipal(ss.Context(), identity.Principal{Subject: "edge-1", Kind: identity.KindExecutor}), &sent})
	}))
	tollgatev1.RegisterExecutorServiceServer(srv, rep.d)
	var serving sync.WaitGroup
	serving.Go(func() { _ = srv.Serve(lis) })
	defer func() { srv.Stop(); serving.Wait() }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := tollgatev1.NewExecutorServiceClient(conn)

	host := &payHost{entered: make(chan struct{}, 4), release: make(chan struct{})}
	st := &executor.Status{}
	ectx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	done := make(chan error, 1)
	go func() {
		done <- executor.Run(ectx, executor.Config{ID: "edge-1", Capacity: 4, Host: host, Status: st, DrainTimeout: time.Minute,
			Grants: grant.NewVerifier(map[string]ed25519.PublicKey{"cp": pub}),
			Connect: func(ctx context.Context) (tollgatev1.ExecutorService_ConnectClient, error) {
				return client.Connect(ctx)
			}})
	}()
	waitFor(t, "edge-1 connected", func() bool { ok, _ := st.Ready(); return ok && len(connectedIDs(rep.d)) == 1 })

	ctx := context.Background()
	pay := &plan.Plan{Name: "pay", InitialSteps: []plan.Step{{ID: "pay", Kind: plan.KindTool, Server: "x", Tool: "pay", Args: plan.Object(`{}`),
		SideEffect: true, WithoutAsking: true, OnFail: plan.OnFailStop}}}
	run1, _, err := rep.r.Start(ctx, runner.StartRequest{Plan: pay, Requester: "alice", RequestID: "one"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-host.entered: // its Start is recorded: a side effect under way
	case <-time.After(5 * time.Second):
		t.Fatal("the side effect was not invoked")
	}

	sigterm()
	waitFor(t, "the dispatcher to hear edge-1 is leaving", func() bool { return len(connectedIDs(rep.d)) == 0 })
	if ok, why := st.Ready(); ok || why != "draining" {
		t.Fatalf("readiness while leaving: %v %q", ok, why)
	}
	run2, _, err := rep.r.Start(ctx, runner.StartRequest{Plan: pay, Requester: "alice", RequestID: "two"})
	if err != nil {
		t.Fatal(err)
	}

	close(host.release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("executor: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the executor did not stop once its lease was done")
	}
	waitFor(t, "the stream closed on the dispatcher", func() bool {
		rep.d.mu.Lock()
		defer rep.d.mu.Unlock()
		return len(rep.d.sessions) == 0
	})

	r1, _, err := rep.r.Get(ctx, run1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s := r1.Steps["pay"]; s.Status != engine.StatusSucceeded || s.Attempt != 1 {
		t.Fatalf("the side effect under way at SIGTERM is %s at attempt %d, want succeeded at 1 (recorded, not in doubt)", s.Status, s.Attempt)
	}
	r2, _, err := rep.r.Get(ctx, run2.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range r2.Steps["pay"].Attempts {
		if a.Executor == "edge-1" {
			t.Fatalf("a run started while edge-1 drained was leased to it: %+v", a)
		}
	}
	if n := host.calls.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
	if n := sent.Load(); n != 1 {
		t.Fatalf("%d leases were sent to edge-1, want 1: none after it said it was leaving", n)
	}
}
