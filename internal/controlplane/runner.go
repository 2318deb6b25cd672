package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/lru"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/limits"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Runner is the one road (I2): every entry point — API, CLI, retries,
// resumes — moves runs through it, and it moves them only through the
// engine, committing each transition atomically before acting on it.
type Runner struct {
	runnerPerf
	store    store.Store
	dispatch Dispatcher
	log      *slog.Logger
	engine   engine.Config
	newID    func() string

	mu       sync.Mutex
	machines *lru.Cache[string, *engine.Machine] // by plan digest; plans are immutable
	watchers map[string]map[*RunWatch]bool
	queues   map[string]*runQueue
	cache    *lru.Cache[string, cachedRun] // runs this replica committed last; under mu with ended
	offset   atomic.Int64                  // store clock minus ours, nanoseconds
	expiries atomic.Int64

	// asks hears of every ask this replica opens, after its commit.
	asks AskHook
	// observers hear of every transition this replica commits.
	observers []Observer
	// unsure are runs whose last commit failed with an unknown outcome.
	unsure unsureRuns
}

// Observer hears of every transition this replica commits, after the
// commit, on the committing goroutine: before is the run as it was (nil
// when the run was created), after as it is now, records what happened,
// in order. Several events may share one commit. Observers feed traces
// and metrics: they must not block, fail, or change the run; anything
// slow (export) is handed to a goroutine the observer owns. A crash
// between the commit and the call loses the observation, never the fact.
type Observer interface {
	Committed(ctx context.Context, m *engine.Machine, before, after *engine.Run, records []engine.Record)
}

// AskHook hears of an ask after the commit that opened it: it applies
// standing approvals and sends notices. It runs on the committing
// goroutine and may apply further events to the run. A hook that never
// ran (a crash right after the commit) leaves the ask for a person: the
// safe side.
type AskHook interface {
	Opened(ctx context.Context, run *engine.Run, askID string)
	Noticed(ctx context.Context, run *engine.Run, askID, kind string)
	Closed(ctx context.Context, run *engine.Run, askID string, state engine.AskState)
}

// runnerPerf is what a Runner keeps to save store round trips.
type runnerPerf struct {
	ended    *lru.Cache[string, cachedRun] // ended runs, for readers; under Runner.mu
	offsetAt atomic.Int64                  // when offset was measured, our clock, Unix ns; 0 never
	// refreshing is set while one caller measures a stale offset again.
	refreshing atomic.Bool
}

// RunWatch follows the commits this replica makes to one run.
type RunWatch struct {
	ch     chan struct{}
	latest atomic.Pointer[engine.Run]
	stop   func()
}

// C receives a signal (coalesced) after each commit this replica makes to
// the run. Other replicas' commits are seen by polling; watchers must poll
// too.
func (w *RunWatch) C() <-chan struct{} { return w.ch }

// Latest is the newest run this replica has committed since the watch
// began (nil if none): it is durable, and immutable.
func (w *RunWatch) Latest() *engine.Run { return w.latest.Load() }

// Stop ends the watch.
func (w *RunWatch) Stop() { w.stop() }

func (w *RunWatch) offer(run *engine.Run) {
	for {
		cur := w.latest.Load()
		if cur != nil && cur.Version >= run.Version {
			break
		}
		if w.latest.CompareAndSwap(cur, run) {
			break
		}
	}
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// Watch returns a channel that receives a signal (coalesced) after each
// commit this replica makes to the run, and a func to stop watching.
// Other replicas' commits are seen by polling; watchers must poll too.
func (r *Runner) Watch(runID string) (<-chan struct{}, func()) {
	w := r.Follow(runID)
	return w.C(), w.Stop
}

// Follow is Watch that also hands over the runs committed.
func (r *Runner) Follow(runID string) *RunWatch {
	w := &RunWatch{ch: make(chan struct{}, 1)}
	r.mu.Lock()
	if r.watchers[runID] == nil {
		r.watchers[runID] = map[*RunWatch]bool{}
	}
	r.watchers[runID][w] = true
	r.mu.Unlock()
	w.stop = func() {
		r.mu.Lock()
		delete(r.watchers[runID], w)
		if len(r.watchers[runID]) == 0 {
			delete(r.watchers, runID)
		}
		r.mu.Unlock()
	}
	return w
}

// notify hands a committed run to the run's watchers.
func (r *Runner) notify(run *engine.Run) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range []string{run.ID, AnyRun} {
		for w := range r.watchers[id] {
			w.offer(run)
		}
	}
}

