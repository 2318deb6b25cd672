package controlplane

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/grant"
	"github.com/tollgate-dev/tollgate/pkg/limits"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// ExecDispatcher leases steps to executors connected over
// ExecutorService.Connect. Credits bound what each executor holds; a lease
// lives while heartbeats arrive; every re-lease has a higher fence (the
// attempt), and anything carrying a stale fence is refused by the engine.
//
// This dispatcher keeps offers in the memory of one replica; steps queued
// in the store are offered again at start-up (Recover).
type ExecDispatcher struct {
	tollgatev1.UnimplementedExecutorServiceServer
	cfg   DispatcherConfig
	views *toolViews

	mu       sync.Mutex
	sessions map[*session]bool
	waiting  []offer
	leases   map[string]*lease
	seq      int
	draining bool
	// unrecorded are lost leases whose loss the store could not record
	// (it was unavailable); each expiry pass (reap) tries again, so a
	// lease lost during an outage still ends in a re-lease or an
	// in-doubt ask once the store is back, with no restart.
	unrecorded []*lease

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	work      chan func() // to recordWorkers
}

// recordWorkers run the handlers that record what executors say (acks,
// starts, results) on goroutines that outlive one message: each handler's
// deep call path (engine, commit, store) then reuses a stack already grown
// instead of growing a fresh one every time. A handler that finds every
// worker busy gets a goroutine of its own. Close stops the workers too.
const recordWorkers = 64

// handle runs f on an idle record worker, or on a goroutine of its own.
func (d *ExecDispatcher) handle(f func()) {
	select {
	case d.work <- f:
	default:
		go f()
	}
}

func (d *ExecDispatcher) recordWorker() {
	defer d.wg.Done()
	for {
		select {
		case f := <-d.work:
			f()
		case <-d.stop:
			return
		}
	}
}

// DispatcherConfig configures an ExecDispatcher.
type DispatcherConfig struct {
	Log        *slog.Logger
	SigningKey ed25519.PrivateKey // signs grants for side-effecting leases
	KeyID      string
	LeaseTTL   time.Duration // default 10s
	GrantTTL   time.Duration // default 5m
	Now        func() time.Time
	// Tracing decides each lease's sampled flag, so an executor's span
	// joins the step's span exactly when the control plane draws the run;
	// nil: off.
	Tracing *telemetry.Tracing
	// Catalog is the configured tool catalog; what executors advertise
	// makes it stricter, never laxer (toolviews.go, Catalog).
	Catalog *compiler.Catalog
}

// offer is a dispatch in hand, with the Recorder its lease and result
// are reported to.
type offer struct {
	rec   runner.Recorder
	runID string
	d     engine.Dispatch
}

type lease struct {
	id       string
	offer    offer
	s        *session
	deadline time.Time
	acked    bool          // the lease is recorded in the run
	ackDone  chan struct{} // closed once the ack has been handled
	// A read-only step's ack is recorded with its result when the result
	// follows soon (one commit instead of two); see leaseRecordDelay.
	ack     ackState // guarded by ExecDispatcher.mu
	ackedAt time.Time
	fold    chan struct{} // closed when the result takes the ack over
	// recording is set while the lease's result is being recorded: a
	// copy of it that the executor sends meanwhile is left to the first
	// copy's answer. Guarded by ExecDispatcher.mu.
	recording bool
}

type ackState int

const (
	ackNone       ackState = iota
	ackDeferred            // acked; the lease waits for its result, or the delay, to be recorded
	ackFolded              // the result records the lease with itself
	ackRecording           // the lease is being recorded on its own
	ackUnrecorded          // folded, but the store was unavailable: the result's next copy folds again
	ackRefused             // never acked: the executor refused it before it started (see refusedBeforeAck)
)

// leaseRecordDelay is how long a read-only step's lease may wait to be
// recorded together with its result. Nothing waits on that record: a
// read-only step's lease is not a side effect's permission (only a Start
// is, and it is always recorded before it is acknowledged), and a lease
// that is lost before it is recorded is offered again at the same fence.
// Watchers see the step leased at most this much later.
const leaseRecordDelay = 20 * time.Millisecond

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
}

