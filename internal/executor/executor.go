package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/faults"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/grant"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// ToolSpec is one hosted tool with its MCP annotations and input schema.
type ToolSpec struct {
	Server, Name, Description string
	ReadOnly, Idempotent      bool
	Destructive, OpenWorld    *bool
	// InputSchema is the tool's MCP inputSchema as JSON text ("" when the
	// server gave none). The hello carries it, so the control plane
	// refuses args the tool would refuse before anyone approves them.
	InputSchema string
}

// Host calls tools. Call returns the tool's JSON output, or a *ToolError
// (the tool ran and said no) or a *TransportError (the call may not have
// reached it, or its answer was lost).
type Host interface {
	Tools() []ToolSpec
	Call(ctx context.Context, server, tool string, args json.RawMessage, idempotencyKey string) (json.RawMessage, error)
}

// ToolError is a tool's own failure.
type ToolError struct{ Message string }

func (e *ToolError) Error() string { return e.Message }

// TransportError is a failure to reach the tool or to hear back.
// OutcomeUnknown is true when the call may have run.
type TransportError struct {
	Message        string
	OutcomeUnknown bool
}

func (e *TransportError) Error() string { return e.Message }

// Prose runs prose steps.
type Prose interface {
	Complete(ctx context.Context, prompt string) (string, error)
	Name() (provider, model string)
}

// Template is the prose provider used when no model is configured: it
// returns the prompt with its inputs filled in, and says plainly that no
// model ran.
type Template struct{}

// Complete implements Prose.
func (Template) Complete(_ context.Context, prompt string) (string, error) {
	return "[template provider: no model ran] " + prompt, nil
}

// Name implements Prose.
func (Template) Name() (string, string) { return "template", "" }

// Config configures an executor.
type Config struct {
	ID       string
	Labels   []string
	Capacity int
	Host     Host
	Prose    Prose // nil: no prose steps
	Grants   *grant.Verifier
	// Connect opens the stream to a control plane.
	Connect func(ctx context.Context) (tollgatev1.ExecutorService_ConnectClient, error)
	Log     *slog.Logger
	Now     func() time.Time
	// MinBackoff and MaxBackoff bound reconnect delays.
	MinBackoff, MaxBackoff time.Duration
	// Tracing draws each lease as a span inside its step's span (joined
	// through the lease's traceparent); nil: off.
	Tracing *telemetry.Tracing
	// Status, when set, is kept up to date with whether the executor is
	// connected and whether it is leaving (readiness, admin.go).
	Status *Status
	// DrainTimeout is how long, once ctx ends, the leases being run may go
	// on before those still running are cancelled and reported abandoned
	// (leave, drain.go); the control plane sends no new lease meanwhile.
	// 0: ctx's end stops everything at once (leases in flight end
	// abruptly, so started side effects become in doubt).
	DrainTimeout time.Duration
}

// Run connects, serves leases, and reconnects with backoff until ctx ends.
// With a DrainTimeout it then leaves gracefully (leave, drain.go): no new
// lease, the running ones finish (or are abandoned at the timeout), and
// it says Drained before it hangs up. It returns once every lease
// goroutine, and every other it started, has returned.
//
// Work outlives its stream: a lease being run when the stream breaks
// (its replica died, or the network did) runs on; the next session's
// hello names it (held_leases, with its fence), so the replica the
// executor reaches next re-attaches it, and its start and result are sent
// again there. Only a lease the control plane then says is stale is
// cancelled.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Capacity <= 0 {
		cfg.Capacity = 16
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	// life outlives ctx by the drain: leases, sessions and deliveries live
	// until leave (or, with no drain, ctx's end) kills it.
	life, kill := context.WithCancel(context.WithoutCancel(ctx))
	defer kill()
	c := &conn{cfg: cfg, held: map[string]*work{}, starts: map[string]chan *tollgatev1.ControlMessage{},
		answers: map[string]chan *tollgatev1.ControlMessage{}, life: life, answerWait: 10 * time.Second, next: make(chan struct{}),
		tracer: cfg.Tracing.Tracer("github.com/tollgate-dev/tollgate/internal/executor")}
	var leaver sync.WaitGroup
	leaver.Go(func() {
		select {
		case <-ctx.Done():
		case <-life.Done():
			return
		}
		cfg.Status.leaving()
		if cfg.DrainTimeout > 0 {
			c.leave(cfg.DrainTimeout, kill)
		}
		kill()
	})
	c.loop(life)
	leaver.Wait()
	c.running.Wait()
	return nil
}

