package dispatch

import (
	"context"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/metadata"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// fakeStream is one executor stream as the server sees it: what the test
// puts on in, the executor sends; what the dispatcher sends lands on out.
type fakeStream struct {
	ctx  context.Context
	in   chan *tollgatev1.ExecutorMessage
	out  chan *tollgatev1.ControlMessage
	once sync.Once
}

func newFakeStream(executor string) *fakeStream {
	ctx := identity.WithPrincipal(context.Background(), identity.Principal{Subject: executor, Kind: identity.KindExecutor})
	return &fakeStream{ctx: ctx, in: make(chan *tollgatev1.ExecutorMessage, 16), out: make(chan *tollgatev1.ControlMessage, 64)}
}

func (f *fakeStream) Context() context.Context { return f.ctx }
func (f *fakeStream) Recv() (*tollgatev1.ExecutorMessage, error) {
	m, ok := <-f.in
	if !ok {
		return nil, io.EOF
	}
	return m, nil
}
func (f *fakeStream) Send(m *tollgatev1.ControlMessage) error { f.out <- m; return nil }
func (f *fakeStream) closeSend()                              { f.once.Do(func() { close(f.in) }) }
func (f *fakeStream) SetHeader(metadata.MD) error             { return nil }
func (f *fakeStream) SendHeader(metadata.MD) error            { return nil }
func (f *fakeStream) SetTrailer(metadata.MD)                  {}
func (f *fakeStream) SendMsg(any) error                       { return nil }
func (f *fakeStream) RecvMsg(any) error                       { return nil }

// fakeClock is a dispatcher's clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// replica is one control plane replica: a dispatcher and its runner on
// the shared store.
type replica struct {
	d     *Dispatcher
	r     *runner.Runner
	clock *fakeClock
	rec   *lossCounter
}

// connect opens a stream of executor edge-1 to rep, naming held leases;
// it returns once the executor was welcomed, and a func that breaks the
// stream and waits for the dispatcher to be done with it.
func (rep *replica) connect(t *testing.T, held ...*tollgatev1.LeaseRef) (*fakeStream, func()) {
	t.Helper()
	fs := newFakeStream("edge-1")
	hello := &tollgatev1.Hello{ExecutorId: "edge-1", CapacityCredits: 4, HeldLeases: held,
		Tools: []*tollgatev1.Tool{{Server: "x", Tool: "read", Annotations: &tollgatev1.ToolAnnotations{ReadOnlyHint: true}}}}
	fs.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Hello{Hello: hello}}
	done := make(chan struct{})
	go func() { defer close(done); _ = rep.d.Connect(fs) }()
	for {
		m := <-fs.out
		if m.GetWelcome() != nil {
			break
		}
	}
	// Registered just after the welcome: a step offered before then goes
	// back to the store, which no claim loop reads here.
	waitFor(t, "the session registered", func() bool {
		rep.d.mu.Lock()
		defer rep.d.mu.Unlock()
		for s := range rep.d.sessions {
			if s.executor == "edge-1" {
				return true
			}
		}
		return false
	})
	return fs, func() { fs.closeSend(); <-done }
}