// NewExecDispatcher returns a dispatcher; call Close to stop its reaper.
func NewExecDispatcher(cfg DispatcherConfig) *ExecDispatcher {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 10 * time.Second
	}
	if cfg.GrantTTL <= 0 {
		cfg.GrantTTL = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &ExecDispatcher{cfg: cfg, sessions: map[*session]bool{}, leases: map[string]*lease{}, stop: make(chan struct{}), work: make(chan func()),
		views: newToolViews(cfg.Catalog, cfg.Log)}
	d.wg.Add(1 + recordWorkers)
	go d.reap()
	for range recordWorkers {
		go d.recordWorker()
	}
	return d
}

// Drain starts a shutdown: no new lease goes out, and every connected
// executor is asked to finish what it runs by deadline, report, and
// close its stream (so the executor listener's graceful stop can end).
// Steps that become runnable meanwhile stay queued in the store and are
// offered again by the next start-up's Recover. It does not block.
func (d *ExecDispatcher) Drain(deadline time.Time) {
	msg := &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Drain{Drain: &tollgatev1.Drain{Deadline: timestamppb.New(deadline)}}}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.draining = true
	for s := range d.sessions {
		select {
		case s.out <- msg:
		default: // a full queue: the hard stop at the deadline ends it
		}
	}
}

// Close stops the reaper and waits for it.
func (d *ExecDispatcher) Close() {
	close(d.stop)
	d.wg.Wait()
}

func (s *session) takes(o offer) bool {
	if o.d.On != "" && !slices.Contains(s.labels, o.d.On) {
		return false
	}
	if o.d.Kind == plan.KindProse {
		return s.prose
	}
	return s.tools[o.d.Server+"."+o.d.Tool]
}

// Offer implements Dispatcher. It never blocks: the lease is queued to the
// executor's send loop. It reports false when no connected executor offers
// the tool at all (the run is then blocked until one connects).
func (d *ExecDispatcher) Offer(_ context.Context, rec runner.Recorder, runID string, dsp engine.Dispatch) bool {
	o := offer{rec: rec, runID: runID, d: dsp}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.holds(o) {
		return true // offered again (runner.Resettle): it is in hand
	}
	if d.assign(o) {
		return true
	}
	d.waiting = append(d.waiting, o)
	for s := range d.sessions {
		if s.takes(o) {
			return true // someone offers it; it waits for a credit
		}
	}
	return false
}

// holds reports whether o's attempt is leased or waiting here already.
// d.mu is held.
func (d *ExecDispatcher) holds(o offer) bool {
	if _, ok := d.leases[fmt.Sprintf("%s/%s/%d", o.runID, o.d.Step, o.d.Attempt)]; ok {
		return true
	}
	return slices.ContainsFunc(d.waiting, func(w offer) bool {
		return w.runID == o.runID && w.d.Step == o.d.Step && w.d.Attempt == o.d.Attempt
	})
}

// assign leases o to a session with a free credit. d.mu is held.
func (d *ExecDispatcher) assign(o offer) bool {
	if d.draining {
		return false
	}
	if d.refuseUngoverned(o) {
		return true // handled: it fails, it does not wait
	}
	var best *session
	for s := range d.sessions {
		if s.credits > 0 && !s.silent && s.takes(o) && (best == nil || s.credits > best.credits) {
			best = s
		}
	}
	if best == nil {
		return false
	}
	msg, l, err := d.leaseFor(o, best)
	if errors.Is(err, errkind.Undeliverable) {
		d.cfg.Log.Error("lease not sent", "run", o.runID, "step", o.d.Step, "error", err)
		d.refuseStep(o, err.Error())
		return true // handled: its step fails; the stream is untouched
	}
	if err != nil {
		d.cfg.Log.Error("cannot lease", "run", o.runID, "step", o.d.Step, "error", err)
		return false
	}
	select {
	case best.out <- msg:
	default:
		return false // the executor is not reading; leave it waiting
	}
	best.credits--
	d.leases[l.id] = l
	return true
}