// loop runs sessions, reconnecting with backoff, until life ends.
func (c *conn) loop(life context.Context) {
	cfg := c.cfg
	backoff := cfg.MinBackoff
	for {
		start := cfg.Now()
		err := c.session(life)
		cfg.Status.ended(err)
		if life.Err() != nil {
			return
		}
		if c.leftAll() {
			<-life.Done() // leaving, with nothing left to deliver: no new stream
			return
		}
		if cfg.Now().Sub(start) > 30*time.Second {
			backoff = cfg.MinBackoff
		}
		cfg.Log.Warn("control plane stream ended; reconnecting", "error", err, "in", backoff, "running", c.heldCount())
		select {
		case <-life.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, cfg.MaxBackoff)
	}
}

// conn is the executor's side of its control plane: the leases it runs
// (across streams) and the stream of the current session, if any.
type conn struct {
	cfg    Config
	tracer trace.Tracer
	// life is Run's context: a lease's work lives until it ends or the
	// control plane cancels the lease, whatever happens to streams.
	life context.Context

	mu   sync.Mutex
	held map[string]*work // by lease id
	// starts carry the answer to a lease's Start: StartAck, or a Refused
	// NOT_RECORDED (send it again).
	starts map[string]chan *tollgatev1.ControlMessage
	// answers carry the control plane's answer to a lease's result
	// (ResultAck or Refused) to the goroutine delivering it.
	answers map[string]chan *tollgatev1.ControlMessage
	// cur is the current session's stream (nil between sessions); next
	// is closed when the next session opens.
	cur  *link
	next chan struct{}
	// answerWait is how long a result waits for an answer before it is
	// sent again (the lease TTL).
	answerWait time.Duration
	// leaving is set once the executor leaves (leave, drain.go): a lease
	// that arrives after it is returned, not run, and c.running gets no
	// new lease (it is added to under mu, so leave may Wait on it).
	leaving bool

	running sync.WaitGroup // one per lease being run
}

// link is one session's stream.
type link struct {
	stream tollgatev1.ExecutorService_ConnectClient
	sendMu sync.Mutex
	closed bool          // under sendMu: Drained was sent and the send side closed
	done   chan struct{} // closed when the session ends
}

// errSendClosed: Drained was sent on this stream; nothing follows it.
var errSendClosed = errors.New("the stream's send side is closed (drained)")

func (l *link) send(m *tollgatev1.ExecutorMessage) error {
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	if l.closed {
		return errSendClosed
	}
	return l.stream.Send(m)
}

// drained sends Drained and closes the send side, once per stream
// (whether the control plane asked to drain, or the executor leaves).
func (l *link) drained(d *tollgatev1.Drained) {
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	if err := l.stream.Send(&tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Drained{Drained: d}}); err == nil {
		_ = l.stream.CloseSend()
	}
}

type work struct {
	lease  *tollgatev1.Lease
	cancel context.CancelFunc
	// abandoned is set (under conn.mu) when a drain's deadline cancelled
	// the lease (abandon): it did not fail, it was cut short.
	abandoned bool
}

// errNoSession: no stream is open right now.
var errNoSession = errors.New("no control-plane stream is open")

