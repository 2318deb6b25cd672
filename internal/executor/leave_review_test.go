package executor

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// An executor whose stream breaks while it leaves opens the next one
// with no credits, naming the lease it still runs, says Leaving before
// anything else there, delivers that lease's result on it, and sends
// Drained on it; a lease that reaches it there is handed back, not run.
func TestReview_LeaveAcrossABrokenStream(t *testing.T) {
	host := newBlockingHost()
	streams := make(chan *fakeStream, 4)
	ends := make(chan context.CancelFunc, 4)
	runCtx, sigterm := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, Config{ID: "edge", Host: host, DrainTimeout: time.Minute, MinBackoff: time.Millisecond,
			Connect: func(ctx context.Context) (tollgatev1.ExecutorService_ConnectClient, error) {
				sctx, end := context.WithCancel(ctx)
				fs := &fakeStream{ctx: sctx, down: make(chan *tollgatev1.ControlMessage, 16), up: make(chan *tollgatev1.ExecutorMessage, 16), sendClosed: make(chan struct{})}
				ends <- end
				streams <- fs
				return fs, nil
			}})
	}()
	defer func() { sigterm(); <-done }()
	next := func(fs *fakeStream) *tollgatev1.ExecutorMessage {
		t.Helper()
		for {
			select {
			case m := <-fs.up:
				if m.GetHeartbeat() == nil {
					return m
				}
			case <-time.After(10 * time.Second):
				t.Fatal("timed out waiting for a message from the executor")
			}
		}
	}
	welcome := &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Welcome{Welcome: &tollgatev1.Welcome{HeartbeatInterval: durationpb.New(time.Hour)}}}
	lease := func(fs *fakeStream, id string) {
		fs.down <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Lease{Lease: &tollgatev1.Lease{
			LeaseId: id, Fence: 1, RunId: "r", StepId: id, Server: "x", Tool: "wait", ArgsJson: `{}`}}}
	}

	fs1, end1 := <-streams, <-ends
	if next(fs1).GetHello().GetCapacityCredits() == 0 {
		t.Fatal("the first hello offers no credits")
	}
	fs1.down <- welcome
	lease(fs1, "a")
	if next(fs1).GetAck().GetLeaseId() != "a" {
		t.Fatal("want a's ack")
	}
	<-host.entered
	sigterm()
	if next(fs1).GetLeaving() == nil {
		t.Fatal("want Leaving")
	}
	end1() // the stream breaks mid-drain

	fs2, end2 := <-streams, <-ends
	h := next(fs2).GetHello()
	if h.GetCapacityCredits() != 0 || len(h.GetHeldLeases()) != 1 || h.GetHeldLeases()[0].GetLeaseId() != "a" {
		t.Fatalf("want a hello with no credits holding a, got %v", h)
	}
	fs2.down <- welcome
	if l := next(fs2).GetLeaving(); l == nil || len(l.GetReturned()) != 0 {
		t.Fatalf("want Leaving first after the welcome, got %v", l)
	}
	lease(fs2, "b") // a control plane that sent one anyway
	if l := next(fs2).GetLeaving(); len(l.GetReturned()) != 1 || l.GetReturned()[0].GetLeaseId() != "b" {
		t.Fatalf("want b returned, got %v", l)
	}
	close(host.release)
	if res := next(fs2).GetResult(); res.GetLeaseId() != "a" || res.GetOutputJson() == "" {
		t.Fatalf("want a's result on the new stream, got %v", res)
	}
	fs2.down <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_ResultAck{ResultAck: &tollgatev1.ResultAck{LeaseId: "a", Fence: 1}}}
	if d := next(fs2).GetDrained(); d == nil || len(d.GetAbandoned()) != 0 {
		t.Fatalf("want Drained, nothing abandoned, got %v", d)
	}
	select {
	case <-fs2.sendClosed:
	case <-time.After(10 * time.Second):
		t.Fatal("the send side was not closed after Drained")
	}
	end2() // the control plane ends the stream after Drained
	select {
	case <-done:
		done <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return once drained")
	}
	if n := len(streams); n != 0 {
		t.Fatalf("%d more streams opened after Drained", n)
	}
	if n := host.calls.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
}