// drain hands waiting offers to sessions with credits. d.mu is held.
func (d *ExecDispatcher) drain() {
	kept := d.waiting[:0]
	for _, o := range d.waiting {
		if !d.assign(o) {
			kept = append(kept, o)
		}
	}
	d.waiting = kept
}

func (d *ExecDispatcher) leaseFor(o offer, s *session) (*tollgatev1.ControlMessage, *lease, error) {
	now := d.cfg.Now()
	id := fmt.Sprintf("%s/%s/%d", o.runID, o.d.Step, o.d.Attempt)
	kind := tollgatev1.StepKind_STEP_KIND_TOOL
	if o.d.Kind == plan.KindProse {
		kind = tollgatev1.StepKind_STEP_KIND_PROSE
	}
	pl := &tollgatev1.Lease{LeaseId: id, Fence: uint64(o.d.Attempt), RunId: o.runID, StepId: o.d.Step, Attempt: int32(o.d.Attempt),
		Traceparent: telemetry.Traceparent(telemetry.RunTraceID(o.runID), telemetry.SpanID(id), d.cfg.Tracing.Sampled(telemetry.RunTraceID(o.runID))),
		Kind:        kind, Server: o.d.Server, Tool: o.d.Tool, ArgsJson: string(o.d.Args), Prompt: o.d.Prompt, SideEffect: o.d.SideEffect,
		Idempotent: o.d.Idempotent, Deadline: timestamppb.New(now.Add(d.cfg.LeaseTTL)), IdempotencyKey: o.runID + "/" + o.d.Step}
	if o.d.SideEffect {
		if d.cfg.SigningKey == nil {
			return nil, nil, errors.New("no grant signing key configured")
		}
		digest, err := grant.PayloadDigest(o.d.Args)
		if err != nil {
			return nil, nil, err
		}
		ask := o.d.Grant
		if ask == engine.GrantStart {
			ask = ""
		}
		g := &grant.Grant{RunID: o.runID, StepID: o.d.Step, Action: o.d.Server + "." + o.d.Tool, AskID: ask, PayloadDigest: digest, Fence: uint64(o.d.Attempt), ExpiresAt: now.Add(d.cfg.GrantTTL)}
		grant.Sign(g, d.cfg.KeyID, d.cfg.SigningKey)
		pl.Grant = wire.GrantToProto(g)
	}
	msg := &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Lease{Lease: pl}}
	if err := leaseFits(msg); err != nil {
		return nil, nil, err
	}
	return msg, &lease{id: id, offer: o, s: s, deadline: now.Add(d.cfg.LeaseTTL), ackDone: make(chan struct{}), fold: make(chan struct{})}, nil
}

// Cancel implements Dispatcher.
func (d *ExecDispatcher) Cancel(_ context.Context, runID string, c engine.CancelStep) {
	id := fmt.Sprintf("%s/%s/%d", runID, c.Step, c.Attempt)
	d.mu.Lock()
	defer d.mu.Unlock()
	if l, ok := d.leases[id]; ok {
		select {
		case l.s.out <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Cancel{Cancel: &tollgatev1.Cancel{LeaseId: id, Reason: "the run ended"}}}:
		default:
		}
	}
	d.waiting = slices.DeleteFunc(d.waiting, func(o offer) bool { return o.runID == runID && o.d.Step == c.Step })
}

// lost handles leases whose executor went away: an acknowledged lease is
// reported lost to the engine (which re-leases or asks, I7); one never
// acknowledged is simply offered again.
func (d *ExecDispatcher) lost(ctx context.Context, ls []*lease) {
	for _, l := range ls {
		if !l.acked {
			d.mu.Lock()
			if !d.assign(l.offer) {
				d.waiting = append(d.waiting, l.offer)
			}
			d.mu.Unlock()
			continue
		}
		_, err := l.offer.rec.Event(ctx, l.offer.runID, func(now time.Time) engine.Event {
			return engine.LeaseLost{Step: l.offer.d.Step, Attempt: l.offer.d.Attempt, At: now}
		})
		switch {
		case err == nil, errors.Is(err, engine.ErrStaleAttempt), errors.Is(err, engine.ErrWrongTransition):
		case retryable(err):
			d.cfg.Log.Warn("lease lost, not recorded yet; the next expiry pass tries again", "lease", l.id, "error", err)
			d.mu.Lock()
			d.unrecorded = append(d.unrecorded, l)
			d.mu.Unlock()
		default:
			d.cfg.Log.Error("lease lost, not recorded", "lease", l.id, "error", err)
		}
	}
}