// send sends m on the current session's stream.
func (c *conn) send(m *tollgatev1.ExecutorMessage) error {
	c.mu.Lock()
	l := c.cur
	c.mu.Unlock()
	if l == nil {
		return errNoSession
	}
	return l.send(m)
}

// sendOn sends m on the current session's stream, waiting for a session
// when none is open and sending again on the next one when the send
// fails; it returns the link it went out on, or ctx's error.
func (c *conn) sendOn(ctx context.Context, m *tollgatev1.ExecutorMessage) (*link, error) {
	for {
		c.mu.Lock()
		l, next := c.cur, c.next
		c.mu.Unlock()
		if l == nil {
			select {
			case <-next:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if err := l.send(m); err == nil {
			return l, nil
		}
		select { // the stream broke: its session ends soon
		case <-l.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c *conn) heldCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held)
}

func (c *conn) session(ctx context.Context) error {
	cfg := c.cfg
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := cfg.Connect(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	l := &link{stream: stream, done: make(chan struct{})}
	c.mu.Lock()
	leaving := c.leaving
	c.mu.Unlock()
	credits := uint32(cfg.Capacity)
	if leaving {
		credits = 0 // a stream opened to deliver what runs: no lease is wanted
	}
	hello := &tollgatev1.Hello{ExecutorId: cfg.ID, Labels: cfg.Labels, CapacityCredits: credits, Version: "dev"}
	if cfg.Host != nil {
		for _, t := range cfg.Host.Tools() {
			hello.Tools = append(hello.Tools, &tollgatev1.Tool{Server: t.Server, Tool: t.Name, Description: t.Description,
				Annotations:     &tollgatev1.ToolAnnotations{ReadOnlyHint: t.ReadOnly, IdempotentHint: t.Idempotent, DestructiveHint: t.Destructive, OpenWorldHint: t.OpenWorld},
				InputSchemaJson: t.InputSchema})
		}
	}
	if cfg.Prose != nil {
		p, m := cfg.Prose.Name()
		hello.Prose = &tollgatev1.ProseProvider{Provider: p, Model: m}
	}
	c.mu.Lock()
	for id, w := range c.held {
		hello.HeldLeases = append(hello.HeldLeases, &tollgatev1.LeaseRef{LeaseId: id, Fence: w.lease.GetFence()})
	}
	c.mu.Unlock()
	if err := l.send(&tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Hello{Hello: hello}}); err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	w := first.GetWelcome()
	if w == nil {
		return errors.New("the control plane did not welcome us")
	}
	cfg.Log.Info("connected", "session", w.GetSessionId(), "tools", len(hello.Tools), "held_leases", len(hello.HeldLeases))
	// Leaving, say so before anything else goes out on this stream. One
	// Leaving per stream: leave sends it on the stream it finds published,
	// this session on one published before it left.
	if leaving {
		if err := l.send(leavingMsg()); err != nil {
			return err
		}
	}
	c.mu.Lock()
	if ttl := w.GetLeaseTtl().AsDuration(); ttl > 0 {
		c.answerWait = ttl
	}
	leftSince := c.leaving && !leaving
	c.cur = l
	close(c.next)
	c.next = make(chan struct{})
	c.mu.Unlock()
	cfg.Status.welcomed()
	if leftSince {
		if err := l.send(leavingMsg()); err != nil {
			return err
		}
	}

	var workers sync.WaitGroup
	defer workers.Wait()
	defer cancel()
	defer func() {
		c.mu.Lock()
		if c.cur == l {
			c.cur = nil
		}
		c.mu.Unlock()
		close(l.done)
	}()
	interval := w.GetHeartbeatInterval().AsDuration()
	if interval <= 0 {
		interval = 3 * time.Second
	}
	workers.Add(1)
	go func() {
		defer workers.Done()
		c.heartbeat(ctx, l, interval)
	}()
	draining := false
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		switch x := m.GetMessage().(type) {
		case *tollgatev1.ControlMessage_Lease:
			c.mu.Lock()
			if c.leaving {
				c.mu.Unlock()
				// Sent before our Leaving reached the control plane:
				// not run, not acked, handed back to be offered again.
				cfg.Log.Info("a lease came while leaving; returned", "lease", limits.Short(x.Lease.GetLeaseId()))
				if err := l.send(leavingMsg(&tollgatev1.LeaseRef{LeaseId: x.Lease.GetLeaseId(), Fence: x.Lease.GetFence()})); err != nil {
					return err
				}
				continue
			}
			lctx, lcancel := context.WithCancel(c.life)
			w := &work{lease: x.Lease, cancel: lcancel}
			c.held[x.Lease.GetLeaseId()] = w
			c.running.Add(1)
			c.mu.Unlock()
			go func() {
				defer c.running.Done()
				defer lcancel()
				c.run(lctx, w)
			}()
		case *tollgatev1.ControlMessage_StartAck:
			c.mu.Lock()
			ch := c.starts[x.StartAck.GetLeaseId()]
			c.mu.Unlock()
			if ch != nil {
				latest(ch, m)
			}
		case *tollgatev1.ControlMessage_Cancel:
			if c.stop(x.Cancel.GetLeaseId()) {
				cfg.Log.Info("lease cancelled by the control plane", "lease", limits.Short(x.Cancel.GetLeaseId()), "why", limits.Truncate(x.Cancel.GetReason(), limits.MaxErrorBytes))
			}
		case *tollgatev1.ControlMessage_ResultAck:
			c.answered(x.ResultAck.GetLeaseId(), m)
		case *tollgatev1.ControlMessage_Refused:
			if c.answered(x.Refused.GetLeaseId(), m) {
				continue // about the result being delivered
			}
			if x.Refused.GetReason() == tollgatev1.RefusedReason_REFUSED_REASON_NOT_RECORDED {
				c.mu.Lock()
				ch := c.starts[x.Refused.GetLeaseId()]
				c.mu.Unlock()
				if ch != nil {
					latest(ch, m) // the start is sent again
					continue
				}
			}
			cfg.Log.Warn("control plane refused", "lease", x.Refused.GetLeaseId(), "why", limits.Truncate(x.Refused.GetMessage(), limits.MaxErrorBytes))
			c.stop(x.Refused.GetLeaseId())
		case *tollgatev1.ControlMessage_Drain:
			// Keep receiving: leases still running need their start
			// acks. The control plane ends the stream after Drained.
			if !draining {
				draining = true
				workers.Add(1)
				go func() {
					defer workers.Done()
					c.drain(ctx, l, x.Drain.GetDeadline().AsTime())
				}()
			}
		}
	}
}

// drain lets the leases being run finish until deadline, cancels those
// still running then (reporting them abandoned), sends Drained and closes
// the send side. It blocks until then or until ctx ends.
func (c *conn) drain(ctx context.Context, l *link, deadline time.Time) {
	c.cfg.Log.Info("control plane asks to drain", "deadline", deadline)
	done := make(chan struct{})
	go func() { c.running.Wait(); close(done) }() // ends once every lease's goroutine has
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	drained := &tollgatev1.Drained{}
	select {
	case <-done:
	case <-ctx.Done():
		return
	case <-timer.C:
		drained.Abandoned = c.abandon()
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}
	c.cfg.Log.Info("drained", "abandoned", len(drained.Abandoned))
	l.drained(drained)
}

// stop cancels the work of lease id; false when none runs.
func (c *conn) stop(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.held[id]
	if ok {
		w.cancel()
	}
	return ok
}

func (c *conn) heartbeat(ctx context.Context, l *link, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hb := &tollgatev1.Heartbeat{}
		c.mu.Lock()
		for id, w := range c.held {
			hb.Leases = append(hb.Leases, &tollgatev1.LeaseRef{LeaseId: id, Fence: w.lease.GetFence()})
		}
		c.mu.Unlock()
		if err := l.send(&tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Heartbeat{Heartbeat: hb}}); err != nil {
			return
		}
	}
}

