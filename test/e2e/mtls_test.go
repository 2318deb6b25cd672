package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

func wantStatus(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: %v, want %v", what, err, code)
	}
}

// People and executors live on different listeners with different
// credentials, and neither can use the other's API (DESIGN.md §8).
func TestExecutorAndPersonAPIsAreApart(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A person's token cannot open an executor stream on the API listener.
	s, err := tollgatev1.NewExecutorServiceClient(w.conn(t, "alice")).Connect(ctx)
	if err == nil {
		_, err = s.Recv()
	}
	wantStatus(t, "alice opening Connect on the API listener", err, codes.Unimplemented)

	// An executor certificate cannot call the approver API on the
	// executor listener.
	exec := w.execConn(t, "edge-1")
	_, err = tollgatev1.NewRunServiceClient(exec).ListRuns(ctx, &tollgatev1.ListRunsRequest{})
	wantStatus(t, "edge-1 listing runs", err, codes.Unimplemented)
	_, err = tollgatev1.NewApprovalServiceClient(exec).Decide(ctx, &tollgatev1.DecideRequest{AskId: "r/ask_1", Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}})
	wantStatus(t, "edge-1 deciding an ask", err, codes.Unimplemented)

	// A token without a certificate does not get through the handshake
	// of the executor listener.
	tok, err := identity.Mint(w.priv, "k", "i", "a", "alice", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	roots, err := identity.ClientTLS(w.pki.Server.Cert, w.pki.Server.Key, w.pki.CA, "")
	if err != nil {
		t.Fatal(err)
	}
	noCert, err := grpc.NewClient(w.execAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots.RootCAs, MinVersion: tls.VersionTLS13})),
		grpc.WithPerRPCCredentials(identity.PerRPCCredentials{Token: tok}))
	if err != nil {
		t.Fatal(err)
	}
	defer noCert.Close()
	s, err = tollgatev1.NewExecutorServiceClient(noCert).Connect(ctx)
	if err == nil {
		_, err = s.Recv()
	}
	wantStatus(t, "a bearer token on the executor listener", err, codes.Unavailable)

	// An executor cannot claim another executor's name in its hello.
	s, err = tollgatev1.NewExecutorServiceClient(exec).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Hello{Hello: &tollgatev1.Hello{ExecutorId: "edge-2", CapacityCredits: 1}}}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	wantStatus(t, "edge-1 saying hello as edge-2", err, codes.PermissionDenied)
}

// Shutdown drains executors: a step already running finishes and its
// result is recorded before the executor listener closes.
func TestShutdownDrainsExecutors(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "  test:\n    - {name: sleep, annotations: {readOnlyHint: true}}\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.executor(t, ctx, "edge-1")
	runs := tollgatev1.NewRunServiceClient(w.conn(t, "alice"))
	resp, err := runs.StartRun(ctx, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: "nap: test.sleep {\"ms\": 300}\n"}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetRun().GetId()
	waitRun(t, runs, id, func(r *tollgatev1.Run) bool {
		for _, s := range r.GetSteps() {
			if s.GetState() == tollgatev1.StepStatus_STEP_STATUS_LEASED {
				return true
			}
		}
		return false
	})
	if err := w.stopServer(); errors.Is(err, controlplane.ErrDrainCut) {
		t.Fatal("shutdown needed its hard stop: the executor did not drain")
	}
	r, _, err := w.srv.Runner.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != engine.Complete {
		t.Fatalf("after the drain the run is %s, want complete: the running step's result was lost", r.State)
	}
}