// retryable reports whether err says the store could not record a fact
// now, though it may later: the fact is kept and recorded again.
func retryable(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, errkind.Busy)
}

func (d *ExecDispatcher) reap() {
	defer d.wg.Done()
	t := time.NewTicker(d.cfg.LeaseTTL / 4)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		now := d.cfg.Now()
		var gone []*lease
		d.mu.Lock()
		for id, l := range d.leases {
			if now.After(l.deadline) {
				delete(d.leases, id)
				l.s.credits++
				l.s.silent = true
				gone = append(gone, l)
			}
		}
		again := d.unrecorded
		d.unrecorded = nil
		d.mu.Unlock()
		if len(gone) > 0 {
			d.cfg.Log.Info("leases expired without heartbeat", "count", len(gone))
		}
		if len(gone)+len(again) > 0 {
			d.lost(context.Background(), append(gone, again...))
		}
	}
}

// Connect serves one executor's stream: hello, then leases down and
// acks, starts, heartbeats and results up.
func (d *ExecDispatcher) Connect(stream tollgatev1.ExecutorService_ConnectServer) error {
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
	d.mu.Lock()
	d.seq++
	s := &session{id: fmt.Sprintf("%s#%d", hello.GetExecutorId(), d.seq), executor: hello.GetExecutorId(), labels: hello.GetLabels(),
		tools: map[string]bool{}, prose: hello.GetProse() != nil, credits: int(hello.GetCapacityCredits()),
		out: make(chan *tollgatev1.ControlMessage, 1024)}
	d.mu.Unlock()
	if s.executor == "" {
		s.executor = who
	}
	for _, t := range hello.GetTools() {
		s.tools[t.GetServer()+"."+t.GetTool()] = true
	}
	d.views.advertised(s.executor, hello.GetTools())
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
			}
		}
	}()
	d.mu.Lock()
	d.sessions[s] = true
	d.drain()
	d.mu.Unlock()

	err = d.serve(ctx, stream, s)

	cancel()
	senders.Wait()
	d.mu.Lock()
	delete(d.sessions, s)
	var gone []*lease
	for id, l := range d.leases {
		if l.s == s {
			delete(d.leases, id)
			gone = append(gone, l)
		}
	}
	d.mu.Unlock()
	d.cfg.Log.Info("executor disconnected", "executor", s.executor, "leases_lost", len(gone))
	d.lost(context.WithoutCancel(ctx), gone)
	if errors.Is(err, io.EOF) || errors.Is(ctx.Err(), context.Canceled) {
		return nil
	}
	return err
}

func (d *ExecDispatcher) take(s *session, id string, fence uint64) (*lease, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.leases[id]
	if !ok || l.s != s || uint64(l.offer.d.Attempt) != fence {
		return nil, false
	}
	return l, true
}

func (d *ExecDispatcher) refuse(s *session, id string, fence uint64, why string) {
	// The lease id and the reason may quote what the executor sent.
	id, why = limits.Short(id), limits.Truncate(why, limits.MaxErrorBytes)
	d.cfg.Log.Info("refused an executor message", "executor", s.executor, "lease", id, "fence", fence, "why", why)
	select {
	case s.out <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Refused{Refused: &tollgatev1.Refused{LeaseId: id, Fence: fence, Message: why}}}:
	default:
	}
}