func refusal(reason tollgatev1.RefusalReason, msg string) *tollgatev1.Result {
	return &tollgatev1.Result{Outcome: &tollgatev1.Result_Refusal{Refusal: &tollgatev1.Refusal{Reason: reason, Message: msg}}}
}

var grantReasons = map[error]tollgatev1.RefusalReason{
	grant.ErrMissing: tollgatev1.RefusalReason_REFUSAL_REASON_GRANT_MISSING, grant.ErrUnknownKey: tollgatev1.RefusalReason_REFUSAL_REASON_GRANT_UNKNOWN_KEY,
	grant.ErrBadSignature: tollgatev1.RefusalReason_REFUSAL_REASON_GRANT_BAD_SIGNATURE, grant.ErrExpired: tollgatev1.RefusalReason_REFUSAL_REASON_GRANT_EXPIRED,
	grant.ErrMismatch: tollgatev1.RefusalReason_REFUSAL_REASON_GRANT_MISMATCH, grant.ErrPayload: tollgatev1.RefusalReason_REFUSAL_REASON_PAYLOAD_DIGEST_MISMATCH,
	grant.ErrReused: tollgatev1.RefusalReason_REFUSAL_REASON_GRANT_REUSED, grant.ErrAction: tollgatev1.RefusalReason_REFUSAL_REASON_GRANT_MISMATCH,
}

