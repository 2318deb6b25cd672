package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/types/known/durationpb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/faults"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/limits"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// session is one executor's stream: what it offers (labels, tools,
// prose), the credits it has left, and the queue its sender sends from.
type session struct {
	id       string
	executor string
	labels   []string
	tools    map[string]bool // "server.tool"
	prose    bool
	credits  int
	out      chan *tollgatev1.ControlMessage
	// silent is set when a lease of this session expired without a
	// heartbeat: the executor may be stopped or cut off, so it gets no new
	// lease until it is heard from again.
	silent bool
	// leaving is set when the executor said it is stopping (Leaving): it
	// gets no new lease on this session, and serves nothing here (its
	// queues are not announced; offers it alone could take go back to the
	// store). Its leases run on and report as usual.
	leaving bool
}

func (s *session) takes(o offer) bool { return s.serves(o.d.Target()) }

// serves reports whether this executor offers what t needs; a leaving
// one serves nothing. Dispatcher.mu is held.
func (s *session) serves(t engine.Target) bool {
	if s.leaving {
		return false
	}
	if t.On != "" && !slices.Contains(s.labels, t.On) {
		return false
	}
	if t.Kind == plan.KindProse {
		return s.prose
	}
	return s.tools[t.Server+"."+t.Tool]
}

// queues are the work queues this executor serves (runner.QueueOf).
func (s *session) queues() []string {
	var ts []engine.Target
	if s.prose {
		ts = append(ts, engine.Target{Kind: plan.KindProse})
	}
	for st := range s.tools {
		server, tool, _ := strings.Cut(st, ".")
		ts = append(ts, engine.Target{Kind: plan.KindTool, Server: server, Tool: tool})
	}
	var out []string
	for _, t := range ts {
		out = append(out, runner.QueueOf(t))
		for _, l := range s.labels {
			t.On = l
			out = append(out, runner.QueueOf(t))
		}
	}
	return out
}

// Connect serves one executor's stream: hello, then leases down and
// acks, starts, heartbeats and results up.
func (d *Dispatcher) Connect(stream tollgatev1.ExecutorService_ConnectServer) error {
	ctx := stream.Context()
	p, ok := identity.FromContext(ctx)
	if !ok {
		return fmt.Errorf("no authenticated executor: %w", errkind.Unauthenticated)
	}
	if p.Kind != identity.KindExecutor {
		return fmt.Errorf("%s %s may not open an executor stream: %w", p.Kind, p.Subject, errkind.Denied)
	}
	who := p.Subject
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return fmt.Errorf("the first message must be hello: %w", errkind.Invalid)
	}
	if id := hello.GetExecutorId(); id != "" && id != who {
		return fmt.Errorf("hello names executor %q but the certificate names %q: %w", limits.Short(id), who, errkind.Denied)
	}
	if n := len(hello.GetHeldLeases()); n > limits.MaxExecutorLeases {
		// Each is a store read (and perhaps a commit) before the
		// welcome: an executor cannot hold more than its capacity.
		return fmt.Errorf("hello names %d held leases, more than the %d one executor may hold: %w", n, limits.MaxExecutorLeases, errkind.Invalid)
	}
	d.mu.Lock()
	d.seq++
	s := &session{id: fmt.Sprintf("%s#%d", hello.GetExecutorId(), d.seq), executor: hello.GetExecutorId(), labels: hello.GetLabels(),
		tools: map[string]bool{}, prose: hello.GetProse() != nil, credits: min(int(hello.GetCapacityCredits()), limits.MaxExecutorLeases),
		out: make(chan *tollgatev1.ControlMessage, 1024)}
	d.mu.Unlock()
	if s.executor == "" {
		s.executor = who
	}
	for _, t := range hello.GetTools() {
		s.tools[t.GetServer()+"."+t.GetTool()] = true
	}
	d.views.advertised(s.executor, hello.GetTools())
	// Leases the executor still runs from an earlier stream: taken over
	// before it is welcomed, so its starts and results that follow find
	// them (reattach.go).
	if held := hello.GetHeldLeases(); len(held) > 0 {
		kept := d.reattach(ctx, s, held)
		s.credits = max(0, s.credits-kept)
	}
	welcome := &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Welcome{Welcome: &tollgatev1.Welcome{SessionId: s.id,
		HeartbeatInterval: durationpb.New(d.cfg.LeaseTTL / 3), LeaseTtl: durationpb.New(d.cfg.LeaseTTL)}}}
	if err := stream.Send(welcome); err != nil {
		return err
	}
	d.cfg.Log.Info("executor connected", "executor", s.executor, "principal", who, "tools", len(s.tools), "credits", s.credits)

	// One goroutine sends; this one receives. The sender ends when ctx
	// does (the stream is over) or when the session is closed below.
	sendCtx, cancel := context.WithCancel(ctx)
	var senders sync.WaitGroup
	senders.Add(1)
	go func() {
		defer senders.Done()
		for {
			select {
			case <-sendCtx.Done():
				return
			case m := <-s.out:
				if err := stream.Send(m); err != nil {
					cancel()
					return
				}
				if m.GetLease() != nil {
					_ = faults.At(faults.AfterLeaseSent)
				}
			}
		}
	}()
	d.mu.Lock()
	d.sessions[s] = true
	d.handOut()
	d.mu.Unlock()
	d.changed()

	err = d.serve(ctx, stream, s)

	cancel()
	senders.Wait()
	d.mu.Lock()
	delete(d.sessions, s)
	var gone []*lease
	detached := 0
	for _, l := range d.leases {
		if l.s != s {
			continue
		}
		if l.acked || (l.ack != ackNone && l.ack != ackRefused) {
			// Acked (recorded, or being recorded): its executor may run it
			// still and re-attach it on its next stream, here or on another
			// replica: it is lost only if no heartbeat comes within the
			// lease TTL (reap).
			detached++
			continue
		}
		d.delLease(l)
		gone = append(gone, l)
	}
	orphans := d.unservedWaiting()
	d.mu.Unlock()
	d.changed()
	d.release(context.WithoutCancel(ctx), orphans)
	d.cfg.Log.Info("executor disconnected", "executor", s.executor, "leases_offered_again", len(gone), "leases_awaiting_reattach", detached)
	d.lost(context.WithoutCancel(ctx), gone)
	if errors.Is(err, io.EOF) || errors.Is(ctx.Err(), context.Canceled) {
		return nil
	}
	return err
}

