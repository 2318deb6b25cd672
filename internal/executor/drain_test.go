package executor

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/grant"
)

// blockingHost hosts x.wait (read-only): a call blocks until release is
// closed (it then succeeds) or its context ends (a transport error).
type blockingHost struct {
	entered chan string // the args of each call, as it begins
	release chan struct{}
	calls   atomic.Int32
}

func newBlockingHost() *blockingHost {
	return &blockingHost{entered: make(chan string, 8), release: make(chan struct{})}
}

func (h *blockingHost) Tools() []ToolSpec {
	return []ToolSpec{{Server: "x", Name: "wait", ReadOnly: true}}
}

func (h *blockingHost) Call(ctx context.Context, _, _ string, args json.RawMessage, _ string) (json.RawMessage, error) {
	h.calls.Add(1)
	h.entered <- string(args)
	select {
	case <-h.release:
		return json.RawMessage(`{"done":true}`), nil
	case <-ctx.Done():
		return nil, &TransportError{Message: "cancelled: " + ctx.Err().Error(), OutcomeUnknown: true}
	}
}

// leaveRig runs an executor against one fake stream that outlives Run's
// context (as a real stream does while the executor drains).
type leaveRig struct {
	t        *testing.T
	fs       *fakeStream
	stop     context.CancelFunc // Run's context: SIGTERM
	end      context.CancelFunc // the stream's: the control plane hangs up
	done     chan error
	connects atomic.Int32
}

func startLeaveRig(t *testing.T, host Host, st *Status, drain time.Duration, opts ...func(*Config)) *leaveRig {
	t.Helper()
	runCtx, stop := context.WithCancel(context.Background())
	streamCtx, end := context.WithCancel(context.Background())
	r := &leaveRig{t: t, stop: stop, end: end, done: make(chan error, 1),
		fs: &fakeStream{down: make(chan *tollgatev1.ControlMessage, 16), up: make(chan *tollgatev1.ExecutorMessage, 16), sendClosed: make(chan struct{})}}
	go func() {
		cfg := Config{ID: "edge", Host: host, Status: st, DrainTimeout: drain,
			Connect: func(ctx context.Context) (tollgatev1.ExecutorService_ConnectClient, error) {
				// Like a gRPC stream, it ends with the context it was
				// opened with, or when the control plane hangs up.
				r.connects.Add(1)
				sctx, cancel := context.WithCancel(ctx)
				context.AfterFunc(streamCtx, cancel)
				r.fs.ctx = sctx
				return r.fs, nil
			}}
		for _, o := range opts {
			o(&cfg)
		}
		r.done <- Run(runCtx, cfg)
	}()
	t.Cleanup(func() { stop(); end(); <-r.done })
	if h := r.next().GetHello(); h == nil {
		t.Fatal("hello first")
	}
	r.fs.down <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Welcome{Welcome: &tollgatev1.Welcome{HeartbeatInterval: durationpb.New(time.Hour)}}}
	return r
}

// next returns the executor's next message that is not a heartbeat.
func (r *leaveRig) next() *tollgatev1.ExecutorMessage {
	r.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-r.fs.up:
			if m.GetHeartbeat() == nil {
				return m
			}
		case <-deadline:
			r.t.Fatal("timed out waiting for a message from the executor")
		}
	}
}

func (r *leaveRig) lease(id, args string) {
	r.fs.down <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Lease{Lease: &tollgatev1.Lease{
		LeaseId: id, Fence: 1, RunId: "r", StepId: id, Server: "x", Tool: "wait", ArgsJson: args}}}
}

func (r *leaveRig) returned(t *testing.T) {
	t.Helper()
	select {
	case <-r.fs.sendClosed:
	case <-time.After(10 * time.Second):
		t.Fatal("the executor did not close its send side after Drained")
	}
	r.end() // the control plane ends the stream after Drained
	select {
	case err := <-r.done:
		r.done <- err // for Cleanup
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return once drained")
	}
}

// Once its context ends (SIGTERM) an executor with a drain timeout says
// Leaving, hands back a lease that reaches it after that without running
// it, lets the lease it runs finish and delivers its result, then sends
// Drained (nothing abandoned), closes its send side, and returns when the
// control plane hangs up — without opening another stream. /readyz says
// draining throughout.
func TestLeaveLetsRunningLeasesFinish(t *testing.T) {
	host := newBlockingHost()
	st := &Status{}
	r := startLeaveRig(t, host, st, time.Minute)
	r.lease("a", `{"n":"a"}`)
	if r.next().GetAck().GetLeaseId() != "a" {
		t.Fatal("want the ack of a")
	}
	<-host.entered

	r.stop()
	if l := r.next().GetLeaving(); l == nil || len(l.GetReturned()) != 0 {
		t.Fatalf("want a first Leaving returning nothing, got %v", l)
	}
	if ok, why := st.Ready(); ok || why != "draining" {
		t.Fatalf("ready while leaving: %v %q", ok, why)
	}
	r.lease("b", `{"n":"b"}`) // sent before the control plane read Leaving
	if l := r.next().GetLeaving(); len(l.GetReturned()) != 1 || l.GetReturned()[0].GetLeaseId() != "b" || l.GetReturned()[0].GetFence() != 1 {
		t.Fatalf("want b returned at fence 1, got %v", l)
	}

	close(host.release)
	res := r.next().GetResult()
	if res.GetLeaseId() != "a" || res.GetOutputJson() != `{"done":true}` {
		t.Fatalf("want a's result, got %v", res)
	}
	r.fs.down <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_ResultAck{ResultAck: &tollgatev1.ResultAck{LeaseId: "a", Fence: 1}}}
	d := r.next().GetDrained()
	if d == nil || len(d.GetAbandoned()) != 0 {
		t.Fatalf("want Drained with nothing abandoned, got %v", d)
	}
	r.returned(t)
	if n := host.calls.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1 (b must not run)", n)
	}
	if n := r.connects.Load(); n != 1 {
		t.Fatalf("%d streams opened, want 1: a drained executor opens no other", n)
	}
}