// run executes one lease and reports its result.
func (c *conn) run(ctx context.Context, w *work) {
	l := w.lease
	defer func() {
		c.mu.Lock()
		delete(c.held, l.GetLeaseId())
		delete(c.starts, l.GetLeaseId())
		c.mu.Unlock()
	}()
	ctx, span := c.leaseSpan(ctx, l)
	res := boundResult(c.execute(ctx, l))
	c.mu.Lock()
	abandoned := w.abandoned
	c.mu.Unlock()
	if te := res.GetTransportError(); te != nil && abandoned {
		// The executor cut the call short at its drain deadline, not the
		// tool or its transport: say its outcome is unknown, so the
		// control plane reports the lease lost and the engine decides
		// (a read-only step is leased again, a started side effect is
		// put in doubt, I7) instead of failing the step.
		te.OutcomeUnknown = true
	}
	if abandoned && res.GetRefusal().GetReason() == tollgatev1.RefusalReason_REFUSAL_REASON_START_NOT_DURABLE {
		// Cut short at the drain deadline while its Start waited for an
		// answer (a store blip during a rollout): the tool was not
		// called, but the Start may be recorded. Lost, not failed: a
		// Start never recorded is leased again; a recorded one goes in
		// doubt, for someone with authority to answer (I7).
		res = &tollgatev1.Result{Outcome: &tollgatev1.Result_TransportError{TransportError: &tollgatev1.TransportError{
			Kind:           tollgatev1.TransportErrorKind_TRANSPORT_ERROR_KIND_CANCELLED,
			Message:        "abandoned at the executor's drain deadline before its start was acknowledged; the tool was not called",
			OutcomeUnknown: true}}}
	}
	endLeaseSpan(span, res)
	res.LeaseId, res.Fence = l.GetLeaseId(), l.GetFence()
	c.deliver(res)
}

// Bounds of the wait before a result the control plane could not record
// is sent again.
const (
	resendMin = 100 * time.Millisecond
	resendMax = 2 * time.Second
)

