package approvals

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// Sender sends one stored delivery until it is final (pkg/webhook's
// Notifier.Deliver): every attempt goes to rec as it happens; a delivery
// cut short by ctx comes back not Final, and unrecorded.
type Sender interface {
	Deliver(ctx context.Context, endpoint string, raw []byte, rec webhook.Recorder) webhook.Delivery
}

// DeliveryQueue is the part of the store a Deliverer works: the outbox's
// entries, claimed for this replica and finished once final.
type DeliveryQueue interface {
	ClaimWork(ctx context.Context, queue, owner string, n int) ([]store.Work, error)
	ReleaseWork(ctx context.Context, owner string, refs []store.WorkRef) error
	FinishWork(ctx context.Context, refs []store.WorkRef) error
}

// DelivererConfig is what a Deliverer needs.
type DelivererConfig struct {
	Store  DeliveryQueue
	Sender Sender
	// Recorder journals each attempt in the run the notice is about (the
	// Runner; DeliveryJournal).
	Recorder runner.Recorder
	// Replica is the owner this replica claims as; its claims are
	// released by the other replicas once its heartbeat lapses.
	Replica string
	// Held, if set, is asked on every tick to release the notices it
	// holds back too long (the Desk's ReleaseHeld).
	Held interface{ ReleaseHeld(ctx context.Context) }
	// Every is how often the outbox is looked at with no hint (default
	// 1s); MaxInHand bounds the deliveries claimed and not yet final
	// (default 256), waiting to retry included.
	Every     time.Duration
	MaxInHand int
	Log       *slog.Logger
}

// Deliverer sends the notices of the outbox (outbox.go): it claims
// entries of Queue for its replica, hands each to the Sender, and
// finishes the entry when its delivery is final — delivered, rejected,
// attempts exhausted, or its endpoint no longer configured — every
// attempt journaled in the run. A delivery it stops in the middle of goes
// back to the store for any replica.
type Deliverer struct {
	cfg DelivererConfig

	mu     sync.Mutex
	inHand int
	back   []store.WorkRef // deliveries cut short: released when Run returns
	undone []store.WorkRef // final, but FinishWork failed: finished again
	room   chan struct{}   // a delivery ended
}

// NewDeliverer returns a Deliverer.
func NewDeliverer(cfg DelivererConfig) *Deliverer {
	if cfg.Every <= 0 {
		cfg.Every = time.Second
	}
	if cfg.MaxInHand <= 0 {
		cfg.MaxInHand = 256
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Deliverer{cfg: cfg, room: make(chan struct{}, 1)}
}

// Run claims and delivers notices until ctx ends: every Every, at once on
// a signal from wake (a hint that the outbox holds work), and when a
// delivery ends while MaxInHand are in hand. When ctx ends it stops the deliveries under way, waits
// for them, and releases those not final to the store.
func (d *Deliverer) Run(ctx context.Context, wake <-chan struct{}) error {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		d.releaseBack(ctx)
		if c, ok := d.cfg.Sender.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
	}()
	t := time.NewTicker(d.cfg.Every)
	defer t.Stop()
	for {
		d.finishUndone(ctx)
		for d.claim(ctx, &wg) {
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if d.cfg.Held != nil {
				d.cfg.Held.ReleaseHeld(ctx)
			}
		case <-wake:
		case <-d.room:
		}
	}
}

// claim claims what room allows and starts delivering it; true when it
// got all it asked for (more may wait).
func (d *Deliverer) claim(ctx context.Context, wg *sync.WaitGroup) bool {
	if ctx.Err() != nil {
		return false
	}
	d.mu.Lock()
	n := d.cfg.MaxInHand - d.inHand
	d.mu.Unlock()
	if n <= 0 {
		return false
	}
	ws, err := d.cfg.Store.ClaimWork(ctx, Queue, d.cfg.Replica, n)
	if err != nil {
		if ctx.Err() == nil {
			d.cfg.Log.Warn("could not claim notices", "error", err)
		}
		return false
	}
	d.mu.Lock()
	d.inHand += len(ws)
	d.mu.Unlock()
	for _, w := range ws {
		wg.Go(func() { d.deliver(ctx, w) })
	}
	return len(ws) == n
}

// deliver sends one claimed notice until it is final, then finishes it.
func (d *Deliverer) deliver(ctx context.Context, w store.Work) {
	defer func() {
		d.mu.Lock()
		full := d.inHand >= d.cfg.MaxInHand
		d.inHand--
		d.mu.Unlock()
		if full { // claims stopped for want of room: claim again now
			select {
			case d.room <- struct{}{}:
			default:
			}
		}
	}()
	var body noticeBody
	if err := json.Unmarshal(w.Body, &body); err != nil || body.Endpoint == "" {
		// Not something this replica wrote: nobody can send it.
		d.cfg.Log.Error("notice unreadable; finished unsent", "run", w.RunID, "work", w.ID)
		d.finish(ctx, w.Ref())
		return
	}
	dl := d.cfg.Sender.Deliver(ctx, body.Endpoint, body.Event, DeliveryJournal{Runner: d.cfg.Recorder})
	if !dl.Final {
		d.mu.Lock()
		d.back = append(d.back, w.Ref())
		d.mu.Unlock()
		return
	}
	d.finish(ctx, w.Ref())
}

// finish removes a notice whose delivery is final; one the store did not
// take is finished again on the next round (while this replica lives it
// stays claimed by it, so nobody sends it again).
func (d *Deliverer) finish(ctx context.Context, ref store.WorkRef) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := d.cfg.Store.FinishWork(fctx, []store.WorkRef{ref}); err != nil {
		d.cfg.Log.Warn("delivered notice not finished; trying again", "run", ref.RunID, "work", ref.ID, "error", err)
		d.mu.Lock()
		d.undone = append(d.undone, ref)
		d.mu.Unlock()
	}
}

func (d *Deliverer) finishUndone(ctx context.Context) {
	d.mu.Lock()
	refs := d.undone
	d.undone = nil
	d.mu.Unlock()
	if len(refs) == 0 {
		return
	}
	if err := d.cfg.Store.FinishWork(ctx, refs); err != nil {
		d.mu.Lock()
		d.undone = append(d.undone, refs...)
		d.mu.Unlock()
	}
}

// releaseBack gives the deliveries cut short back to the store, for any
// replica, and finishes the final ones not yet finished; what it cannot
// release is released by the others once this replica's heartbeat lapses.
func (d *Deliverer) releaseBack(ctx context.Context) {
	d.mu.Lock()
	back, undone := d.back, d.undone
	d.back, d.undone = nil, nil
	d.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if len(undone) > 0 {
		if err := d.cfg.Store.FinishWork(rctx, undone); err != nil {
			d.cfg.Log.Warn("delivered notices not finished; another replica may send them again", "entries", len(undone), "error", err)
		}
	}
	if len(back) > 0 {
		if err := d.cfg.Store.ReleaseWork(rctx, d.cfg.Replica, back); err != nil {
			d.cfg.Log.Warn("notices not released; other replicas take them when this one's heartbeat lapses", "entries", len(back), "error", err)
		}
	}
}
