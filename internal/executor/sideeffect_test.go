package executor

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/grant"
)

// annotatedHost hosts test.mark without annotations (so side-effecting,
// as MCP reads a missing readOnlyHint) and test.sleep with
// readOnlyHint=true, and counts the calls it gets.
type annotatedHost struct {
	mu    sync.Mutex
	calls map[string]int
}

func (h *annotatedHost) Tools() []ToolSpec {
	return []ToolSpec{{Server: "test", Name: "mark"}, {Server: "test", Name: "sleep", ReadOnly: true}}
}

func (h *annotatedHost) Call(_ context.Context, server, tool string, _ json.RawMessage, _ string) (json.RawMessage, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls[server+"."+tool]++
	return json.RawMessage(`{"ok":true}`), nil
}

func (h *annotatedHost) count(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[key]
}

// Item 4 (I2): the executor decides from what its own MCP host says. A
// control plane that wrongly leases test.mark (no readOnlyHint on its
// server) as read-only, with no grant, is refused and the tool never runs;
// so is a tool the host does not list; a lease that calls a read-only tool
// side-effecting stays strict; a read-only tool runs without a Start; and
// a side effect leased as read-only but carrying a valid grant still waits
// for a durable Start before it runs.
func TestItem4_ExecutorRefusesASideEffectTheLeaseCallsReadOnly(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	host := &annotatedHost{calls: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	fs := &fakeStream{ctx: ctx, down: make(chan *tollgatev1.ControlMessage, 16), up: make(chan *tollgatev1.ExecutorMessage, 16)}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{ID: "edge-1", Host: host, Grants: grant.NewVerifier(map[string]ed25519.PublicKey{"cp": pub}),
			Connect: func(context.Context) (tollgatev1.ExecutorService_ConnectClient, error) { return fs, nil }})
	}()
	defer func() { cancel(); <-done }()
	if h := (<-fs.up).GetHello(); h == nil {
		t.Fatal("hello first")
	}
	fs.down <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Welcome{Welcome: &tollgatev1.Welcome{HeartbeatInterval: durationpb.New(time.Hour)}}}
	next := func() *tollgatev1.ExecutorMessage {
		for {
			if m := <-fs.up; m.GetHeartbeat() == nil {
				return m
			}
		}
	}
	const args = `{"name":"effect"}`
	lease := func(step, tool string, sideEffect bool, g *grant.Grant) {
		l := &tollgatev1.Lease{LeaseId: "r/" + step + "/1", Fence: 1, RunId: "r", StepId: step, Kind: tollgatev1.StepKind_STEP_KIND_TOOL,
			Server: "test", Tool: tool, ArgsJson: args, SideEffect: sideEffect}
		if g != nil {
			l.Grant = wire.Grant(g)
		}
		fs.down <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Lease{Lease: l}}
	}
	refused := func(what string, want ...string) {
		t.Helper()
		m := next()
		r := m.GetResult().GetRefusal()
		if r == nil || r.GetReason() != tollgatev1.RefusalReason_REFUSAL_REASON_GRANT_MISSING {
			t.Fatalf("%s: want a GRANT_MISSING refusal before anything else, got %v", what, m)
		}
		for _, w := range want {
			if !strings.Contains(r.GetMessage(), w) {
				t.Fatalf("%s: the refusal %q does not say %q", what, r.GetMessage(), w)
			}
		}
	}

	lease("m", "mark", false, nil)
	refused("test.mark leased as read-only", "test.mark", "read-only", "readOnlyHint")
	if n := host.count("test.mark"); n != 0 {
		t.Fatalf("I2: the executor ran test.mark %d times on a lease that called it read-only and carried no grant", n)
	}
	lease("g", "gone", false, nil)
	refused("a tool the host does not list", "test.gone", "does not list")
	lease("s", "sleep", true, nil)
	refused("a read-only tool the lease calls side-effecting: the stricter wins")

	lease("s2", "sleep", false, nil)
	if next().GetAck() == nil {
		t.Fatal("a read-only lease is acknowledged")
	}
	if m := next(); m.GetResult().GetOutputJson() == "" {
		t.Fatalf("a read-only tool runs with no Start: %v", m)
	}

	digest, _ := freshness.PayloadDigest([]byte(args))
	g := &grant.Grant{RunID: "r", StepID: "m2", Action: "test.mark", PayloadDigest: digest, Fence: 1, ExpiresAt: time.Now().Add(time.Minute)}
	grant.Sign(g, "cp", priv)
	lease("m2", "mark", false, g)
	if next().GetAck() == nil {
		t.Fatal("a granted lease is acknowledged")
	}
	if m := next(); m.GetStart() == nil {
		t.Fatalf("I7: a side effect leased as read-only still asks for a durable Start before it runs, got %v", m)
	}
	if n := host.count("test.mark"); n != 0 {
		t.Fatal("the tool ran before its Start was acknowledged")
	}
	fs.down <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_StartAck{StartAck: &tollgatev1.StartAck{LeaseId: "r/m2/1", Fence: 1, Durable: true}}}
	if m := next(); m.GetResult().GetOutputJson() == "" {
		t.Fatalf("result after the durable Start: %v", m)
	}
	if n := host.count("test.mark"); n != 1 {
		t.Fatalf("test.mark ran %d times, want exactly the granted one", n)
	}
}
