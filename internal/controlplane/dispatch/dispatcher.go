package dispatch

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
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
	seq      int
	draining bool
	// unrecorded are lost leases whose loss the store could not record
	// (it was unavailable); each expiry pass (reap) tries again, so a
	// lease lost during an outage still ends in a re-lease or an
	// in-doubt ask once the store is back, with no restart.
	unrecorded []*lease

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
	d := &Dispatcher{cfg: cfg, sessions: map[*session]bool{}, leases: map[string]*lease{}, stop: make(chan struct{}), work: make(chan func()),
		views: newToolViews(cfg.Catalog, cfg.Log)}
	return d
}

// Run runs the record workers and the expiry pass until ctx ends; then
// it stops them, and returns once they and every handler they started
// have. Run it once, for as long as the executor listener serves (and
// until that listener has drained, so executors' last reports are
// recorded).
func (d *Dispatcher) Run(ctx context.Context) error {
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
	defer d.mu.Unlock()
	d.draining = true
	for s := range d.sessions {
		select {
		case s.out <- msg:
		default: // a full queue: the hard stop at the deadline ends it
		}
	}
}

// Offer implements runner.Dispatcher. It never blocks: the lease is
// queued to the executor's send loop. It reports false when no connected
// executor offers the tool at all (the run is then blocked until one
// connects).
func (d *Dispatcher) Offer(_ context.Context, rec runner.Recorder, runID string, dsp engine.Dispatch) bool {
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
	d.leases[l.id] = l
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
	defer d.mu.Unlock()
	if !d.assign(o) {
		d.waiting = append(d.waiting, o)
	}
}

// Cancel implements runner.Dispatcher.
func (d *Dispatcher) Cancel(_ context.Context, runID string, c engine.CancelStep) {
	id := leaseID(runID, c.Step, c.Attempt)
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

// leaseID names the lease of one attempt of a step: run/step/attempt.
func leaseID(runID, step string, attempt int) string {
	return fmt.Sprintf("%s/%s/%d", runID, step, attempt)
}
