package dispatch

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// Dispatcher leases steps to executors connected over
// ExecutorService.Connect. Credits bound what each executor holds; a lease
// lives while heartbeats arrive; every re-lease has a higher fence (the
// attempt), and anything carrying a stale fence is refused by the engine.
//
// This dispatcher keeps offers in the memory of one replica; steps queued
// in the store are offered again at start-up (Recover).
type Dispatcher struct {
	tollgatev1.UnimplementedExecutorServiceServer
	cfg   Config
	views *toolViews

	mu       sync.Mutex
	sessions map[*session]bool
	waiting  []offer
	leases   map[string]*lease
	byRun    map[string]int  // leases held per run
	rec      runner.Recorder // while Run runs: for re-attached leases
	seq      int
	draining bool
	// unrecorded are lost leases whose loss the store could not record
	// (it was unavailable); each expiry pass (reap) tries again, so a
	// lease lost during an outage still ends in a re-lease or an
	// in-doubt ask once the store is back, with no restart.
	unrecorded []*lease

	// capacity is signalled when this dispatcher may take more work from
	// the store: an executor connected, or credits came back.
	capacity chan struct{}
	// announce is signalled when what the executors here serve changed.
	announce chan struct{}

	stop     chan struct{} // closed when Run stops: waits give up
	work     chan func()   // to recordWorkers
	handlers sync.WaitGroup
	hmu      sync.Mutex
	stopped  bool // under hmu: Run has stopped; handle runs f itself
}

var _ runner.Dispatcher = (*Dispatcher)(nil)

// DefaultLeaseTTL is how long a lease lives without a heartbeat unless
// configured.
const DefaultLeaseTTL = 10 * time.Second

// Config configures a Dispatcher.
type Config struct {
	Log        *slog.Logger
	SigningKey ed25519.PrivateKey // signs grants for side-effecting leases
	KeyID      string
	LeaseTTL   time.Duration // default DefaultLeaseTTL
	GrantTTL   time.Duration // default 5m
	Now        func() time.Time
	// Tracing decides each lease's sampled flag, so an executor's span
	// joins the step's span exactly when the control plane draws the run;
	// nil: off.
	Tracing *telemetry.Tracing
	// Catalog is the configured tool catalog; what executors advertise
	// makes it stricter, never laxer (toolviews.go, Catalog).
	Catalog *compiler.Catalog
	// Replica names the replica this dispatcher leases for: every lease
	// records it, so other replicas leave the lease alone while this one
	// lives (runner.Runner.Recover).
	Replica string
}

// offer is a dispatch in hand, with the Recorder its lease and result
// are reported to.
type offer struct {
	rec   runner.Recorder
	runID string
	d     engine.Dispatch
}

// New returns a dispatcher. It starts nothing: its owner runs Run for as
// long as the executor listener serves.
func New(cfg Config) *Dispatcher {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.GrantTTL <= 0 {
		cfg.GrantTTL = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &Dispatcher{cfg: cfg, sessions: map[*session]bool{}, leases: map[string]*lease{}, byRun: map[string]int{}, stop: make(chan struct{}), work: make(chan func()),
		capacity: make(chan struct{}, 1), announce: make(chan struct{}, 1),
		views: newToolViews(cfg.Catalog, cfg.Log)}
	return d
}

// Run runs the record workers and the expiry pass until ctx ends; then
// it stops them, and returns once they and every handler they started
// have. Run it once, for as long as the executor listener serves (and
// until that listener has drained, so executors' last reports are
// recorded).
//
// rec is what leases re-attached by their executors (reattach.go) report
// through: the Runner, which offers every other lease with itself.
func (d *Dispatcher) Run(ctx context.Context, rec runner.Recorder) error {
	d.mu.Lock()
	d.rec = rec
	d.mu.Unlock()
	var wg sync.WaitGroup
	for range recordWorkers {
		wg.Go(d.recordWorker)
	}
	wg.Go(d.reap)
	<-ctx.Done()
	close(d.stop)
	wg.Wait()
	d.hmu.Lock()
	d.stopped = true
	d.hmu.Unlock()
	d.handlers.Wait()
	return nil
}

// Drain starts a shutdown: no new lease goes out, and every connected
// executor is asked to finish what it runs by deadline, report, and
// close its stream (so the executor listener's graceful stop can end).
// Steps that become runnable meanwhile stay queued in the store and are
// offered again by the next start-up's Recover. It does not block.
func (d *Dispatcher) Drain(deadline time.Time) {
	msg := &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Drain{Drain: &tollgatev1.Drain{Deadline: timestamppb.New(deadline)}}}
	d.mu.Lock()
	d.draining = true
	for s := range d.sessions {
		select {
		case s.out <- msg:
		default: // a full queue: the hard stop at the deadline ends it
		}
	}
	waiting := d.waiting
	d.waiting = nil
	d.mu.Unlock()
	d.changed()
	// What waits here goes back to the store for the other replicas.
	d.release(context.Background(), waiting)
}

// Offer implements runner.Dispatcher. It never blocks: the lease is
// queued to the executor's send loop. It reports false when no executor
// connected here offers the tool (or the dispatcher drains): the caller
// gives the step back to the store.
func (d *Dispatcher) Offer(_ context.Context, rec runner.Recorder, runID string, dsp engine.Dispatch) bool {
	o := offer{rec: rec, runID: runID, d: dsp}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.holds(o) {
		return true // offered again: it is in hand
	}
	if d.assign(o) {
		return true
	}
	if d.draining || !d.served(o.d.Target()) {
		return false
	}
	d.waiting = append(d.waiting, o) // someone offers it; it waits for a credit
	return true
}

