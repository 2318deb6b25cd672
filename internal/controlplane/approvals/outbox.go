package approvals

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

// Notices go through a transactional outbox. The commit that opens,
// reminds, escalates, expires or decides an ask enqueues, in the same
// atomic write as the run, one work entry per notice and endpoint that
// wants it (Work, the Runner's Outbox) in the queue Queue; a Deliverer on
// any replica claims the entries, sends them (pkg/webhook's Deliver),
// journals every attempt in the run, and finishes each entry once its
// delivery is final. Nothing pending lives only in a replica's memory: a
// replica that dies holding claimed deliveries loses them to the others
// once its heartbeat lapses (runner.ReleaseClaims), and they are sent
// from there. A rung of the deadline ladder is an engine transition
// committed against the run's version, so of two replicas applying it
// one commits, and its notice is enqueued once.
//
// Delivery is at least once: a delivery taken over mid-request may reach
// the receiver twice. "Once" is once per notice at the receiver: every
// request of one notice carries the same event id (webhook.Event.ID: the
// run, the ask, the kind and the run's version; stable across attempts,
// replicas and endpoints), which receivers dedupe on, while its
// Tollgate-Delivery id is per request (the shipped Verifier refuses a
// request seen before, so a retry needs a fresh one).
//
// An opened notice is held back: the Desk's Opened hook, after the commit,
// may decide the ask at once by a standing approval or escalate it, and
// then the decided or escalated notice tells instead, as it always did.
// So the commit enqueues opened notices claimed by this replica (nobody
// else sends them); Opened then releases them to waiting, or finishes
// them unsent. A replica that dies before Opened ran loses its claims to
// the others, which send the opened notice; one whose hook never ran
// while it lives (a commit of unknown outcome, a caller gone) releases
// them after heldFor (ReleaseHeld, on the Deliverer's tick).

// Queue is the work queue of webhook deliveries.
const Queue = "webhook"

// WorkStore is what the Desk does to the notices it holds back.
type WorkStore interface {
	ReleaseWork(ctx context.Context, owner string, refs []store.WorkRef) error
	FinishWork(ctx context.Context, refs []store.WorkRef) error
}

// Limits on held-back opened notices: how long one waits for its Opened
// hook, and how many wait at once (past that, opened notices wait in the
// outbox at once, and may precede a standing approval's decision).
const (
	heldFor = 30 * time.Second
	maxHeld = 4096
)

// noticeBody is a notice's work entry body: what the Deliverer needs.
type noticeBody struct {
	Endpoint string          `json:"endpoint"`
	Event    json.RawMessage `json:"event"`
}

// Work implements runner.Outbox: one entry per notice the effects call
// for and endpoint that wants it. A notice the Notifier refuses (too
// large) or an entry no store can keep is logged and left out: a notice
// must never stop the commit that moves the run.
func (d *Desk) Work(run *engine.Run, effects []engine.Effect) []store.Work {
	if d.cfg.Notifier == nil {
		return nil
	}
	var out []store.Work
	for _, e := range effects {
		askID, kind, ok := noticeKind(e)
		if !ok {
			continue
		}
		a := run.Asks[askID]
		if a == nil {
			continue
		}
		ev := d.notice(run, a, kind)
		raw, endpoints, err := d.cfg.Notifier.Prepare(ev)
		if err != nil {
			d.log().Error("notice not enqueued", "ask", ev.AskID, "kind", kind, "error", err)
			continue
		}
		var held []store.WorkRef
		for _, ep := range endpoints {
			body, err := json.Marshal(noticeBody{Endpoint: ep, Event: raw})
			if err != nil {
				continue // cannot happen: raw came from json.Marshal
			}
			w := store.Work{Queue: Queue, ID: noticeWorkID(run.ID, ev.ID, ep), RunID: run.ID, Body: body}
			if err := store.CheckWork(run.ID, w.Ref(), w.Body); err != nil {
				d.log().Error("notice not enqueued", "ask", ev.AskID, "kind", kind, "endpoint", ep, "error", err)
				continue
			}
			if kind == webhook.KindOpened && d.holds() {
				w.Owner = d.cfg.Replica
				held = append(held, w.Ref())
			}
			out = append(out, w)
		}
		if len(held) > 0 && !d.held.add(ev.ID, held) {
			for i := len(out) - len(held); i < len(out); i++ {
				out[i].Owner = "" // too many held: it waits at once
			}
		}
	}
	return out
}