// serve reads the executor's messages. Acks, starts and results are
// handled concurrently (so a fan's results can share a commit), but in
// order per lease: a start or result waits until its lease's ack is done.
func (d *ExecDispatcher) serve(ctx context.Context, stream tollgatev1.ExecutorService_ConnectServer, s *session) error {
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
			l, ok := d.take(s, x.Ack.GetLeaseId(), x.Ack.GetFence())
			if !ok {
				d.refuse(s, x.Ack.GetLeaseId(), x.Ack.GetFence(), "no such lease or a stale fence")
				continue
			}
			if l.offer.d.SideEffect {
				if !d.claimAck(l, ackRecording, time.Time{}) {
					continue // acked again: the first ack records it
				}
				handlers.Add(1)
				d.handle(func() {
					defer handlers.Done()
					d.recordAck(rec, s, l)
				})
				continue
			}
			if !d.claimAck(l, ackDeferred, l.offer.rec.StoreTime()) {
				continue // acked again: the first ack records it
			}
			handlers.Add(1)
			go func() {
				defer handlers.Done()
				t := time.NewTimer(leaseRecordDelay)
				defer t.Stop()
				select {
				case <-l.fold:
					return // the result records it
				case <-t.C:
				case <-ctx.Done(): // the stream is over: record what we heard
				}
				d.mu.Lock()
				state := l.ack
				mine := state == ackDeferred && d.leases[l.id] == l
				if mine {
					l.ack = ackRecording
				}
				d.mu.Unlock()
				switch {
				case state == ackFolded, state == ackUnrecorded:
					return // the result records it, and closes ackDone
				case !mine:
					// Lost before it was recorded: it was offered again at
					// the same fence.
					close(l.ackDone)
					return
				}
				handlers.Add(1) // on a record worker, to commit
				d.handle(func() {
					defer handlers.Done()
					d.recordAck(rec, s, l)
				})
			}()
		case *tollgatev1.ExecutorMessage_Start:
			l, ok := d.take(s, x.Start.GetLeaseId(), x.Start.GetFence())
			if ok && !d.ackHeard(l) {
				// A Start with no ack before it (or after a refusal) has no
				// ackDone that will close: not durable, so nothing runs.
				ok = false
			}
			handlers.Add(1)
			d.handle(func() {
				defer handlers.Done()
				durable := false
				if ok {
					<-l.ackDone
					_, err := l.offer.rec.Event(rec, l.offer.runID, func(now time.Time) engine.Event {
						return engine.StepStarted{Step: l.offer.d.Step, Attempt: l.offer.d.Attempt, At: now}
					})
					if err != nil && engineRefusal(err) && d.startedBefore(rec, l) {
						err = nil // an earlier copy of this Start was recorded
					}
					if err != nil && retryable(err) {
						// Not refused: the executor holds the lease (its
						// heartbeats keep it) and sends the Start again.
						d.cfg.Log.Warn("start not recorded yet; the executor sends it again", "executor", s.executor, "lease", l.id, "error", err)
						d.answer(s, &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Refused{Refused: &tollgatev1.Refused{LeaseId: l.id, Fence: x.Start.GetFence(),
							Reason: tollgatev1.RefusedReason_REFUSED_REASON_NOT_RECORDED, Message: "the start is not recorded yet (" + clientText(err) + "): send it again"}}})
						return
					}
					durable = err == nil
				}
				// Acknowledged only after the store committed it (I7).
				ack := &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_StartAck{StartAck: &tollgatev1.StartAck{LeaseId: x.Start.GetLeaseId(), Fence: x.Start.GetFence(), Durable: durable}}}
				select {
				case s.out <- ack:
				case <-ctx.Done():
				}
			})
		case *tollgatev1.ExecutorMessage_Heartbeat:
			now := d.cfg.Now()
			d.mu.Lock()
			if s.silent {
				s.silent = false
				d.drain()
			}
			for _, ref := range x.Heartbeat.GetLeases() {
				if l, ok := d.leases[ref.GetLeaseId()]; ok && l.s == s && uint64(l.offer.d.Attempt) == ref.GetFence() {
					l.deadline = now.Add(d.cfg.LeaseTTL)
				}
			}
			d.mu.Unlock()
		case *tollgatev1.ExecutorMessage_Result:
			handlers.Add(1)
			d.handle(func() {
				defer handlers.Done()
				d.result(rec, s, x.Result)
			})
		case *tollgatev1.ExecutorMessage_Credit:
			d.mu.Lock()
			s.credits += int(x.Credit.GetCredits())
			d.drain()
			d.mu.Unlock()
		case *tollgatev1.ExecutorMessage_Drained:
			return nil
		}
	}
}