// Serves implements runner.Dispatcher.
func (d *Dispatcher) Serves(t engine.Target) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.draining && d.served(t)
}

// Free implements runner.Dispatcher.
func (d *Dispatcher) Free(t engine.Target) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining {
		return 0
	}
	n := 0
	for s := range d.sessions {
		if s.credits > 0 && !s.silent && s.serves(t) {
			n += s.credits
		}
	}
	for _, o := range d.waiting {
		if o.d.Target() == t {
			n--
		}
	}
	return max(n, 0)
}

// served reports whether a session offers t. d.mu is held.
func (d *Dispatcher) served(t engine.Target) bool {
	for s := range d.sessions {
		if s.serves(t) {
			return true
		}
	}
	return false
}

// Wants is how many steps of each queue this dispatcher would lease now:
// the free credits of the executors serving it, less what already waits
// here for a credit. Draining, it wants nothing.
func (d *Dispatcher) Wants() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining {
		return nil
	}
	out := map[string]int{}
	for s := range d.sessions {
		if s.credits <= 0 || s.silent || s.leaving {
			continue
		}
		for _, q := range s.queues() {
			out[q] += s.credits
		}
	}
	for _, o := range d.waiting {
		q := runner.QueueOf(o.d.Target())
		if out[q]--; out[q] <= 0 {
			delete(out, q)
		}
	}
	return out
}

// Queues lists the queues the executors connected here serve, for the
// replica's announcement; none while draining.
func (d *Dispatcher) Queues() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining {
		return nil
	}
	set := map[string]bool{}
	for s := range d.sessions {
		if s.leaving {
			continue
		}
		for _, q := range s.queues() {
			set[q] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// Capacity is signalled (coalesced) when this dispatcher may take more
// work from the store; Changed when what it serves changed.
func (d *Dispatcher) Capacity() <-chan struct{} { return d.capacity }

// Changed: see Capacity.
func (d *Dispatcher) Changed() <-chan struct{} { return d.announce }

func (d *Dispatcher) freed() {
	select {
	case d.capacity <- struct{}{}:
	default:
	}
}

func (d *Dispatcher) changed() {
	d.freed()
	select {
	case d.announce <- struct{}{}:
	default:
	}
}

// unservedWaiting takes the waiting offers no session serves any more.
// d.mu is held.
func (d *Dispatcher) unservedWaiting() []offer {
	var out []offer
	kept := d.waiting[:0]
	for _, o := range d.waiting {
		if d.served(o.d.Target()) {
			kept = append(kept, o)
		} else {
			out = append(out, o)
		}
	}
	d.waiting = kept
	return out
}

// release gives offers back to the store, for whichever replica serves
// them. d.mu is not held.
func (d *Dispatcher) release(ctx context.Context, os []offer) {
	for _, o := range os {
		o.rec.Release(ctx, o.runID, o.d)
	}
}

// holds reports whether o's attempt is leased or waiting here already.
// d.mu is held.
func (d *Dispatcher) holds(o offer) bool {
	if _, ok := d.leases[leaseID(o.runID, o.d.Step, o.d.Attempt)]; ok {
		return true
	}
	return slices.ContainsFunc(d.waiting, func(w offer) bool {
		return w.runID == o.runID && w.d.Step == o.d.Step && w.d.Attempt == o.d.Attempt
	})
}

// assign leases o to a session with a free credit. d.mu is held.
func (d *Dispatcher) assign(o offer) bool {
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
	d.putLease(l)
	return true
}

// handOut hands waiting offers to sessions with credits (a credit came
// back, a session connected or was heard from again). d.mu is held.
func (d *Dispatcher) handOut() {
	kept := d.waiting[:0]
	for _, o := range d.waiting {
		if !d.assign(o) {
			kept = append(kept, o)
		}
	}
	d.waiting = kept
}

// reoffer offers o again: leased now if a session has a credit, or else
// waiting for one.
func (d *Dispatcher) reoffer(o offer) {
	d.mu.Lock()
	if d.assign(o) {
		d.mu.Unlock()
		return
	}
	if !d.draining && d.served(o.d.Target()) {
		d.waiting = append(d.waiting, o)
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	d.release(context.Background(), []offer{o})
}

// Cancel implements runner.Dispatcher.
func (d *Dispatcher) Cancel(_ context.Context, runID string, c engine.CancelStep) {
	id := leaseID(runID, c.Step, c.Attempt)
	d.mu.Lock()
	defer d.mu.Unlock()
	if l, ok := d.leases[id]; ok {
		l.cancelled = true
		select {
		case l.s.out <- &tollgatev1.ControlMessage{Message: &tollgatev1.ControlMessage_Cancel{Cancel: &tollgatev1.Cancel{LeaseId: id, Reason: "the run ended"}}}:
		default:
		}
	}
	d.waiting = slices.DeleteFunc(d.waiting, func(o offer) bool { return o.runID == runID && o.d.Step == c.Step })
}

// leaseID names the lease of one attempt of a step: run/step/attempt.
func leaseID(runID, step string, attempt int) string {
	return fmt.Sprintf("%s/%s/%d", runID, step, attempt)
}