// AnyRun, passed to Watch, watches every run this replica commits.
const AnyRun = ""

// Expiries counts asks this replica saw expire.
func (r *Runner) Expiries() int64 { return r.expiries.Load() }

// Dispatcher is the seam between the engine and whatever runs steps.
// Offer must not block on the step's work: it accepts the dispatch (and
// later reports leases and results through Runner.Step) or refuses it
// because no executor offers the tool, which makes the run blocked.
type Dispatcher interface {
	Offer(ctx context.Context, runID string, d engine.Dispatch) bool
	Cancel(ctx context.Context, runID string, c engine.CancelStep)
}

// NoExecutors is the dispatcher before any executor is connected: every
// runnable step is blocked.
type NoExecutors struct{}

// Offer implements Dispatcher.
func (NoExecutors) Offer(context.Context, string, engine.Dispatch) bool { return false }

// Cancel implements Dispatcher.
func (NoExecutors) Cancel(context.Context, string, engine.CancelStep) {}

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	Store      store.Store
	Dispatcher Dispatcher // nil means NoExecutors
	Log        *slog.Logger
	Engine     engine.Config
	NewID      func() string // nil means random ids
	Observers  []Observer    // traces, metrics
	// PlanCache bounds the plans (engines) kept in memory, least recently
	// used evicted; an evicted plan is loaded from the store again when a
	// run of it moves. 0 means DefaultPlanCache.
	PlanCache int
}

// DefaultPlanCache is how many plans a replica keeps in each of its plan
// caches (engines, compilations, plan views) unless configured.
const DefaultPlanCache = 256