// claimAck marks l acknowledged (state, at) unless an ack of it was
// already heard: a lease offered twice to one executor (it expired and was
// offered again at the same fence) is acked twice, and only the first ack
// may record it (and close its ackDone).
func (d *ExecDispatcher) claimAck(l *lease, state ackState, at time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l.ack != ackNone {
		return false
	}
	l.ack, l.ackedAt = state, at
	return true
}

// ackHeard reports whether l's ack was heard (and so its ackDone closes
// once the ack is handled).
func (d *ExecDispatcher) ackHeard(l *lease) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return l.ack != ackNone && l.ack != ackRefused
}

// leasedEvent is the engine event for an executor's ack of l.
func (d *ExecDispatcher) leasedEvent(s *session, l *lease, at time.Time) func(now time.Time) engine.Event {
	return func(now time.Time) engine.Event {
		if !at.IsZero() {
			now = at
		}
		return engine.StepLeased{Step: l.offer.d.Step, Attempt: l.offer.d.Attempt, Executor: s.executor, LeaseID: l.id, At: now}
	}
}

// Bounds of the wait before an ack the store could not record is tried
// again.
const (
	ackRetryMin = 50 * time.Millisecond
	ackRetryMax = time.Second
)

// recordAck commits an executor's ack of l on its own. An ack the store
// cannot record now (unavailable, busy) is recorded again while the lease
// lives: its executor holds it (heartbeats keep it) and waits for its
// Start's answer. Offering it again instead would send the same fence and
// grant a second time, which the executor refuses (a grant is used once,
// I7) and the step would never run. The lease gone (expired, its session
// over) or the dispatcher closed ends the retries: lost has then offered
// the unacknowledged lease again. ackDone is closed in every case, so no
// Start or result waits for it forever.
func (d *ExecDispatcher) recordAck(ctx context.Context, s *session, l *lease) {
	defer close(l.ackDone)
	var err error
	for backoff := ackRetryMin; ; backoff = min(2*backoff, ackRetryMax) {
		_, err = l.offer.rec.Event(ctx, l.offer.runID, d.leasedEvent(s, l, l.ackedAt))
		if err != nil && engineRefusal(err) && d.leasedBefore(ctx, s, l) {
			err = nil // an earlier try was written, its answer lost
		}
		if err == nil || !retryable(err) {
			break
		}
		if !d.holding(l) {
			return // lost meanwhile: offered again already
		}
		d.cfg.Log.Warn("lease ack not recorded yet; trying again", "executor", s.executor, "lease", l.id, "in", backoff, "error", err)
		select {
		case <-time.After(backoff):
		case <-d.stop:
			return
		}
	}
	if err != nil {
		d.drop(l)
		d.refuse(s, l.id, uint64(l.offer.d.Attempt), clientText(err))
		if !engineRefusal(err) {
			// Not the engine saying no (a store hiccup): the step is still
			// queued, so offer it again.
			d.reoffer(l.offer)
		}
		return
	}
	d.mu.Lock()
	l.acked = true
	l.deadline = d.cfg.Now().Add(d.cfg.LeaseTTL)
	d.mu.Unlock()
}

// holding reports whether l is still this dispatcher's live lease.
func (d *ExecDispatcher) holding(l *lease) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.leases[l.id] == l
}

// leasedBefore reports whether l's attempt is recorded as leased to s's
// executor under l's id (by an earlier try whose answer was lost).
func (d *ExecDispatcher) leasedBefore(ctx context.Context, s *session, l *lease) bool {
	run, _, err := l.offer.rec.Get(ctx, l.offer.runID)
	if err != nil {
		return false
	}
	st, ok := run.Steps[l.offer.d.Step]
	if !ok || st.Attempt != l.offer.d.Attempt || st.Status != engine.StatusLeased || len(st.Attempts) == 0 {
		return false
	}
	a := st.Attempts[len(st.Attempts)-1]
	return a.LeaseID == l.id && a.Executor == s.executor
}