// deliver sends a lease's result until the control plane answers for it:
// ResultAck (recorded), or a Refused that is for good. A Refused
// NOT_RECORDED (its store is unavailable), or no answer within the lease
// TTL, sends the result again after a backoff. The lease stays held
// meanwhile (run forgets it only after deliver), so heartbeats keep it
// alive and the outcome of a side effect is not lost while the store is
// down. It gives up when the session ends; the control plane then reports
// the lease lost.
func (c *conn) deliver(res *tollgatev1.Result) {
	id := res.GetLeaseId()
	ch := make(chan *tollgatev1.ControlMessage, 1)
	c.mu.Lock()
	c.answers[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.answers, id)
		c.mu.Unlock()
	}()
	msg := &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Result{Result: res}}
	backoff := resendMin
	for sent := 1; ; sent++ {
		l, err := c.sendOn(c.life, msg)
		if err != nil {
			c.cfg.Log.Warn("result not delivered", "lease", id, "error", err)
			return
		}
		c.mu.Lock()
		answerWait := c.answerWait
		c.mu.Unlock()
		wait := time.NewTimer(answerWait)
		select {
		case <-c.life.Done():
			wait.Stop()
			c.cfg.Log.Warn("result not acknowledged before the executor stopped", "lease", id)
			return
		case <-l.done:
			wait.Stop()
			c.cfg.Log.Info("stream ended before the result was acknowledged; sending it on the next", "lease", id)
			continue
		case <-wait.C:
			c.cfg.Log.Warn("no answer to a result; sending it again", "lease", id, "sent", sent)
			continue
		case m := <-ch:
			wait.Stop()
			ref := m.GetRefused()
			if ref == nil {
				return // ResultAck
			}
			if ref.GetReason() != tollgatev1.RefusedReason_REFUSED_REASON_NOT_RECORDED {
				c.cfg.Log.Warn("control plane refused the result", "lease", id, "why", limits.Truncate(ref.GetMessage(), limits.MaxErrorBytes))
				return
			}
			c.cfg.Log.Info("result not recorded yet; sending it again", "lease", id, "in", backoff, "why", limits.Truncate(ref.GetMessage(), limits.MaxErrorBytes))
		}
		select {
		case <-c.life.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, resendMax)
	}
}

// start sends l's Start and waits until the control plane recorded it
// durably; a start it could not record yet (its store is unavailable:
// Refused NOT_RECORDED) is sent again after a backoff, the lease held
// meanwhile. It returns nil once the tool may be invoked, or the refusal
// to report.
func (c *conn) start(ctx context.Context, l *tollgatev1.Lease) *tollgatev1.Result {
	ch := make(chan *tollgatev1.ControlMessage, 1)
	c.mu.Lock()
	c.starts[l.GetLeaseId()] = ch
	c.mu.Unlock()
	msg := &tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Start{Start: &tollgatev1.Start{LeaseId: l.GetLeaseId(), Fence: l.GetFence()}}}
	for backoff := resendMin; ; backoff = min(2*backoff, resendMax) {
		// A stream that ends before the answer: the Start goes again on
		// the next (the replica there re-attached the lease first).
		lk, err := c.sendOn(ctx, msg)
		if err != nil {
			return refusal(tollgatev1.RefusalReason_REFUSAL_REASON_START_NOT_DURABLE, "cancelled before the start was recorded")
		}
		var m *tollgatev1.ControlMessage
		select {
		case m = <-ch:
		case <-lk.done:
			continue
		case <-ctx.Done():
			return refusal(tollgatev1.RefusalReason_REFUSAL_REASON_START_NOT_DURABLE, "cancelled before the start was recorded")
		}
		if ack := m.GetStartAck(); ack != nil {
			if !ack.GetDurable() {
				return refusal(tollgatev1.RefusalReason_REFUSAL_REASON_START_NOT_DURABLE, "the control plane did not record the start")
			}
			return nil
		}
		c.cfg.Log.Info("start not recorded yet; sending it again", "lease", l.GetLeaseId(), "in", backoff)
		select {
		case <-ctx.Done():
			return refusal(tollgatev1.RefusalReason_REFUSAL_REASON_START_NOT_DURABLE, "cancelled before the start was recorded")
		case <-time.After(backoff):
		}
	}
}