// An executor whose streams break twice within one lease TTL, A to B and
// back to A, keeps its lease: it is attached to A and heartbeating there.
// On main, A re-binds the lease from its detached copy (rebind) without
// recording it; the run still says B holds it, so B's expiry of its own
// detached copy is accepted by the engine and the running lease is lost
// (a read-only step re-leased while its first attempt still runs; a
// started side effect put in doubt).
func TestReview_LeaseBackAndForthIsNotLostByTheReplicaItLeft(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(context.Background())
	st := memstore.New(memstore.Config{})
	for _, n := range []string{"cp-a", "cp-b"} {
		if err := st.Heartbeat(ctx, n, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	const ttl = 40 * time.Millisecond // the expiry pass runs every 10ms of real time; leases expire by the fake clock
	mk := func(name string) *replica {
		c := &fakeClock{now: time.Unix(1_000_000, 0)}
		d := New(Config{Replica: name, LeaseTTL: ttl, Now: c.Now})
		r := runner.New(runner.Config{Store: st, Dispatcher: d, Replica: name, LeaseTTL: ttl})
		return &replica{d: d, r: r, clock: c, rec: &lossCounter{Runner: r}}
	}
	a, b := mk("cp-a"), mk("cp-b")
	var running sync.WaitGroup
	for _, rep := range []*replica{a, b} {
		running.Go(func() { _ = rep.d.Run(ctx, rep.rec) })
	}
	defer func() { cancel(); running.Wait() }()

	// edge-1 connects to A; a run's read-only step is leased to it there.
	fsA, breakA := a.connect(t)
	p := &plan.Plan{Name: "one", InitialSteps: []plan.Step{{ID: "s", Kind: plan.KindTool, Server: "x", Tool: "read", Args: plan.Object(`{}`), OnFail: plan.OnFailStop}}}
	run, _, err := a.r.Start(ctx, runner.StartRequest{Plan: p, Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	var lease *tollgatev1.Lease
	for lease == nil {
		lease = (<-fsA.out).GetLease()
	}
	fsA.in <- &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Ack{Ack: &tollgatev1.Ack{LeaseId: lease.GetLeaseId(), Fence: lease.GetFence()}}}
	waitFor(t, "the ack recorded on A", func() bool {
		a.d.mu.Lock()
		defer a.d.mu.Unlock()
		l := a.d.leases[lease.GetLeaseId()]
		return l != nil && l.acked
	})
	held := &tollgatev1.LeaseRef{LeaseId: lease.GetLeaseId(), Fence: lease.GetFence()}

	// The stream to A breaks; edge-1 reaches B, which adopts the lease.
	breakA()
	_, breakB := b.connect(t, held)
	if got := replicaOf(t, b.r, run.ID); got != "cp-b" {
		t.Fatalf("after re-attaching to B the run says %q holds the lease", got)
	}
	// That stream breaks too; edge-1 reaches A again within the TTL.
	breakB()
	fsA2, breakA2 := a.connect(t, held)
	defer breakA2()
	for len(fsA2.out) > 0 {
		if c := (<-fsA2.out).GetCancel(); c != nil {
			t.Fatalf("A told edge-1 to cancel the lease it re-attached: %s", c.GetReason())
		}
	}

	// A TTL passes on B with no heartbeat there (edge-1 heartbeats A).
	b.clock.add(time.Hour)
	waitFor(t, "B's expiry pass to drop its detached copy", func() bool {
		b.d.mu.Lock()
		defer b.d.mu.Unlock()
		return len(b.d.leases) == 0
	})
	waitFor(t, "B's loss of its copy handled", func() bool { return b.rec.lost.Load() > 0 })
	s, _, err := a.r.Get(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Steps["s"]; st.Status != engine.StatusLeased || st.Attempt != 1 {
		t.Fatalf("edge-1 runs the lease attached to A, yet the step is %s at attempt %d (lost by B, the replica it left)", st.Status, st.Attempt)
	}
}

// lossCounter is a replica's Recorder counting the LeaseLost events it
// was given (refused or not).
type lossCounter struct {
	*runner.Runner
	lost atomic.Int32
}

func (c *lossCounter) Event(ctx context.Context, runID string, build func(now time.Time) engine.Event) (engine.Transition, error) {
	tr, err := c.Runner.Event(ctx, runID, build)
	if _, ok := build(time.Time{}).(engine.LeaseLost); ok {
		c.lost.Add(1)
	}
	return tr, err
}

func replicaOf(t *testing.T, r *runner.Runner, runID string) string {
	t.Helper()
	run, _, err := r.Get(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	s := run.Steps["s"]
	return s.Attempts[len(s.Attempts)-1].Replica
}

// waitFor polls cond (state, not time) for up to 5 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}
