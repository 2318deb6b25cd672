package executor

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/grant"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStream is the control plane's end of one Connect stream, played by
// the test (a fake only for this unit test of the executor's side).
type fakeStream struct {
	grpc.ClientStream
	ctx  context.Context
	down chan *tollgatev1.ControlMessage
	up   chan *tollgatev1.ExecutorMessage
	// sendClosed, when set, is closed by CloseSend (once: a second
	// CloseSend panics, and the executor must not send one).
	sendClosed chan struct{}
}

func (f *fakeStream) CloseSend() error {
	close(f.sendClosed)
	return nil
}

func (f *fakeStream) Send(m *tollgatev1.ExecutorMessage) error {
	select {
	case f.up <- m:
		return nil
	case <-f.ctx.Done():
		return io.EOF
	}
}

func (f *fakeStream) Recv() (*tollgatev1.ControlMessage, error) {
	select {
	case m := <-f.down:
		return m, nil
	case <-f.ctx.Done():
		return nil, io.EOF
	}
}

type countingHost struct {
	mu    sync.Mutex
	calls int
}

func (h *countingHost) Tools() []ToolSpec {
	return []ToolSpec{{Server: "payments", Name: "pay", InputSchema: `{"type":"object","required":["invoice"]}`}}
}

func (h *countingHost) Call(context.Context, string, string, json.RawMessage, string) (json.RawMessage, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	return json.RawMessage(`{"paid":true}`), nil
}

// An executor refuses a side-effecting lease with no grant, with a replayed
// grant, and with args other than those approved — and never calls the
// tool; with a good grant it records Start first and then calls it once.
func TestExecutorChecksGrants(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	host := &countingHost{}
	ctx, cancel := context.WithCancel(context.Background())
	fs := &fakeStream{ctx: ctx, down: make(chan *tollgatev1.ControlMessage, 16), up: make(chan *tollgatev1.ExecutorMessage, 16)}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{ID: "edge", Host: host, Grants: grant.NewVerifier(map[string]ed25519.PublicKey{"cp": pub}),
			Connect: func(context.Context) (tollgatev1.ExecutorService_ConnectClient, error) { return fs, nil }})
	}()
	defer func() { cancel(); <-done }()
	if h := (<-fs.up).GetHello(); h == nil || len(h.GetTools()) != 1 || h.GetTools()[0].GetInputSchemaJson() != `{"type":"object","required":["invoice"]}` {
		t.Fatalf("hello first, with each tool's input schema: %v", h)
	}
	fs.down <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Welcome{Welcome: &tollgatev1.Welcome{HeartbeatInterval: durationpb.New(time.Hour)}}}

	args := `{"amount":485000,"bank_account":"XXXX2048"}`
	digest, _ := freshness.PayloadDigest([]byte(args))
	signed := func(fence uint64) *tollgatev1.Grant {
		g := &grant.Grant{RunID: "r", StepID: "pay", Action: "payments.pay", AskID: "ask_1", PayloadDigest: digest, Fence: fence, ExpiresAt: time.Now().Add(time.Minute)}
		grant.Sign(g, "cp", priv)
		return &tollgatev1.Grant{RunId: g.RunID, StepId: g.StepID, Action: g.Action, AskId: g.AskID, PayloadDigest: g.PayloadDigest, Fence: g.Fence,
			ExpiresAt: timestamppb.New(g.ExpiresAt), KeyId: g.KeyID, Signature: g.Signature}
	}
	lease := func(fence uint64, args string, g *tollgatev1.Grant) {
		fs.down <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Lease{Lease: &tollgatev1.Lease{
			LeaseId: "r/pay", Fence: fence, RunId: "r", StepId: "pay", Server: "payments", Tool: "pay", ArgsJson: args, SideEffect: true, Grant: g}}}
	}
	// next returns the next message that is not a heartbeat.
	next := func() *tollgatev1.ExecutorMessage {
		for {
			m := <-fs.up
			if m.GetHeartbeat() == nil {
				return m
			}
		}
	}
	refused := func(want tollgatev1.RefusalReason) {
		t.Helper()
		r := next().GetResult()
		if r.GetRefusal().GetReason() != want {
			t.Fatalf("want refusal %v, got %v", want, r)
		}
	}

	lease(1, args, nil)
	refused(tollgatev1.RefusalReason_REFUSAL_REASON_GRANT_MISSING)
	lease(1, `{"amount":485000,"bank_account":"XXXX7731"}`, signed(1))
	refused(tollgatev1.RefusalReason_REFUSAL_REASON_PAYLOAD_DIGEST_MISMATCH)

	g := signed(2)
	lease(2, args, g)
	if next().GetAck() == nil {
		t.Fatal("ack after a good grant")
	}
	if next().GetStart() == nil {
		t.Fatal("a side effect asks for a durable Start before the tool runs")
	}
	host.mu.Lock()
	if host.calls != 0 {
		t.Fatal("the tool ran before the Start was acknowledged")
	}
	host.mu.Unlock()
	fs.down <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_StartAck{StartAck: &tollgatev1.StartAck{LeaseId: "r/pay", Fence: 2, Durable: true}}}
	if r := next().GetResult(); r.GetOutputJson() != `{"paid":true}` {
		t.Fatalf("result: %v", r)
	}
	lease(2, args, g) // the same grant again
	refused(tollgatev1.RefusalReason_REFUSAL_REASON_GRANT_REUSED)

	host.mu.Lock()
	defer host.mu.Unlock()
	if host.calls != 1 {
		t.Fatalf("the tool ran %d times, want exactly 1", host.calls)
	}
}