// NewRunner returns a Runner.
func NewRunner(cfg RunnerConfig) *Runner {
	if cfg.Dispatcher == nil {
		cfg.Dispatcher = NoExecutors{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.NewID == nil {
		cfg.NewID = randomID
	}
	if cfg.PlanCache <= 0 {
		cfg.PlanCache = DefaultPlanCache
	}
	return &Runner{store: cfg.Store, dispatch: cfg.Dispatcher, log: cfg.Log, engine: cfg.Engine, newID: cfg.NewID, observers: cfg.Observers,
		machines: lru.New[string, *engine.Machine](cfg.PlanCache), watchers: map[string]map[*RunWatch]bool{}, queues: map[string]*runQueue{}, cache: lru.NewWeighted(maxCachedRuns, maxCachedRunBytes, runCost),
		runnerPerf: runnerPerf{ended: lru.NewWeighted(maxEndedRuns, maxEndedRunBytes, runCost)}}
}

func randomID() string { return "r_" + randomToken() }

// randomToken is 12 random characters of a readable alphabet.
func randomToken() string {
	const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// machine returns the engine for a plan, loading it from the store once.
func (r *Runner) machine(ctx context.Context, digest string) (*engine.Machine, error) {
	if m, ok := r.machines.Get(digest); ok {
		return m, nil
	}
	b, err := r.store.GetPlan(ctx, digest)
	if err != nil {
		return nil, fmt.Errorf("load plan %s: %w", digest, err)
	}
	var p plan.Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("decode plan %s: %w", digest, err)
	}
	m, err := engine.New(&p, r.engine)
	if err != nil {
		return nil, err
	}
	r.machines.Add(digest, m)
	return m, nil
}

// StartRequest starts a run of a compiled plan.
type StartRequest struct {
	Plan      *plan.Plan
	Skill     string
	Requester string // the authenticated caller
	RequestID string // client idempotency key, scoped to the requester
	// Inputs are the run's named inputs (checked by the caller).
	Inputs map[string]string
	// Digest, if set, is what the compiler said Plan's digest is: a hint
	// to find the engine already built from this very *plan.Plan.
	Digest string
}

// startMachine returns the engine for a plan to start: engine.New verifies
// it, and it is stored before any run refers to it. A plan this replica
// already verified and stored — the same *plan.Plan, as a compile cache
// hands out — is not verified or stored again.
func (r *Runner) startMachine(ctx context.Context, req StartRequest) (*engine.Machine, error) {
	if req.Digest != "" {
		if m, ok := r.machines.Get(req.Digest); ok && m.Plan() == req.Plan {
			return m, nil
		}
	}
	m, err := engine.New(req.Plan, r.engine)
	if err != nil {
		// The plan came from our compiler: a plan it built that fails
		// Verify is our bug, not the caller's.
		return nil, fmt.Errorf("start: %w", err)
	}
	b, err := plan.Canonical(req.Plan)
	if err != nil {
		return nil, err
	}
	if err := r.store.PutPlan(ctx, m.Digest(), b); err != nil {
		return nil, fmt.Errorf("store plan: %w", err)
	}
	r.machines.Add(m.Digest(), m)
	return m, nil
}

// Start verifies the plan (engine.New), stores it, and creates the run.
// A repeated RequestID returns the run it first created, and created =
// false, when the request is the same one (sameRequest); a different
// request under a used RequestID is errkind.RequestReused, naming that run.
func (r *Runner) Start(ctx context.Context, req StartRequest) (run *engine.Run, created bool, err error) {
	m, err := r.startMachine(ctx, req)
	if err != nil {
		return nil, false, err
	}
	now, err := r.clock(ctx)
	if err != nil {
		return nil, false, err
	}
	id := r.newID()
	tr := m.StartWith(id, req.Requester, req.Inputs, now)
	c, err := commitFor(nil, store.Run{}, tr, req.Skill)
	if err != nil {
		return nil, false, err
	}
	if req.RequestID != "" {
		c.RequestKey = req.Requester + "\x00" + req.RequestID
	}
	if err := r.store.Commit(ctx, c); err != nil {
		var dup *store.DuplicateError
		if errors.As(err, &dup) {
			return r.repeated(ctx, dup.RunID, m.Digest(), req)
		}
		return nil, false, fmt.Errorf("create run: %w", err)
	}
	r.remember(c.Run, tr.Run)
	r.observe(ctx, m, nil, tr.Run, tr.Records)
	r.log.LogAttrs(ctx, slog.LevelInfo, "run started", slog.String("run", id), slog.String("requester", req.Requester), slog.String("plan", m.Digest()))
	r.effects(ctx, id, tr)
	return tr.Run, true, nil
}

// repeated answers a start whose RequestID already made run id: that run
// if it started the same request — the same plan (digest: source, name,
// catalog), skill and inputs — else errkind.RequestReused naming it.
func (r *Runner) repeated(ctx context.Context, id, digest string, req StartRequest) (*engine.Run, bool, error) {
	sr, err := r.store.GetRun(ctx, id)
	if err != nil {
		return nil, false, fmt.Errorf("run %s: %w", id, err)
	}
	run, _, err := r.Get(ctx, id)
	if err != nil {
		return nil, false, err
	}
	if sr.PlanDigest != digest || sr.Skill != req.Skill || !maps.Equal(run.Inputs, req.Inputs) {
		return nil, false, fmt.Errorf("this request_id started run %s with another request (another recipe, skill, name or inputs); use a new request_id for a new run: %w", id, errkind.RequestReused)
	}
	return run, false, nil
}

// Get reads a run, applying any deadline that has passed (I4: readers
// enforce the clock, whether or not a background pass ran).
func (r *Runner) Get(ctx context.Context, id string) (*engine.Run, *engine.Machine, error) {
	run, m, err := r.read(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if !openAsk(run) {
		return run, m, nil // no clock to enforce
	}
	now, err := r.now(ctx)
	if err != nil {
		return nil, nil, err
	}
	if dueAsk(run, now) {
		// Never show an ask past its deadline as open: apply the expiry
		// (or fail the read).
		tr, err := r.apply(ctx, id, func(now time.Time) engine.Event { return engine.Tick{At: now} })
		if err != nil {
			return nil, nil, err
		}
		return tr.Run, m, nil
	}
	return run, m, nil
}

// read reads a run from the store. When this replica committed the
// version the store holds, that is the run it keeps decoded: reading the
// version alone saves reading and decoding the rest.
func (r *Runner) read(ctx context.Context, id string) (*engine.Run, *engine.Machine, error) {
	if c, ok := r.recent(id); ok {
		v, err := r.store.RunVersion(ctx, id)
		if err != nil {
			return nil, nil, fmt.Errorf("run %s: %w", limits.Short(id), err)
		}
		if v == c.run.Version {
			m, err := r.machine(ctx, c.row.PlanDigest)
			if err != nil {
				return nil, nil, err
			}
			return c.run, m, nil
		}
	}
	sr, err := r.store.GetRun(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("run %s: %w", limits.Short(id), err)
	}
	return r.decode(ctx, sr)
}

// openAsk reports whether a run holds an ask that still waits, whose
// deadline readers must enforce.
func openAsk(run *engine.Run) bool {
	for _, a := range run.Asks {
		if a.State.Open() {
			return true
		}
	}
	return false
}

func dueAsk(run *engine.Run, now time.Time) bool {
	for _, a := range run.Asks {
		if a.State.Open() && !now.Before(a.DueAt()) {
			return true
		}
	}
	return false
}

func (r *Runner) decode(ctx context.Context, sr store.Run) (*engine.Run, *engine.Machine, error) {
	var run engine.Run
	if err := json.Unmarshal(sr.Data, &run); err != nil {
		return nil, nil, fmt.Errorf("decode run %s: %w", sr.ID, err)
	}
	run.Version = sr.Version
	m, err := r.machine(ctx, sr.PlanDigest)
	if err != nil {
		return nil, nil, err
	}
	return &run, m, nil
}

// Event applies one event to a run and commits it. build receives the
// store's clock. A refusal that still changed the run (an answer after the
// deadline) is committed and then returned.
func (r *Runner) Event(ctx context.Context, runID string, build func(now time.Time) engine.Event) (engine.Transition, error) {
	tr, err := r.apply(ctx, runID, build)
	if err != nil {
		return tr, err
	}
	if tr.Refusal != nil {
		return tr, tr.Refusal
	}
	return tr, nil
}

// Events applies several events to a run in order and commits them in one
// commit (an event the engine refuses is left out; the others commit). It
// returns the transition of the last event, or the first error. Use it for
// facts that arrive together, such as a read-only step's lease and its
// result.
func (r *Runner) Events(ctx context.Context, runID string, builds ...func(now time.Time) engine.Event) (engine.Transition, error) {
	res, err := r.commitAll(ctx, runID, builds)
	if err != nil {
		return engine.Transition{}, err
	}
	var last engine.Transition
	for _, c := range res {
		if c.err == nil {
			r.effects(ctx, runID, c.tr)
		}
	}
	for _, c := range res {
		if c.err != nil {
			return c.tr, c.err
		}
		if c.tr.Refusal != nil {
			return c.tr, c.tr.Refusal
		}
		last = c.tr
	}
	return last, nil
}

// apply is the commit loop: read, apply, commit against the version; on a
// conflict read again. Effects run only after their commit.
func (r *Runner) apply(ctx context.Context, runID string, build func(now time.Time) engine.Event) (engine.Transition, error) {
	res, err := r.commitAll(ctx, runID, []func(time.Time) engine.Event{build})
	if err != nil {
		return engine.Transition{}, err
	}
	if res[0].err != nil {
		return res[0].tr, res[0].err
	}
	r.effects(ctx, runID, res[0].tr)
	return res[0].tr, nil
}

// pending is one event waiting for its run's next commit.
type pending struct {
	build func(now time.Time) engine.Event
	done  chan committed
}

type committed struct {
	tr  engine.Transition
	err error
}

// runQueue gathers the events of one run that arrive while a commit is
// under way, so that a fan's results land in one commit instead of racing
// each other to the store (group commit). Other replicas still meet at the
// store's compare-and-set.
type runQueue struct {
	mu      sync.Mutex
	waiting []*pending
	leader  bool
	refs    int
}

// commitAll applies events in order and commits them, in one commit
// together with any other events of the same run that arrived meanwhile.
// Each event gets its own outcome; the error is the caller giving up.
// Effects are the caller's, after it (they may apply further events to the
// same run).
func (r *Runner) commitAll(ctx context.Context, runID string, builds []func(time.Time) engine.Event) ([]committed, error) {
	r.mu.Lock()
	q, ok := r.queues[runID]
	if !ok {
		q = &runQueue{}
		r.queues[runID] = q
	}
	q.refs++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if q.refs--; q.refs == 0 {
			delete(r.queues, runID)
		}
		r.mu.Unlock()
	}()

	ps := make([]*pending, len(builds))
	for i, b := range builds {
		ps[i] = &pending{build: b, done: make(chan committed, 1)}
	}
	q.mu.Lock()
	q.waiting = append(q.waiting, ps...) // together: one batch takes them all
	lead := !q.leader
	q.leader = true
	q.mu.Unlock()
	if lead {
		// Commit batches until nobody waits; the store calls outlive a
		// caller that gives up, since others' events ride along.
		bctx := context.WithoutCancel(ctx)
		for {
			q.mu.Lock()
			batch := q.waiting
			q.waiting = nil
			if len(batch) == 0 {
				q.leader = false
				q.mu.Unlock()
				break
			}
			q.mu.Unlock()
			r.commitBatch(bctx, runID, batch)
		}
	}
	out := make([]committed, len(ps))
	for i, p := range ps {
		select {
		case out[i] = <-p.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return out, nil
}

// commitBatch applies a batch of events in order to one read of the run
// and commits the result once; each event gets its own outcome. On a
// version conflict or a passed deadline it reads again and re-applies.
func (r *Runner) commitBatch(ctx context.Context, runID string, batch []*pending) {
	fail := func(err error) {
		for _, p := range batch {
			p.done <- committed{err: err}
		}
	}
	conflicts := 0
	fresh, storeClock := false, false
	for range 100 {
		sr, run, m, err := r.load(ctx, runID, fresh)
		if err != nil {
			fail(err)
			return
		}
		// Executor events are judged by this replica's clock (one store
		// round trip fewer); anything a person decides, and any retry after
		// a deadline, by the store's — which the commit checks anyway (I4).
		now, err := r.clock(ctx)
		if err != nil {
			fail(err)
			return
		}
		evs := make([]engine.Event, len(batch))
		for i, p := range batch {
			evs[i] = p.build(now)
			switch evs[i].(type) {
			case engine.Decide, engine.Answer, engine.Cancel, engine.Tick:
				storeClock = true
			}
		}
		if storeClock {
			if now, err = r.now(ctx); err != nil {
				fail(err)
				return
			}
			for i, p := range batch {
				evs[i] = p.build(now)
			}
		}
		cur := run
		outs := make([]committed, len(batch))
		var records []engine.Record
		var deadline time.Time
		applied := 0
		// A batch no deadline binds (executors' reports) is applied with
		// one copy of the run, not one per event: a fan's results cost
		// what they change.
		var trs []engine.Transition
		var errs []error
		if !slices.ContainsFunc(evs, decides) {
			trs, errs = m.ApplyAll(run, evs)
		}
		for i := range batch {
			ev := evs[i]
			var tr engine.Transition
			var err error
			if trs != nil {
				tr, err = trs[i], errs[i]
			} else {
				tr, err = m.Apply(cur, ev)
			}
			if err != nil {
				outs[i] = committed{err: err}
				continue
			}
			if d := deadlineOf(cur, ev); !d.IsZero() && (deadline.IsZero() || d.Before(deadline)) {
				deadline = d
			}
			cur = tr.Run
			records = append(records, tr.Records...)
			outs[i] = committed{tr: tr}
			applied++
		}
		if applied == 0 {
			for i, p := range batch {
				p.done <- outs[i]
			}
			return
		}
		cur.Version = run.Version + 1 // one commit, however many events
		c, err := commitFor(run, sr, engine.Transition{Run: cur, Records: records}, sr.Skill)
		if err != nil {
			fail(err)
			return
		}
		c.Deadline = deadline
		err = r.store.Commit(ctx, c)
		switch {
		case err == nil:
			r.remember(c.Run, cur)
			r.observe(ctx, m, run, cur, records)
			for i, p := range batch {
				o := outs[i]
				if o.err == nil {
					o.tr.Run = cur
					o.tr.Effects = liveEffects(cur, o.tr.Effects)
				}
				p.done <- o
			}
			return
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrDeadline):
			// Someone else moved the run, or a deadline passed between our
			// read of the clock and the commit: read again; the engine then
			// applies the expiry. Back off a little, more each time, so
			// replicas racing on one run spread out.
			r.forget(runID)
			fresh, storeClock = true, true
			conflicts++
			if conflicts > 3 {
				delay := time.Duration(mrand.Int64N(int64(conflicts) * int64(time.Millisecond)))
				select {
				case <-ctx.Done():
					fail(ctx.Err())
					return
				case <-time.After(delay):
				}
			}
		default:
			if errors.Is(err, store.ErrUnavailable) {
				r.unsure.add(runID) // it may have landed; see Resettle
			}
			fail(fmt.Errorf("commit run %s: %w", runID, err))
			return
		}
	}
	fail(errkind.Busy)
}

func (r *Runner) observe(ctx context.Context, m *engine.Machine, before, after *engine.Run, records []engine.Record) {
	for _, o := range r.observers {
		o.Committed(ctx, m, before, after, records)
	}
}

// now reads the store's clock and remembers how far it is from ours.
//
// The store read its clock at some instant of the round trip, so the true
// offset lies between t - after and t - before. The offset kept changes
// only when it falls outside that window (to the window's middle): the
// estimate stays put while measurements agree with it, and two timestamps
// this replica takes (a lease and its result) are measured with the same
// offset.
func (r *Runner) now(ctx context.Context) (time.Time, error) {
	before := time.Now()
	t, err := r.store.Now(ctx)
	if err != nil {
		return t, err
	}
	after := time.Now()
	lo, hi := t.Sub(after), t.Sub(before)+time.Microsecond // TIME has µs resolution
	if cur := time.Duration(r.offset.Load()); r.offsetAt.Load() == 0 || cur < lo || cur > hi {
		r.offset.Store(int64(lo + (hi-lo)/2))
	}
	r.offsetAt.Store(after.UnixNano())
	return t, nil
}

// offsetTTL is how long a measured offset between the store's clock and
// ours is trusted before it is measured again.
const offsetTTL = time.Second

// clock is the store's clock estimated from ours and the last offset
// measured (timestamps stay in the store's terms without a round trip);
// it reads the store's clock when it has no recent offset. Deadlines are
// still judged by the store itself when a decision commits (I4).
func (r *Runner) clock(ctx context.Context) (time.Time, error) {
	at := r.offsetAt.Load()
	if at == 0 {
		return r.now(ctx)
	}
	if time.Since(time.Unix(0, at)) > offsetTTL && r.refreshing.CompareAndSwap(false, true) {
		defer r.refreshing.Store(false)
		return r.now(ctx)
	}
	return r.storeTime(), nil
}

// storeTime estimates the store's clock from ours and the last offset
// seen.
func (r *Runner) storeTime() time.Time {
	return time.Now().Add(time.Duration(r.offset.Load())).UTC()
}

// maxCachedRuns bounds the runs a replica keeps decoded between
// transitions, and maxEndedRuns the ended runs it keeps for readers; the
// byte bounds weigh each by its encoded size (runs holding large answers
// must not hold what many small ones would), least recently used evicted.
const (
	maxCachedRuns     = 4096
	maxEndedRuns      = 1024
	maxCachedRunBytes = 256 << 20
	maxEndedRunBytes  = 64 << 20
)

type cachedRun struct {
	row  store.Run // without Data: the decoded run is what is kept
	run  *engine.Run
	size int64 // the encoded run's size
}

func runCost(_ string, c cachedRun) int64 { return c.size }

// load returns a run to transition: the one this replica committed last,
// unless fresh is asked for or it has none; the commit's compare-and-set on
// the version catches any staleness.
func (r *Runner) load(ctx context.Context, runID string, fresh bool) (store.Run, *engine.Run, *engine.Machine, error) {
	if !fresh {
		r.mu.Lock()
		c, ok := r.cache.Get(runID)
		r.mu.Unlock()
		if ok {
			m, err := r.machine(ctx, c.row.PlanDigest)
			if err == nil {
				return c.row, c.run, m, nil
			}
		}
	}
	sr, err := r.store.GetRun(ctx, runID)
	if err != nil {
		return store.Run{}, nil, nil, fmt.Errorf("run %s: %w", runID, err)
	}
	run, m, err := r.decode(ctx, sr)
	if err != nil {
		return store.Run{}, nil, nil, err
	}
	return sr, run, m, nil
}

func (r *Runner) remember(row store.Run, run *engine.Run) {
	c := cachedRun{row: row, run: run, size: int64(len(row.Data))}
	c.row.Data = nil
	r.mu.Lock()
	defer r.mu.Unlock()
	if run.State.Terminal() {
		r.cache.Remove(row.ID)
		r.ended.Add(row.ID, c)
		return
	}
	r.cache.Add(row.ID, c)
}

func (r *Runner) forget(runID string) {
	r.mu.Lock()
	r.cache.Remove(runID)
	r.ended.Remove(runID)
	r.mu.Unlock()
}

// recent is the run this replica committed last, ended or not, if it
// still has it.
func (r *Runner) recent(runID string) (cachedRun, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.cache.Get(runID); ok {
		return c, true
	}
	return r.ended.Get(runID)
}

// liveEffects drops dispatches that a later event of the same batch
// cancelled: only a step still queued at that attempt goes out.
func liveEffects(run *engine.Run, effects []engine.Effect) []engine.Effect {
	out := effects[:0:0]
	for _, e := range effects {
		if d, ok := e.(engine.Dispatch); ok {
			if s := run.Steps[d.Step]; s == nil || s.Status != engine.StatusQueued || s.Attempt != d.Attempt {
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

// decides reports whether ev is a decision, which deadlineOf binds.
func decides(ev engine.Event) bool {
	switch ev.(type) {
	case engine.Decide, engine.Answer:
		return true
	}
	return false
}

// deadlineOf is the deadline the store must still be before when a
// decision commits: the decided ask's.
func deadlineOf(run *engine.Run, ev engine.Event) time.Time {
	var id string
	switch e := ev.(type) {
	case engine.Decide:
		id = e.Ask
	case engine.Answer:
		id = e.Ask
	default:
		return time.Time{}
	}
	if a, ok := run.Asks[id]; ok && a.State == engine.AskPending {
		return a.ExpiresAt
	}
	return time.Time{}
}

// commitFor turns a transition into a store commit: the run row, the ask
// rows that changed, and the journal records chained after the head.
func commitFor(before *engine.Run, prev store.Run, tr engine.Transition, skill string) (store.Commit, error) {
	run := tr.Run
	data, err := json.Marshal(run)
	if err != nil {
		return store.Commit{}, fmt.Errorf("encode run: %w", err)
	}
	sr := store.Run{ID: run.ID, Version: run.Version, State: string(run.State), Requester: run.Requester, Skill: skill,
		PlanDigest: run.PlanDigest, CreatedAt: run.CreatedAt, UpdatedAt: run.UpdatedAt, Data: data}
	var asks []store.Ask
	for _, id := range slices.Sorted(maps.Keys(run.Asks)) {
		a := run.Asks[id]
		if before != nil {
			if old, ok := before.Asks[id]; ok && old.State == a.State && old.Audience == a.Audience && old.DueAt().Equal(a.DueAt()) {
				continue
			}
		}
		asks = append(asks, askRow(run, a))
	}
	recs := make([]store.JournalRecord, 0, len(tr.Records))
	for _, rec := range tr.Records {
		payload, err := json.Marshal(rec.Payload)
		if err != nil {
			return store.Commit{}, fmt.Errorf("encode journal record: %w", err)
		}
		recs = append(recs, store.JournalRecord{Time: rec.At, Actor: rec.Actor, Kind: rec.Kind, Payload: payload})
	}
	sr.JournalSeq, sr.JournalHead = store.Chain(run.ID, prev.JournalSeq, prev.JournalHead, recs)
	return store.Commit{Run: sr, ExpectVersion: run.Version - 1, Asks: asks, Journal: recs}, nil
}

func askRow(run *engine.Run, a *engine.AskRun) store.Ask {
	return store.Ask{ID: store.AskID(run.ID, a.ID), RunID: run.ID, Title: a.Title, State: string(a.State),
		Audience: audienceKey(run.Requester, a.Audience), Requester: run.Requester, CreatedAt: a.OpenedAt, DueAt: a.DueAt()}
}

// audienceKey is how the inbox indexes who an ask is for.
func audienceKey(requester, audience string) string {
	if audience == "" || audience == plan.AudienceRequester {
		return "user:" + requester
	}
	return "role:" + audience
}

// effects acts on a committed transition: dispatch runnable steps (a step
// nobody can take makes the run blocked) and cancel abandoned attempts.
func (r *Runner) effects(ctx context.Context, runID string, tr engine.Transition) {
	if tr.Run != nil {
		r.notify(tr.Run)
	}
	var refused []engine.StepAttempt
	for _, e := range tr.Effects {
		switch e := e.(type) {
		case engine.AskOpened:
			if r.asks != nil {
				r.asks.Opened(ctx, tr.Run, e.Ask)
			}
		case engine.AskNotice:
			if r.asks != nil {
				r.asks.Noticed(ctx, tr.Run, e.Ask, e.Kind)
			}
		case engine.AskClosed:
			if r.asks != nil {
				r.asks.Closed(ctx, tr.Run, e.Ask, e.State)
			}
		case engine.Dispatch:
			if !r.dispatch.Offer(ctx, runID, e) {
				refused = append(refused, engine.StepAttempt{Step: e.Step, Attempt: e.Attempt})
			}
		case engine.CancelStep:
			r.dispatch.Cancel(ctx, runID, e)
		case engine.RunEnded:
			r.log.LogAttrs(ctx, slog.LevelInfo, "run ended", slog.String("run", runID), slog.String("state", string(e.State)), slog.String("reason", e.Reason))
		}
	}
	if len(refused) > 0 {
		// Every refusal of this round in one transition: a fan of N steps
		// nobody offers costs one commit, not N commits of the whole run.
		_, err := r.apply(ctx, runID, func(now time.Time) engine.Event {
			return engine.StepsBlocked{Steps: refused, At: now}
		})
		if err != nil && !errors.Is(err, engine.ErrWrongTransition) && !errors.Is(err, engine.ErrStaleAttempt) {
			r.log.LogAttrs(ctx, slog.LevelWarn, "could not mark steps blocked", slog.String("run", runID), slog.Int("steps", len(refused)), slog.String("first", refused[0].Step), slog.String("error", err.Error()))
		}
	}
	for _, rec := range tr.Records {
		if rec.Kind == "ask.expired" {
			r.expiries.Add(1)
			r.log.LogAttrs(ctx, slog.LevelInfo, "ask expired", slog.String("run", runID), slog.Any("ask", rec.Payload["ask"]), slog.Any("idle_ms", rec.Payload["idle_ms"]))
		}
	}
}

// Sweep is the deadline pass: every interval it reads the asks that are
// due (a reminder, an escalation or a deadline) and applies them, so
// notices go out and on expiry happens even when nobody reads the run.
// Correctness never waits on it: readers apply the same rungs (I4). It
// blocks until ctx ends.
func (r *Runner) Sweep(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now, err := r.now(ctx)
		if err != nil {
			continue
		}
		rows, _, err := r.store.ListAsks(ctx, store.AskQuery{States: []string{string(engine.AskPending), string(engine.AskEvidenceRequested)}, DueBefore: now.Add(time.Millisecond), Limit: 500})
		if err != nil {
			r.log.LogAttrs(ctx, slog.LevelWarn, "deadline pass could not list asks", slog.String("error", err.Error()))
			continue
		}
		for _, row := range rows {
			if _, _, err := r.Get(ctx, row.RunID); err != nil && ctx.Err() == nil {
				r.log.LogAttrs(ctx, slog.LevelWarn, "deadline pass could not apply a deadline", slog.String("ask", row.ID), slog.String("error", err.Error()))
			}
		}
	}
}

// splitAskID splits "RUN/STOP".
func splitAskID(id string) (run, stop string, err error) {
	run, stop, ok := strings.Cut(id, "/")
	if !ok || run == "" || stop == "" {
		return "", "", fmt.Errorf("ask id %q is not RUN/ASK: %w", limits.Short(id), errkind.Invalid)
	}
	return run, stop, nil
}

// Recover offers again what a previous process left in flight: queued
// steps are offered to the dispatcher, and attempts leased to executors of
// a process that is gone are reported lost (the engine re-leases them, or
// asks when a side effect had started). Call it once at start-up, before
// serving.
func (r *Runner) Recover(ctx context.Context) error {
	tok := ""
	for {
		// A parked run has nothing queued or in flight (the engine parks a
		// run only then), so a million parked runs cost start-up nothing.
		rows, next, err := r.store.ListRuns(ctx, store.RunQuery{States: []string{string(engine.Running), string(engine.Blocked)}, Limit: 500, PageToken: tok})
		if err != nil {
			return fmt.Errorf("recover: %w", err)
		}
		for _, row := range rows {
			if err := r.recoverRun(ctx, row.ID); err != nil {
				r.log.LogAttrs(ctx, slog.LevelWarn, "could not recover run", slog.String("run", row.ID), slog.String("error", err.Error()))
			}
		}
		if next == "" {
			return nil
		}
		tok = next
	}
}

func (r *Runner) recoverRun(ctx context.Context, id string) error {
	run, m, err := r.Get(ctx, id)
	if err != nil {
		return err
	}
	for _, sid := range slices.Sorted(maps.Keys(run.Steps)) {
		s := run.Steps[sid]
		if !s.Status.InFlight() {
			continue
		}
		attempt := s.Attempt
		if _, err := r.apply(ctx, id, func(now time.Time) engine.Event {
			return engine.LeaseLost{Step: sid, Attempt: attempt, At: now}
		}); err != nil && !errors.Is(err, engine.ErrStaleAttempt) && !errors.Is(err, engine.ErrWrongTransition) {
			return err
		}
	}
	run, m, err = r.Get(ctx, id)
	if err != nil {
		return err
	}
	r.effects(ctx, id, engine.Transition{Run: run, Effects: dispatchEffects(m.Queued(run))})
	return nil
}

func dispatchEffects(ds []engine.Dispatch) []engine.Effect {
	out := make([]engine.Effect, len(ds))
	for i, d := range ds {
		out[i] = d
	}
	return out
}
