package runner

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Runnable steps live in the store (DESIGN.md §6): the commit that makes
// a step queued enqueues its work in the same write, and the commit that
// moves it on (leased, cancelled, the run ended) finishes it. When this
// replica's dispatcher serves the step, the entry is claimed by this
// replica in that commit and offered at once (the direct hand-off);
// otherwise it waits in the store until a replica whose executors offer
// the tool claims it (Claim), and the run is blocked only when no live
// replica serves it.

// QueueOf names the work queue of a target: "tool:SERVER.TOOL" or
// "prose", with "@LABEL" for a step placed on a label.
func QueueOf(t engine.Target) string {
	q := "tool:" + t.Server + "." + t.Tool
	if t.Kind == plan.KindProse {
		q = "prose"
	}
	if t.On != "" {
		q += "@" + t.On
	}
	return q
}

// WorkID is the work id of one attempt of a step: the lease id,
// RUN/STEP/ATTEMPT.
func WorkID(runID, step string, attempt int) string {
	return runID + "/" + step + "/" + strconv.Itoa(attempt)
}

// ParseWorkID splits a step's work id (a lease id) RUN/STEP/ATTEMPT; run
// ids hold no "/", step ids may.
func ParseWorkID(id string) (runID, step string, attempt int, ok bool) {
	runID, rest, found := strings.Cut(id, "/")
	i := strings.LastIndexByte(rest, '/')
	if !found || runID == "" || i <= 0 {
		return "", "", 0, false
	}
	n, err := strconv.Atoi(rest[i+1:])
	if err != nil || WorkID(runID, rest[:i], n) != id {
		return "", "", 0, false
	}
	return runID, rest[:i], n, true
}

// handoffs are the attempts this replica claimed in their own commit:
// effects offers them to the local dispatcher.
type handoffs struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (h *handoffs) add(ids []string) {
	if len(ids) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ids == nil {
		h.ids = map[string]bool{}
	}
	for _, id := range ids {
		h.ids[id] = true
	}
}

// take reports whether id was handed off here, and forgets it.
func (h *handoffs) take(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	ok := h.ids[id]
	delete(h.ids, id)
	return ok
}

// LeaseQueue holds an entry for every attempt in flight, owned by the
// replica holding its lease. Every replica claims from it, whatever its
// executors serve: when a replica dies, its claims are released, and
// whoever claims an in-flight entry next reports the lease lost unless it
// was re-attached elsewhere meanwhile (offerClaimed). So a lease of a dead
// replica is recovered even if no executor of the survivors offers its
// tool, and for runs the survivors have never read.
const LeaseQueue = "lease"

// entry is where a step's attempt lives in the work queues: its tool's
// queue while queued (owner: this replica when it serves the tool), the
// lease queue while in flight (owner: the replica holding the lease); ok
// false when it is in neither.
func (r *Runner) entry(m *engine.Machine, run *engine.Run, sid string, s *engine.StepRun) (w store.Work, ok bool) {
	if run.State.Terminal() {
		return store.Work{}, false
	}
	t, known := m.TargetOf(sid)
	if !known {
		return store.Work{}, false
	}
	w = store.Work{ID: WorkID(run.ID, sid, s.Attempt), RunID: run.ID}
	switch {
	case s.Status == engine.StatusQueued:
		w.Queue = QueueOf(t)
	case s.Status.InFlight():
		w.Queue, w.Owner = LeaseQueue, ownerOf(s)
		if w.Owner == "" {
			w.Owner = r.replica
		}
	default:
		return store.Work{}, false
	}
	return w, true
}

