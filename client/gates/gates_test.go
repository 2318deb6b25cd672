package gates

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakePlane answers GetGate from a script of replies and WatchRun with
// one event per call: enough to drive Wait through a restart.
type fakePlane struct {
	tollgatev1.UnimplementedGateServiceServer
	tollgatev1.UnimplementedRunServiceServer
	mu      sync.Mutex
	replies []func() (*tollgatev1.GetGateResponse, error)
	gets    int
	watches int
}

func (f *fakePlane) GetGate(context.Context, *tollgatev1.GetGateRequest) (*tollgatev1.GetGateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.replies[min(f.gets, len(f.replies)-1)]
	f.gets++
	return r()
}

func (f *fakePlane) WatchRun(_ *tollgatev1.WatchRunRequest, s tollgatev1.RunService_WatchRunServer) error {
	f.mu.Lock()
	f.watches++
	f.mu.Unlock()
	return s.Send(&tollgatev1.WatchRunResponse{Event: &tollgatev1.RunEvent{Cursor: "c1", Kind: tollgatev1.RunEventKind_RUN_EVENT_KIND_SNAPSHOT}})
}

func serve(t *testing.T, f *fakePlane) *Client {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	tollgatev1.RegisterGateServiceServer(srv, f)
	tollgatev1.RegisterRunServiceServer(srv, f)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Stop(); <-done })
	c := New(conn)
	c.Retry = time.Millisecond
	return c
}

func pending() (*tollgatev1.GetGateResponse, error) {
	return &tollgatev1.GetGateResponse{Gate: &tollgatev1.Gate{Outcome: tollgatev1.GateOutcome_GATE_OUTCOME_PENDING,
		Ask: &tollgatev1.Ask{StoppingPointId: "g", ExpiresAt: timestamppb.New(time.Now().Add(time.Hour))}}}, nil
}

func TestWaitOutlastsAnUnavailablePlane(t *testing.T) {
	f := &fakePlane{replies: []func() (*tollgatev1.GetGateResponse, error){
		pending,
		func() (*tollgatev1.GetGateResponse, error) { return nil, status.Error(codes.Unavailable, "restarting") },
		pending,
		func() (*tollgatev1.GetGateResponse, error) {
			return &tollgatev1.GetGateResponse{Gate: &tollgatev1.Gate{Outcome: tollgatev1.GateOutcome_GATE_OUTCOME_REJECTED,
				DecidedBy: "bob", Reason: "no", Ask: &tollgatev1.Ask{StoppingPointId: "g"}}}, nil
		},
	}}
	c := serve(t, f)
	var seen int
	d, err := c.Wait(context.Background(), "r1", "g", func(Decision) { seen++ })
	if err != nil || d.Outcome != Rejected || d.Actor != "bob" || d.Reason != "no" {
		t.Fatalf("wait: %+v %v", d, err)
	}
	if seen != 2 || f.gets != 4 || f.watches != 2 {
		t.Fatalf("progress %d, reads %d, watches %d; want 2, 4, 2", seen, f.gets, f.watches)
	}
}

func TestWaitStopsOnARefusalOrContext(t *testing.T) {
	f := &fakePlane{replies: []func() (*tollgatev1.GetGateResponse, error){
		func() (*tollgatev1.GetGateResponse, error) {
			return nil, status.Error(codes.PermissionDenied, "not yours")
		},
	}}
	c := serve(t, f)
	if _, err := c.Wait(context.Background(), "r1", "g", nil); status.Code(errors.Unwrap(err)) != codes.PermissionDenied {
		t.Fatalf("a refusal: %v", err)
	}
	f2 := &fakePlane{replies: []func() (*tollgatev1.GetGateResponse, error){pending}}
	c2 := serve(t, f2)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c2.Wait(ctx, "r1", "g", nil); err == nil {
		t.Fatal("a wait past its context returned no error")
	}
}