// latest puts m in ch (capacity 1) without blocking, in place of an
// older answer still unread: the latest answer is the one that counts.
func latest(ch chan *tollgatev1.ControlMessage, m *tollgatev1.ControlMessage) {
	for {
		select {
		case ch <- m:
			return
		default:
			select {
			case <-ch:
			default:
			}
		}
	}
}

// answered hands the control plane's answer about a lease's result to
// the goroutine delivering it, and reports whether one was waiting. It
// never blocks the receive loop: an answer replaces an older one still
// unread (the latest answer is the one that counts).
func (c *conn) answered(id string, m *tollgatev1.ControlMessage) bool {
	c.mu.Lock()
	ch, ok := c.answers[id]
	c.mu.Unlock()
	if ok {
		latest(ch, m)
	}
	return ok
}

func (c *conn) execute(ctx context.Context, l *tollgatev1.Lease) *tollgatev1.Result {
	// Whether a grant and a durable Start are needed is this executor's
	// own call (I2): see sideEffect.
	se, why := c.sideEffect(l)
	if se {
		if c.cfg.Grants == nil {
			return c.ungranted(l, why, tollgatev1.RefusalReason_REFUSAL_REASON_GRANT_UNKNOWN_KEY, errors.New("this executor trusts no grant key"))
		}
		err := c.cfg.Grants.Verify(wire.GrantFromProto(l.GetGrant()), grant.Lease{RunID: l.GetRunId(), StepID: l.GetStepId(), Action: l.GetServer() + "." + l.GetTool(), Fence: l.GetFence(), Args: []byte(l.GetArgsJson())}, c.cfg.Now())
		if err != nil {
			reason := tollgatev1.RefusalReason_REFUSAL_REASON_UNSPECIFIED
			for kind, r := range grantReasons {
				if errors.Is(err, kind) {
					reason = r
				}
			}
			return c.ungranted(l, why, reason, err)
		}
	}
	if err := c.send(&tollgatev1.ExecutorMessage{Message: &tollgatev1.ExecutorMessage_Ack{Ack: &tollgatev1.Ack{LeaseId: l.GetLeaseId(), Fence: l.GetFence()}}}); err != nil {
		return &tollgatev1.Result{Outcome: &tollgatev1.Result_TransportError{TransportError: &tollgatev1.TransportError{Kind: tollgatev1.TransportErrorKind_TRANSPORT_ERROR_KIND_CONNECTION_LOST, Message: err.Error()}}}
	}
	startAsked := c.cfg.Now()
	if se {
		// Start is recorded durably before the tool is invoked (I7).
		if res := c.start(ctx, l); res != nil {
			return res
		}
		if err := faults.At(faults.AfterStartDurable); err != nil { // fail: as the call failing (the default case below)
			return &tollgatev1.Result{Outcome: &tollgatev1.Result_TransportError{TransportError: &tollgatev1.TransportError{Message: err.Error(), OutcomeUnknown: true}}}
		}
	}
	started := c.cfg.Now()
	var out json.RawMessage
	var err error
	if l.GetKind() == tollgatev1.StepKind_STEP_KIND_PROSE {
		if c.cfg.Prose == nil {
			return refusal(tollgatev1.RefusalReason_REFUSAL_REASON_TOOL_NOT_HOSTED, "this executor runs no prose")
		}
		var text string
		if text, err = c.cfg.Prose.Complete(ctx, l.GetPrompt()); err == nil {
			out, _ = json.Marshal(text)
		}
	} else {
		out, err = c.cfg.Host.Call(ctx, l.GetServer(), l.GetTool(), json.RawMessage(l.GetArgsJson()), l.GetIdempotencyKey())
	}
	// The tool call is not a span of its own (one span per lease keeps
	// tracing's cost per step down, issue 22): the lease's span says how
	// long the call took, and how long it waited for its durable Start.
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.Float64("tollgate.step.call_ms", float64(c.cfg.Now().Sub(started).Microseconds())/1000))
		if se {
			span.SetAttributes(attribute.Float64("tollgate.step.start_wait_ms", float64(started.Sub(startAsked).Microseconds())/1000))
		}
	}
	_ = faults.At(faults.AfterToolCall)
	res := &tollgatev1.Result{StartedAt: timestamppb.New(started), FinishedAt: timestamppb.New(c.cfg.Now())}
	var te *ToolError
	var tr *TransportError
	switch {
	case err == nil:
		if len(out) == 0 || !json.Valid(out) {
			out, _ = json.Marshal(string(out))
		}
		res.Outcome = &tollgatev1.Result_OutputJson{OutputJson: string(out)}
	case errors.As(err, &te):
		res.Outcome = &tollgatev1.Result_ToolError{ToolError: &tollgatev1.ToolError{Message: te.Message}}
	case errors.As(err, &tr):
		res.Outcome = &tollgatev1.Result_TransportError{TransportError: &tollgatev1.TransportError{Kind: tollgatev1.TransportErrorKind_TRANSPORT_ERROR_KIND_CONNECTION_LOST,
			Message: tr.Message, OutcomeUnknown: tr.OutcomeUnknown && se}}
	default:
		res.Outcome = &tollgatev1.Result_TransportError{TransportError: &tollgatev1.TransportError{Kind: tollgatev1.TransportErrorKind_TRANSPORT_ERROR_KIND_UNSPECIFIED,
			Message: err.Error(), OutcomeUnknown: se}}
	}
	return res
}