// serve reads the executor's messages. Acks, starts and results are
// handled concurrently (so a fan's results can share a commit), but in
// order per lease: a start or result waits until its lease's ack is done.
func (d *Dispatcher) serve(ctx context.Context, stream tollgatev1.ExecutorService_ConnectServer, s *session) error {
	var handlers sync.WaitGroup
	defer handlers.Wait()
	// What an executor has told us is recorded even if its stream ends
	// meanwhile: a result, an ack or a start is a fact about the world.
	rec := context.WithoutCancel(ctx)
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		switch x := m.GetMessage().(type) {
		case *tollgatev1.ExecutorMessage_Ack:
			d.acked(ctx, rec, s, x.Ack, &handlers)
		case *tollgatev1.ExecutorMessage_Start:
			d.started(ctx, rec, s, x.Start, &handlers)
		case *tollgatev1.ExecutorMessage_Heartbeat:
			d.heartbeat(s, x.Heartbeat)
		case *tollgatev1.ExecutorMessage_Result:
			handlers.Add(1)
			d.handle(func() {
				defer handlers.Done()
				d.result(rec, s, x.Result)
			})
		case *tollgatev1.ExecutorMessage_Credit:
			d.mu.Lock()
			s.credits += int(x.Credit.GetCredits())
			d.handOut()
			d.mu.Unlock()
			d.freed()
		case *tollgatev1.ExecutorMessage_Leaving:
			d.leaving(rec, s, x.Leaving)
		case *tollgatev1.ExecutorMessage_Drained:
			return nil
		}
	}
}

// refuse tells the executor a message of its is refused, for good.
func (d *Dispatcher) refuse(s *session, id string, fence uint64, why string) {
	// The lease id and the reason may quote what the executor sent.
	id, why = limits.Short(id), limits.Truncate(why, limits.MaxErrorBytes)
	d.cfg.Log.Info("refused an executor message", "executor", s.executor, "lease", id, "fence", fence, "why", why)
	select {
	case s.out <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Refused{Refused: &tollgatev1.Refused{LeaseId: id, Fence: fence, Message: why}}}:
	default:
	}
}

// answer queues m to the executor; with its queue full it is dropped
// (the executor sends its result again when no answer comes).
func (d *Dispatcher) answer(s *session, m *tollgatev1.ControlMessage) {
	select {
	case s.out <- m:
	default:
	}
}
