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