// stepWork is the work a transition from before to after enqueues and
// finishes: an attempt that entered a queue (or moved between queues or
// owners) is enqueued there, and one that left is finished. A queued
// attempt is claimed by this replica in the same commit when its
// dispatcher serves the tool (owned lists those, for effects to offer).
func (r *Runner) stepWork(m *engine.Machine, before, after *engine.Run) (enq []store.Work, fin []store.WorkRef, owned []string) {
	if before != nil {
		for sid, b := range before.Steps {
			old, ok := r.entry(m, before, sid, b)
			if !ok {
				continue
			}
			if a := after.Steps[sid]; a != nil {
				if cur, ok := r.entry(m, after, sid, a); ok && cur.ID == old.ID && cur.Queue == old.Queue && (cur.Owner == old.Owner || cur.Queue != LeaseQueue) {
					continue
				}
			}
			fin = append(fin, old.Ref())
		}
	}
	free := map[engine.Target]int{} // what this commit may still hand off, by target
	for sid, a := range after.Steps {
		w, ok := r.entry(m, after, sid, a)
		if !ok {
			continue
		}
		if before != nil {
			if b := before.Steps[sid]; b != nil {
				if old, ok := r.entry(m, before, sid, b); ok && old.ID == w.ID && old.Queue == w.Queue && (old.Owner == w.Owner || w.Queue != LeaseQueue) {
					continue
				}
			}
		}
		if w.Queue != LeaseQueue {
			// Handed off here when an executor here can take it now, or
			// when one here offers it and no other replica does; else it
			// waits in the store for whichever replica has room first.
			t, _ := m.TargetOf(sid)
			n, asked := free[t]
			if !asked && r.dispatch.Serves(t) {
				n = r.dispatch.Free(t)
				if !r.servedElsewhere(w.Queue) {
					n = len(after.Steps) // nobody else: all of them, however busy
				}
			}
			if n > 0 {
				w.Owner = r.replica
				owned = append(owned, w.ID)
				n--
			}
			free[t] = n
		}
		enq = append(enq, w)
	}
	return enq, fin, owned
}

// unserved reports whether no live replica serves queue q, by what
// replicas last announced (Announce); before any announcement is read,
// every queue counts as unserved.
func (r *Runner) unserved(q string) bool {
	r.served.mu.Lock()
	defer r.served.mu.Unlock()
	return !r.served.queues[q]
}

// servedElsewhere reports whether another live replica announced q.
func (r *Runner) servedElsewhere(q string) bool {
	r.served.mu.Lock()
	defer r.served.mu.Unlock()
	return r.served.others[q]
}

// servedQueues is the union of what live replicas announced, and of what
// the others did.
type servedQueues struct {
	mu     sync.Mutex
	queues map[string]bool
	others map[string]bool
}

// Announce records in the store, for ttl, the queues this replica's
// dispatcher serves, and reads what every live replica serves (which
// decides whether a step nobody here serves is blocked). The owner of the
// Runner's goroutines calls it with each heartbeat, and when the
// executors connected here change.
func (r *Runner) Announce(ctx context.Context, queues []string, ttl time.Duration) error {
	if err := r.store.Announce(ctx, r.replica, queues, ttl); err != nil {
		return err
	}
	reps, err := r.store.Served(ctx)
	if err != nil {
		return err
	}
	all, others := map[string]bool{}, map[string]bool{}
	for _, rep := range reps {
		for _, q := range rep.Queues {
			all[q] = true
			if rep.Name != r.replica {
				others[q] = true
			}
		}
	}
	for _, q := range queues {
		all[q] = true
	}
	r.served.mu.Lock()
	r.served.queues, r.served.others = all, others
	r.served.mu.Unlock()
	return nil
}