// noticeWorkID is the work id of one notice to one endpoint: the event id
// and the endpoint's name, or, when that is too long or holds a newline,
// the run id and a digest of both (ids start with the run id: they are
// unique within the run's shard).
func noticeWorkID(runID, eventID, endpoint string) string {
	id := eventID + "/" + endpoint
	if len(id) <= store.MaxWorkName && store.CheckWork(runID, store.WorkRef{Queue: Queue, ID: id, RunID: runID}, nil) == nil {
		return id
	}
	sum := sha256.Sum256([]byte(eventID + "\x00" + endpoint))
	return runID + "/notice/" + hex.EncodeToString(sum[:16])
}

func (d *Desk) holds() bool { return d.cfg.Work != nil && d.cfg.Replica != "" }

// settleOpened lets the held opened notices of an ask go to any replica
// (tell), or finishes them unsent.
func (d *Desk) settleOpened(ctx context.Context, run *engine.Run, askID string, tell bool) {
	if !d.holds() {
		return
	}
	id := noticeID(run, askID, webhook.KindOpened)
	refs := d.held.take(id)
	if len(refs) == 0 {
		return
	}
	// The caller may be gone (its RPC ended); the notices must not wait
	// for the next tick because of it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var err error
	if tell {
		err = d.cfg.Work.ReleaseWork(ctx, d.cfg.Replica, refs)
	} else {
		err = d.cfg.Work.FinishWork(ctx, refs)
	}
	if err != nil {
		// Released on the next tick instead (ReleaseHeld): an opened
		// notice sent late, or sent though the ask is settled, rather
		// than lost.
		d.log().Warn("held notices not settled; released later", "ask", askID, "error", err)
		d.held.readd(id, refs)
	}
}

// ReleaseHeld releases the opened notices held back longer than heldFor:
// their Opened hook never ran. Releasing an entry that was never
// committed, or was settled meanwhile, does nothing. The Deliverer calls
// it on its tick.
func (d *Desk) ReleaseHeld(ctx context.Context) {
	if !d.holds() {
		return
	}
	due := d.held.due(time.Now())
	for id, refs := range due {
		if err := d.cfg.Work.ReleaseWork(ctx, d.cfg.Replica, refs); err != nil {
			d.held.readd(id, refs)
			if ctx.Err() == nil {
				d.log().Warn("held notices not released; trying again", "notice", id, "error", err)
			}
		}
	}
}

// heldNotices are the opened notices this replica holds back, by event id.
type heldNotices struct {
	mu   sync.Mutex
	byID map[string]heldNotice
}

type heldNotice struct {
	refs  []store.WorkRef
	until time.Time
}

// add holds refs back for heldFor; false when too many are held. A commit
// built again replaces what its earlier build held.
func (h *heldNotices) add(id string, refs []store.WorkRef) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byID == nil {
		h.byID = map[string]heldNotice{}
	}
	if _, ok := h.byID[id]; !ok && len(h.byID) >= maxHeld {
		return false
	}
	h.byID[id] = heldNotice{refs: refs, until: time.Now().Add(heldFor)}
	return true
}

// readd holds refs again, due at once.
func (h *heldNotices) readd(id string, refs []store.WorkRef) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byID == nil {
		h.byID = map[string]heldNotice{}
	}
	h.byID[id] = heldNotice{refs: refs}
}

func (h *heldNotices) take(id string) []store.WorkRef {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.byID[id]
	delete(h.byID, id)
	return n.refs
}

// due takes the notices held past their time.
func (h *heldNotices) due(now time.Time) map[string][]store.WorkRef {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out map[string][]store.WorkRef
	for id, n := range h.byID {
		if !now.Before(n.until) {
			if out == nil {
				out = map[string][]store.WorkRef{}
			}
			out[id] = n.refs
			delete(h.byID, id)
		}
	}
	return out
}