func (d *ExecDispatcher) reoffer(o offer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.assign(o) {
		d.waiting = append(d.waiting, o)
	}
}

// drop forgets a lease and returns its credit.
func (d *ExecDispatcher) drop(l *lease) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.leases[l.id] == l {
		delete(d.leases, l.id)
		l.s.credits++
		d.drain()
	}
}

func (d *ExecDispatcher) result(ctx context.Context, s *session, r *tollgatev1.Result) {
	l, ok := d.take(s, r.GetLeaseId(), r.GetFence())
	if !ok {
		d.refuse(s, r.GetLeaseId(), r.GetFence(), "no such lease or a stale fence: the result is not recorded")
		return
	}
	d.mu.Lock()
	if l.recording {
		// A copy of a result being recorded: the first copy's answer
		// answers the executor.
		d.mu.Unlock()
		return
	}
	if l.ack == ackNone || l.ack == ackRefused {
		// No ack came first (an executor acks before it starts anything).
		l.recording = true
		l.ack = ackRefused // an ack sent after this is not recorded
		d.mu.Unlock()
		d.refusedBeforeAck(ctx, s, l, r)
		return
	}
	l.recording = true
	first := l.ack == ackDeferred
	folded := first || l.ack == ackUnrecorded
	if first {
		close(l.fold)
	}
	if folded {
		l.ack = ackFolded
	}
	d.mu.Unlock()
	if !folded {
		<-l.ackDone
	}
	step, attempt := l.offer.d.Step, l.offer.d.Attempt
	var build func(now time.Time) engine.Event
	switch o := r.GetOutcome().(type) {
	case *tollgatev1.Result_OutputJson:
		build = func(now time.Time) engine.Event {
			return engine.StepSucceeded{Step: step, Attempt: attempt, Output: []byte(o.OutputJson), At: now}
		}
	case *tollgatev1.Result_ToolError:
		build = func(now time.Time) engine.Event {
			return engine.StepFailed{Step: step, Attempt: attempt, Error: "tool error: " + o.ToolError.GetMessage(), At: now}
		}
	case *tollgatev1.Result_TransportError:
		if o.TransportError.GetOutcomeUnknown() {
			build = func(now time.Time) engine.Event { return engine.LeaseLost{Step: step, Attempt: attempt, At: now} }
		} else {
			build = func(now time.Time) engine.Event {
				return engine.StepFailed{Step: step, Attempt: attempt, Error: "transport: " + o.TransportError.GetMessage(), At: now}
			}
		}
	case *tollgatev1.Result_Refusal:
		build = func(now time.Time) engine.Event {
			return engine.StepFailed{Step: step, Attempt: attempt, Error: "executor refused: " + o.Refusal.GetMessage(), At: now}
		}
	}
	var builds []func(time.Time) engine.Event
	if folded {
		// The lease and its result are recorded in one commit.
		builds = append(builds, d.leasedEvent(s, l, l.ackedAt))
	}
	if build != nil {
		builds = append(builds, build)
	}
	var err error
	if len(builds) > 0 {
		_, err = l.offer.rec.Events(ctx, l.offer.runID, builds...)
	}
	if first {
		close(l.ackDone)
	}
	d.settle(ctx, s, l, r.GetFence(), folded, err)
}