// leaseSpan starts the executor's span of a lease as a child of the step
// span the lease's traceparent names; with no valid traceparent (or
// tracing off) it records nothing: an executor never starts traces of its
// own, so every span it draws sits inside a run.
func (c *conn) leaseSpan(ctx context.Context, l *tollgatev1.Lease) (context.Context, trace.Span) {
	sc, err := telemetry.ParseTraceparent(l.GetTraceparent())
	if err != nil || !c.cfg.Tracing.Enabled() {
		return ctx, trace.SpanFromContext(ctx) // a no-op span
	}
	ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	name := "execute " + l.GetServer() + "." + l.GetTool()
	if l.GetKind() == tollgatev1.StepKind_STEP_KIND_PROSE {
		name = "execute prose"
	}
	return c.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("tollgate.run.id", l.GetRunId()),
		attribute.String("tollgate.step.id", l.GetStepId()),
		attribute.Int("tollgate.step.attempt", int(l.GetAttempt())),
		attribute.String("tollgate.lease.id", l.GetLeaseId()),
		attribute.String("tollgate.executor", c.cfg.ID),
		attribute.Bool("tollgate.step.side_effect", l.GetSideEffect()),
		attribute.String("mcp.server", l.GetServer()),
		attribute.String("mcp.tool", l.GetTool()),
	))
}

func endLeaseSpan(span trace.Span, res *tollgatev1.Result) {
	switch o := res.GetOutcome().(type) {
	case *tollgatev1.Result_OutputJson:
		span.SetAttributes(attribute.String("tollgate.result", "output"))
	case *tollgatev1.Result_ToolError:
		span.SetAttributes(attribute.String("tollgate.result", "tool_error"))
		span.SetStatus(codes.Error, o.ToolError.GetMessage())
	case *tollgatev1.Result_TransportError:
		span.SetAttributes(attribute.String("tollgate.result", "transport_error"), attribute.Bool("tollgate.outcome_unknown", o.TransportError.GetOutcomeUnknown()))
		span.SetStatus(codes.Error, o.TransportError.GetMessage())
	case *tollgatev1.Result_Refusal:
		span.SetAttributes(attribute.String("tollgate.result", "refused"), attribute.String("tollgate.refusal", o.Refusal.GetReason().String()))
		span.SetStatus(codes.Error, o.Refusal.GetMessage())
	}
	span.End()
}