// At the drain timeout, a lease still running is cancelled, its result
// delivered, and it is reported abandoned, as after a control plane's
// Drain.
func TestLeaveAbandonsLeasesAtTheTimeout(t *testing.T) {
	host := newBlockingHost()
	r := startLeaveRig(t, host, nil, 50*time.Millisecond)
	r.lease("a", `{}`)
	if r.next().GetAck() == nil {
		t.Fatal("want the ack")
	}
	<-host.entered
	r.stop()
	if r.next().GetLeaving() == nil {
		t.Fatal("want Leaving")
	}
	res := r.next().GetResult()
	if !res.GetTransportError().GetOutcomeUnknown() {
		// Cut short by the executor, not failed: the control plane
		// reports it lost and the engine leases the read again.
		t.Fatalf("want a cancelled lease's transport error, outcome unknown, got %v", res)
	}
	r.fs.down <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_ResultAck{ResultAck: &tollgatev1.ResultAck{LeaseId: "a", Fence: 1}}}
	d := r.next().GetDrained()
	if len(d.GetAbandoned()) != 1 || d.GetAbandoned()[0].GetLeaseId() != "a" {
		t.Fatalf("want a abandoned, got %v", d)
	}
	r.returned(t)
}

// With no drain timeout, the end of ctx stops the executor at once, as
// before: its lease is cancelled and nothing more is said.
func TestNoDrainStopsAtOnce(t *testing.T) {
	host := newBlockingHost()
	r := startLeaveRig(t, host, nil, 0)
	r.lease("a", `{}`)
	if r.next().GetAck() == nil {
		t.Fatal("want the ack")
	}
	<-host.entered
	r.stop()
	select {
	case err := <-r.done:
		r.done <- err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return at once with no drain timeout")
	}
	for len(r.fs.up) > 0 {
		if m := <-r.fs.up; m.GetLeaving() != nil || m.GetDrained() != nil {
			t.Fatalf("with no drain timeout the executor sent %v", m)
		}
	}
}

// A side effect whose Start is still unanswered at the drain deadline (the
// control plane's store down during a rollout): the tool is never called,
// and the lease is reported lost (outcome unknown), not failed, so a Start
// never recorded is leased again and a recorded one goes in doubt.
func TestLeaveAbandonsAStartNotAcknowledged(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	host := newBlockingHost()
	r := startLeaveRig(t, host, nil, 50*time.Millisecond, func(c *Config) {
		c.Grants = grant.NewVerifier(map[string]ed25519.PublicKey{"cp": pub})
	})
	args := `{}`
	digest, _ := freshness.PayloadDigest([]byte(args))
	g := &grant.Grant{RunID: "r", StepID: "a", Action: "x.wait", AskID: "ask_1", PayloadDigest: digest, Fence: 1, ExpiresAt: time.Now().Add(time.Minute)}
	grant.Sign(g, "cp", priv)
	r.fs.down <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Lease{Lease: &tollgatev1.Lease{
		LeaseId: "a", Fence: 1, RunId: "r", StepId: "a", Server: "x", Tool: "wait", ArgsJson: args, SideEffect: true,
		Grant: &tollgatev1.Grant{RunId: g.RunID, StepId: g.StepID, Action: g.Action, AskId: g.AskID, PayloadDigest: g.PayloadDigest, Fence: g.Fence,
			ExpiresAt: timestamppb.New(g.ExpiresAt), KeyId: g.KeyID, Signature: g.Signature}}}}
	if r.next().GetAck() == nil {
		t.Fatal("want the ack")
	}
	if r.next().GetStart() == nil {
		t.Fatal("want the start")
	}
	r.stop() // no StartAck comes
	if r.next().GetLeaving() == nil {
		t.Fatal("want Leaving")
	}
	res := r.next().GetResult()
	if te := res.GetTransportError(); te == nil || !te.GetOutcomeUnknown() {
		t.Fatalf("a side effect abandoned before its start was acknowledged must be lost (outcome unknown), not failed: %v", res)
	}
	if n := host.calls.Load(); n != 0 {
		t.Fatalf("the tool was called %d times without an acknowledged start", n)
	}
	r.fs.down <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_ResultAck{ResultAck: &tollgatev1.ResultAck{LeaseId: "a", Fence: 1}}}
	if d := r.next().GetDrained(); len(d.GetAbandoned()) != 1 {
		t.Fatalf("want a abandoned, got %v", d)
	}
	r.returned(t)
}