// settle answers an executor's result once recording it was tried (err
// is how that went). Recorded, now or by an earlier copy of the same
// result: ResultAck, and the lease is done. The store unavailable:
// NOT_RECORDED, and the lease is kept (its heartbeats keep it alive) for
// the copy the executor sends again; the executor holds the result until
// it is recorded, so a side effect's outcome is not lost in an outage.
// Refused by the engine (a stale fence, a run that moved on): Refused,
// for good. Anything else: Refused, and the lease is reported lost, so
// the run never waits for a result that will not be recorded.
func (d *ExecDispatcher) settle(ctx context.Context, s *session, l *lease, fence uint64, folded bool, err error) {
	switch {
	case err == nil:
	case retryable(err):
		d.mu.Lock()
		l.recording = false
		if folded {
			l.ack = ackUnrecorded
		}
		d.mu.Unlock()
		d.cfg.Log.Warn("result not recorded yet; the executor sends it again", "executor", s.executor, "lease", l.id, "fence", fence, "error", err)
		// Nothing about the store (its socket or address) goes to the
		// executor.
		d.answer(s, &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Refused{Refused: &tollgatev1.Refused{LeaseId: l.id, Fence: fence,
			Reason: tollgatev1.RefusedReason_REFUSED_REASON_NOT_RECORDED, Message: "the result is not recorded yet (" + store.ErrUnavailable.Error() + "): send it again"}}})
		return
	case engineRefusal(err) && d.reported(ctx, l):
		// An earlier copy was recorded; this one was not applied again.
	default:
		d.drop(l)
		d.refuse(s, l.id, fence, clientText(err))
		if !engineRefusal(err) {
			d.lost(ctx, []*lease{l})
		}
		return
	}
	d.drop(l)
	d.answer(s, &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_ResultAck{ResultAck: &tollgatev1.ResultAck{LeaseId: l.id, Fence: fence}}})
}

// reported reports whether l's attempt already ended with a result its
// executor reported (recorded by an earlier copy of the same result).
func (d *ExecDispatcher) reported(ctx context.Context, l *lease) bool {
	run, _, err := l.offer.rec.Get(ctx, l.offer.runID)
	return err == nil && run.Reported(l.offer.d.Step, l.offer.d.Attempt)
}

// startedBefore reports whether l's attempt is recorded as started (by an
// earlier copy of the same Start whose answer was lost).
func (d *ExecDispatcher) startedBefore(ctx context.Context, l *lease) bool {
	run, _, err := l.offer.rec.Get(ctx, l.offer.runID)
	if err != nil {
		return false
	}
	st, ok := run.Steps[l.offer.d.Step]
	return ok && st.Attempt == l.offer.d.Attempt && st.Status == engine.StatusStarted
}

// answer queues m to the executor; with its queue full it is dropped
// (the executor sends its result again when no answer comes).
func (d *ExecDispatcher) answer(s *session, m *tollgatev1.ControlMessage) {
	select {
	case s.out <- m:
	default:
	}
}

// engineRefusal reports whether err is the engine refusing an event that
// no longer fits the run (so retrying it is pointless).
func engineRefusal(err error) bool {
	return errors.Is(err, engine.ErrStaleAttempt) || errors.Is(err, engine.ErrWrongTransition) ||
		errors.Is(err, engine.ErrUnknownStep) || errors.Is(err, engine.ErrRunEnded)
}

// refusedBeforeAck records the result of a lease its executor never
// acknowledged. An executor acks a lease before it starts anything, and
// refuses one it will not run (a grant that does not verify, a tool it
// takes as side-effecting that the plan did not) before acking it: nothing
// ran, so this is no lost lease to offer again (the refusal would come
// back, or the used grant would be refused as reused), and no side effect
// can be in doubt (its Start, which needs the ack, was never recorded).
// The still-queued step fails with the executor's reason, in one commit
// (StepRefused), and the run goes on as its on_fail says. Any other
// outcome without an ack breaks the protocol and fails the step the same
// way. Copies of the result are answered like any result's (settle).
func (d *ExecDispatcher) refusedBeforeAck(ctx context.Context, s *session, l *lease, r *tollgatev1.Result) {
	why := "sent a result without acknowledging the lease"
	if ref := r.GetRefusal(); ref != nil {
		why = "refused the lease before starting it: " + ref.GetMessage()
	}
	why = limits.Truncate("executor "+s.executor+" "+why, limits.MaxErrorBytes)
	_, err := l.offer.rec.Event(ctx, l.offer.runID, func(now time.Time) engine.Event {
		return engine.StepRefused{Step: l.offer.d.Step, Attempt: l.offer.d.Attempt, Reason: why, At: now}
	})
	d.settle(ctx, s, l, r.GetFence(), false, err)
}