// Claim claims up to n waiting steps of queue for this replica and offers
// each to the dispatcher; a step that moved on meanwhile is finished, and
// one the dispatcher cannot take after all is released. It returns how
// many it offered.
func (r *Runner) Claim(ctx context.Context, queue string, n int) (int, error) {
	// A claim that failed on some shards still claimed on others: what
	// came back is offered, and the error returned after.
	ws, claimErr := r.store.ClaimWork(ctx, queue, r.replica, n)
	offered := 0
	var stale, back []store.WorkRef
	for _, w := range ws {
		switch r.offerClaimed(ctx, w) {
		case claimOffered:
			offered++
		case claimStale:
			stale = append(stale, w.Ref())
		case claimBack:
			back = append(back, w.Ref())
		}
	}
	if len(stale) > 0 {
		if err := r.store.FinishWork(ctx, stale); err != nil {
			r.log.LogAttrs(ctx, slog.LevelWarn, "could not finish stale work", slog.Int("entries", len(stale)), slog.String("error", err.Error()))
		}
	}
	if len(back) > 0 {
		if err := r.store.ReleaseWork(ctx, r.replica, back); err != nil {
			return offered, err
		}
	}
	return offered, claimErr
}

type claimOutcome int

const (
	claimOffered claimOutcome = iota
	claimStale                // the step is no longer queued at that attempt
	claimBack                 // not offered now: give it back
	claimKept                 // not offered now, kept claimed (see offerClaimed)
)

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

func (r *Runner) offerClaimed(ctx context.Context, w store.Work) claimOutcome {
	runID, step, attempt, ok := ParseWorkID(w.ID)
	if !ok || runID != w.RunID {
		return claimStale
	}
	run, m, err := r.Get(ctx, w.RunID)
	if err != nil {
		if isNotFound(err) {
			return claimStale
		}
		// Kept, not given back at once: a release hints every replica,
		// which would claim it again straight away. Resettle releases it
		// once the run reads again.
		r.unsure.add(w.RunID)
		return claimKept
	}
	if w.Queue == LeaseQueue {
		return r.leaseClaimed(ctx, run, step, attempt)
	}
	d, ok := m.DispatchOf(run, step, attempt)
	if !ok {
		return claimStale
	}
	if !r.dispatch.Offer(ctx, r, w.RunID, d) {
		return claimBack
	}
	return claimOffered
}

// leaseClaimed handles a claimed entry of the lease queue: released from
// a replica that is gone. A lease still in flight at that attempt whose
// replica is gone is reported lost (the engine re-leases a read-only step
// or asks whether a started side effect ran); one whose replica lives (it
// was re-attached there) is left to it, its run watched by Takeover; an
// attempt no longer in flight is stale. The entry stays claimed by this
// replica until the step moves on, so if this replica dies too, another
// looks at it again.
func (r *Runner) leaseClaimed(ctx context.Context, run *engine.Run, step string, attempt int) claimOutcome {
	s := run.Steps[step]
	if run.State.Terminal() || s == nil || s.Attempt != attempt || !s.Status.InFlight() {
		return claimStale
	}
	alive, err := r.ownerAlive(ctx, s)
	if err != nil {
		r.awaiting.add(run.ID)
		return claimOffered
	}
	if alive {
		r.awaiting.add(run.ID)
		return claimOffered
	}
	owner := ownerOf(s)
	if _, err := r.apply(ctx, run.ID, func(now time.Time) engine.Event {
		return engine.LeaseLost{Step: step, Attempt: attempt, Replica: owner, At: now}
	}); err != nil && !errors.Is(err, engine.ErrStaleAttempt) && !errors.Is(err, engine.ErrWrongTransition) {
		r.awaiting.add(run.ID)
	}
	return claimOffered
}

// Release gives a step this replica claimed back to the store, for any
// replica that serves it: the dispatcher calls it for a step it holds but
// can no longer lease (its executors went away).
func (r *Runner) Release(ctx context.Context, runID string, d engine.Dispatch) {
	ref := store.WorkRef{Queue: QueueOf(d.Target()), ID: WorkID(runID, d.Step, d.Attempt), RunID: runID}
	if err := r.store.ReleaseWork(ctx, r.replica, []store.WorkRef{ref}); err != nil {
		r.log.LogAttrs(ctx, slog.LevelWarn, "could not release work", slog.String("work", ref.ID), slog.String("error", err.Error()))
		r.unsure.add(runID) // Resettle releases it again
	}
}

