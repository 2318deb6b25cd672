package dispatch

import (
	"context"
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
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// slowReadHost hosts x.read (read-only, as connectAs advertises it): a
// call runs until its context ends, as a long read cut short does.
type slowReadHost struct{ entered chan struct{} }

func (h *slowReadHost) Tools() []executor.ToolSpec {
	return []executor.ToolSpec{{Server: "x", Name: "read", ReadOnly: true}}
}

func (h *slowReadHost) Call(ctx context.Context, _, _ string, _ json.RawMessage, _ string) (json.RawMessage, error) {
	h.entered <- struct{}{}
	<-ctx.Done()
	// What MCPHost.Call says when the call's context ends mid-call.
	return nil, &executor.TransportError{Message: "x.read: " + ctx.Err().Error(), OutcomeUnknown: true}
}

// serveEdge1 serves rep's executor service over gRPC to an executor
// authenticated as edge-1; it returns a client and a func that stops it.
func serveEdge1(t *testing.T, rep *replica) (tollgatev1.ExecutorServiceClient, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int32
	srv := grpc.NewServer(grpc.StreamInterceptor(func(s any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(s, principal{ss, identity.WithPrincipal(ss.Context(), identity.Principal{Subject: "edge-1", Kind: identity.KindExecutor}), &sent})
	}))
	tollgatev1.RegisterExecutorServiceServer(srv, rep.d)
	var serving sync.WaitGroup
	serving.Go(func() { _ = srv.Serve(lis) })
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	return tollgatev1.NewExecutorServiceClient(conn), func() { _ = conn.Close(); srv.Stop(); serving.Wait() }
}

// A read-only step still running when its executor's drain timeout
// passes is abandoned: nothing is lost by running it again, so it must
// be offered again (to edge-2 here), as it is when the executor dies
// outright. Reported as a plain transport error, it fails the step (and,
// on_fail stop, the run): a graceful stop does more harm than a crash.
func TestReview_ReadOnlyLeaseAbandonedAtDrainTimeoutIsLeasedAgain(t *testing.T) {
	defer goleak.VerifyNone(t)
	rep, stop := oneReplica(t, Config{LeaseTTL: time.Hour})
	defer stop()
	client, stopServing := serveEdge1(t, rep)
	defer stopServing()

	host := &slowReadHost{entered: make(chan struct{}, 4)}
	st := &executor.Status{}
	ectx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	done := make(chan error, 1)
	go func() {
		done <- executor.Run(ectx, executor.Config{ID: "edge-1", Capacity: 4, Host: host, Status: st, DrainTimeout: 50 * time.Millisecond,
			Connect: func(ctx context.Context) (tollgatev1.ExecutorService_ConnectClient, error) {
				return client.Connect(ctx)
			}})
	}()
	waitFor(t, "edge-1 connected", func() bool { ok, _ := st.Ready(); return ok && len(connectedIDs(rep.d)) == 1 })

	ctx := context.Background()
	p := &plan.Plan{Name: "one", InitialSteps: []plan.Step{{ID: "s", Kind: plan.KindTool, Server: "x", Tool: "read", Args: plan.Object(`{}`), OnFail: plan.OnFailStop}}}
	run, _, err := rep.r.Start(ctx, runner.StartRequest{Plan: p, Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-host.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the read was not invoked")
	}
	fs2, end2 := rep.connectAs(t, "edge-2", 1) // somewhere for the step to go
	defer end2()
	waitFor(t, "edge-2 registered", func() bool { return len(connectedIDs(rep.d)) == 2 })

	sigterm()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the executor did not stop after its drain timeout")
	}
	var again *tollgatev1.Lease
	select {
	case m := <-fs2.out:
		again = m.GetLease()
	case <-time.After(5 * time.Second):
	}
	r, _, err := rep.r.Get(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	s := r.Steps["s"]
	if s.Status == engine.StatusFailed || again == nil || again.GetAttempt() != 2 {
		t.Fatalf("the read abandoned at the drain timeout is %s at attempt %d (run %s), lease to edge-2: %v; want it leased again at attempt 2",
			s.Status, s.Attempt, r.State, again)
	}
}

// A leaving executor's Leaving takes back only its own never-acked
// leases at their fences: not another executor's, not one at a stale or
// future fence, not an unknown id; duplicates and repeated Leavings change
// nothing; and once a lease is handed back, what the executor still says
// about it (heartbeat, ack, start, result) is refused, not recorded, while
// the lease runs elsewhere.
func TestReview_LeavingReturnsOnlyItsOwnUnackedLeases(t *testing.T) {
	defer goleak.VerifyNone(t)
	rep, stop := oneReplica(t, Config{LeaseTTL: time.Hour})
	defer stop()
	ctx := context.Background()
	p := &plan.Plan{Name: "one", InitialSteps: []plan.Step{{ID: "s", Kind: plan.KindTool, Server: "x", Tool: "read", Args: plan.Object(`{}`), OnFail: plan.OnFailStop}}}
	start := func() {
		if _, _, err := rep.r.Start(ctx, runner.StartRequest{Plan: p, Requester: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	// connectAs returns at the welcome; the session serves a moment
	// later (and a step offered before then waits in the store).
	registered := func(n int) {
		waitFor(t, "the session registered", func() bool { return len(connectedIDs(rep.d)) == n })
	}
	fs1, end1 := rep.connectAs(t, "edge-1", 4)
	defer end1()
	registered(1)
	start()
	mine := nextLease(t, fs1) // edge-1's, never acked
	fs2, end2 := rep.connectAs(t, "mallory", 4)
	defer end2()
	registered(2)
	start()
	theirs := nextLease(t, fs2) // mallory has the most credits now
	holder := func(id string) string {
		rep.d.mu.Lock()
		defer rep.d.mu.Unlock()
		if l := rep.d.leases[id]; l != nil {
			return l.s.executor
		}
		return ""
	}
	ref := func(l *tollgatev1.Lease, fence uint64) *tollgatev1.LeaseRef {
		return &tollgatev1.LeaseRef{LeaseId: l.GetLeaseId(), Fence: fence}
	}
	leaving := func(fs *fakeStream, refs ...*tollgatev1.LeaseRef) {
		fs.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Leaving{Leaving: &tollgatev1.Leaving{Returned: refs}}}
	}
	f1, f2 := mine.GetFence(), theirs.GetFence()
	leaving(fs2, ref(mine, f1), ref(mine, f1), ref(theirs, f2-1), ref(theirs, f2+1), ref(theirs, 1<<63), &tollgatev1.LeaseRef{})
	leaving(fs2, ref(mine, f1))
	leaving(fs1, ref(theirs, f2), ref(theirs, f2), ref(mine, f1-1), ref(mine, f1+1), &tollgatev1.LeaseRef{LeaseId: "no/such/1", Fence: 1})
	waitFor(t, "both leaving", func() bool { return len(connectedIDs(rep.d)) == 0 })
	// A heartbeat after the Leavings: handled once they are.
	fs1.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Heartbeat{Heartbeat: &tollgatev1.Heartbeat{}}}
	fs2.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Heartbeat{Heartbeat: &tollgatev1.Heartbeat{}}}
	waitFor(t, "the streams read", func() bool { return len(fs1.in) == 0 && len(fs2.in) == 0 })
	if got := holder(mine.GetLeaseId()); got != "edge-1" {
		t.Fatalf("edge-1's lease is held by %q after others' Leavings named it", got)
	}
	if got := holder(theirs.GetLeaseId()); got != "mallory" {
		t.Fatalf("mallory's lease is held by %q after others' Leavings named it", got)
	}

	// edge-1 hands back its own lease (twice); a third executor gets it.
	fs3, end3 := rep.connectAs(t, "edge-3", 1)
	defer end3()
	registered(1)
	leaving(fs1, ref(mine, f1), ref(mine, f1))
	if again := nextLease(t, fs3); again.GetLeaseId() != mine.GetLeaseId() || again.GetFence() != f1 {
		t.Fatalf("edge-3 got %s@%d, want the returned %s@%d", again.GetLeaseId(), again.GetFence(), mine.GetLeaseId(), f1)
	}
	// What edge-1 says about it now is refused; it stays edge-3's.
	id := mine.GetLeaseId()
	fs1.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Heartbeat{Heartbeat: &tollgatev1.Heartbeat{Leases: []*tollgatev1.LeaseRef{ref(mine, f1)}}}}
	fs1.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Ack{Ack: &tollgatev1.Ack{LeaseId: id, Fence: f1}}}
	fs1.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Start{Start: &tollgatev1.Start{LeaseId: id, Fence: f1}}}
	fs1.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Result{Result: &tollgatev1.Result{LeaseId: id, Fence: f1,
		Outcome: &tollgatev1.Result_OutputJson{OutputJson: `{"forged":true}`}}}}
	refused, startAnswered := 0, false
	for refused < 2 || !startAnswered {
		select {
		case m := <-fs1.out:
			switch {
			case m.GetRefused() != nil:
				refused++
			case m.GetStartAck() != nil:
				if m.GetStartAck().GetDurable() {
					t.Fatal("a start for a lease edge-1 handed back was recorded durable")
				}
				startAnswered = true
			case m.GetLease() != nil:
				t.Fatalf("a lease went to a leaving executor: %v", m)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("timed out: %d refusals, start answered %v", refused, startAnswered)
		}
	}
	if got := holder(id); got != "edge-3" {
		t.Fatalf("after edge-1's messages the lease is held by %q, want edge-3", got)
	}
	runID, _, _, _ := runner.ParseWorkID(id)
	r, _, err := rep.r.Get(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Steps["s"]; s.Status != engine.StatusQueued && s.Status != engine.StatusLeased {
		t.Fatalf("a forged result of a handed-back lease was recorded: step %s", s.Status)
	}
}

// A lease cancelled on its way to an executor that is leaving (its run
// ended, or its step was cancelled while queued) and then handed back is
// not offered to anyone else: the engine no longer wants that attempt,
// and a read-only step's tool would run on the next executor before its
// ack is refused.
func TestReview_ReturnedLeaseWhoseCancelWasSentIsNotOfferedAgain(t *testing.T) {
	defer goleak.VerifyNone(t)
	rep, stop := oneReplica(t, Config{LeaseTTL: time.Hour})
	defer stop()
	ctx := context.Background()
	fs1, end1 := rep.connectAs(t, "edge-1", 4)
	defer end1()
	waitFor(t, "edge-1 registered", func() bool { return len(connectedIDs(rep.d)) == 1 })
	p := &plan.Plan{Name: "one", InitialSteps: []plan.Step{{ID: "s", Kind: plan.KindTool, Server: "x", Tool: "read", Args: plan.Object(`{}`), OnFail: plan.OnFailStop}}}
	run, _, err := rep.r.Start(ctx, runner.StartRequest{Plan: p, Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	l := nextLease(t, fs1)
	_, end2 := rep.connectAs(t, "edge-2", 1)
	defer end2()
	waitFor(t, "edge-2 registered", func() bool { return len(connectedIDs(rep.d)) == 2 })

	// edge-1 says Leaving as alice cancels the run; the lease crossed
	// both, so edge-1 hands it back.
	fs1.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Leaving{Leaving: &tollgatev1.Leaving{}}}
	if _, err := rep.r.Event(ctx, run.ID, func(now time.Time) engine.Event { return engine.Cancel{Actor: "alice", Reason: "not needed", At: now} }); err != nil {
		t.Fatal(err)
	}
	fs1.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Leaving{Leaving: &tollgatev1.Leaving{
		Returned: []*tollgatev1.LeaseRef{{LeaseId: l.GetLeaseId(), Fence: l.GetFence()}}}}}
	fs1.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Heartbeat{Heartbeat: &tollgatev1.Heartbeat{}}}
	waitFor(t, "the Leavings handled", func() bool { return len(fs1.in) == 0 })
	rep.d.mu.Lock()
	again := rep.d.leases[l.GetLeaseId()]
	rep.d.mu.Unlock()
	if again != nil {
		t.Fatalf("the lease of a cancelled run, handed back, was leased again to %s", again.s.executor)
	}
	r, _, err := rep.r.Get(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !r.State.Terminal() {
		t.Fatalf("the run is %s, want it cancelled", r.State)
	}
}