// releaseQueued gives back every queued step of run that this replica
// may own in the store (after a commit of unknown outcome): whoever
// serves it claims it again, this replica included.
func (r *Runner) releaseQueued(ctx context.Context, m *engine.Machine, run *engine.Run) error {
	var refs []store.WorkRef
	for sid, s := range run.Steps {
		if s.Status != engine.StatusQueued {
			continue
		}
		if t, ok := m.TargetOf(sid); ok {
			refs = append(refs, store.WorkRef{Queue: QueueOf(t), ID: WorkID(run.ID, sid, s.Attempt), RunID: run.ID})
		}
	}
	if len(refs) == 0 {
		return nil
	}
	return r.store.ReleaseWork(ctx, r.replica, refs)
}

// ReleaseClaims releases the claims of every replica that is gone: one
// whose heartbeat lapsed, or this replica's own name from an earlier
// process when mine is true (a replica that just started holds nothing).
// Recover calls it with mine; the takeover pass without.
func (r *Runner) ReleaseClaims(ctx context.Context, mine bool) error {
	ws, err := r.store.ClaimedWork(ctx)
	if err != nil {
		return err
	}
	byOwner := map[string][]store.WorkRef{}
	for _, w := range ws {
		byOwner[w.Owner] = append(byOwner[w.Owner], w.Ref())
	}
	var first error
	for owner, refs := range byOwner {
		if owner == r.replica {
			if !mine {
				continue
			}
		} else if alive, err := r.store.Alive(ctx, owner); err != nil {
			first = cmp.Or(first, err)
			continue // unknown is not dead
		} else if alive {
			continue
		}
		if err := r.store.ReleaseWork(ctx, owner, refs); err != nil {
			first = cmp.Or(first, err)
			continue
		}
		r.log.LogAttrs(ctx, slog.LevelInfo, "released the claims of a replica that is gone", slog.String("replica", owner), slog.Int("entries", len(refs)))
	}
	return first
}

// maxClaim bounds one claim of one queue.
const maxClaim = 256

// Claiming claims waiting steps for this replica until ctx ends. A claim
// costs a script per shard, so it claims only where work is known to
// wait: a queue named by a hint (hinted: another replica's, or a
// release's, "work waits in Q"), or one whose last claim gave all that
// was asked (more may wait), as soon as this replica has room for it
// (room: an executor connected or credits came back); and every interval
// it sweeps every queue it serves, so a lost hint costs at most that
// much latency. wants says how many steps of each queue the dispatcher
// would lease now.
func (r *Runner) Claiming(ctx context.Context, every time.Duration, wants func() map[string]int, hinted <-chan string, room <-chan struct{}) error {
	t := time.NewTicker(every)
	defer t.Stop()
	pending := map[string]bool{}
	for {
		sweep := false
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			sweep = true
		case q := <-hinted:
			pending[q] = true
		case <-room:
		}
		for drained := false; !drained; { // every hint already queued
			select {
			case q := <-hinted:
				pending[q] = true
			default:
				drained = true
			}
		}
		for again := true; again && ctx.Err() == nil; {
			again = false
			// One queue at a time, asking again before each: a session's
			// credits count for every queue it serves, and what one claim
			// leased is no longer free for the next.
			for _, q := range slices.Sorted(maps.Keys(wants())) {
				if !sweep && !pending[q] {
					continue
				}
				n := min(wants()[q], maxClaim)
				if n <= 0 {
					continue
				}
				got, err := r.Claim(ctx, q, n)
				if err != nil {
					if ctx.Err() == nil {
						r.log.LogAttrs(ctx, slog.LevelWarn, "could not claim work", slog.String("queue", q), slog.String("error", err.Error()))
					}
					continue
				}
				if got == n {
					pending[q], again = true, true
				} else {
					delete(pending, q)
				}
			}
			sweep = false
		}
	}
}
