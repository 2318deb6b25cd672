package runner

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// gateStore holds Commit while armed: the test decides when it lands.
type gateStore struct {
	store.Store
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (g *gateStore) arm() {
	g.mu.Lock()
	g.armed, g.entered, g.release = true, make(chan struct{}), make(chan struct{})
	g.mu.Unlock()
}

func (g *gateStore) Commit(ctx context.Context, c store.Commit) error {
	g.mu.Lock()
	armed, entered, release := g.armed, g.entered, g.release
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(entered)
		<-release
	}
	return g.Store.Commit(ctx, c)
}

// credits is a dispatcher with n free credits: Free while some are left,
// and each offer takes one. It records what it was offered.
type credits struct {
	mu      sync.Mutex
	n       int
	offered map[string]bool
}

func (c *credits) Offer(_ context.Context, _ Recorder, runID string, d engine.Dispatch) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.offered == nil {
		c.offered = map[string]bool{}
	}
	c.offered[WorkID(runID, d.Step, d.Attempt)] = true
	if c.n > 0 {
		c.n--
	}
	return true
}
func (c *credits) Cancel(context.Context, string, engine.CancelStep) {}
func (c *credits) Serves(engine.Target) bool                         { return true }
func (c *credits) Free(engine.Target) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
func (c *credits) Holding(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offered[id]
}
func (c *credits) wasOffered(id string) bool { return c.Holding(id) }

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

func twoSteps() *plan.Plan {
	return &plan.Plan{Name: "two", InitialSteps: []plan.Step{
		{ID: "s1", Kind: plan.KindTool, Server: "x", Tool: "read", Args: plan.Object(`{}`), OnFail: plan.OnFailStop},
		{ID: "s2", Kind: plan.KindTool, Server: "x", Tool: "read", Args: plan.Object(`{}`), OnFail: plan.OnFailStop},
	}}
}

// A caller that gives up while its event rides in another's batch (group
// commit) still has its event committed; when that commit queues a step
// and claims it for this replica (the direct hand-off), somebody must
// offer it. On main the claim is made in the store and the hand-off noted
// (Runner.handoff), but only the caller's effects would offer it, and the
// caller is gone: the step stays claimed by this live replica, offered to
// nobody, released by nobody (ReleaseClaims spares a live owner, Resettle
// only runs after an unknown outcome), until the process restarts; and
// the handoff entry is never taken.
func TestReview_AbandonedBatchedEventStillOffersItsHandOff(t *testing.T) {
	ctx := context.Background()
	st := &gateStore{Store: memstore.New(memstore.Config{})}
	disp := &credits{n: 100}
	r := New(Config{Store: st, Dispatcher: disp, Replica: "cp-a"})
	if err := st.Heartbeat(ctx, "cp-a", time.Hour); err != nil {
		t.Fatal(err)
	}
	run, _, err := r.Start(ctx, StartRequest{Plan: twoSteps(), Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"s1", "s2"} {
		if _, err := r.Event(ctx, run.ID, func(now time.Time) engine.Event {
			return engine.StepLeased{Step: s, Attempt: 1, Executor: "edge", LeaseID: WorkID(run.ID, s, 1), Replica: "cp-a", At: now}
		}); err != nil {
			t.Fatal(err)
		}
	}

	// The leader's commit (s1's result) is held at the store.
	st.arm()
	leader := make(chan error, 1)
	go func() {
		_, err := r.Event(ctx, run.ID, func(now time.Time) engine.Event {
			return engine.StepSucceeded{Step: "s1", Attempt: 1, Output: []byte(`{}`), At: now}
		})
		leader <- err
	}()
	<-st.entered
	// Meanwhile s2's lease is lost (re-queued as attempt 2, claimed here in
	// its commit); the caller reporting it gives up while it waits.
	gctx, giveUp := context.WithCancel(ctx)
	follower := make(chan error, 1)
	go func() {
		_, err := r.Event(gctx, run.ID, func(now time.Time) engine.Event {
			return engine.LeaseLost{Step: "s2", Attempt: 1, Replica: "cp-a", At: now}
		})
		follower <- err
	}()
	waitUntil(t, "the follower to join the batch", func() bool {
		r.mu.Lock()
		q := r.queues[run.ID]
		r.mu.Unlock()
		if q == nil {
			return false
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.waiting) == 1
	})
	giveUp()
	// On main the follower returns at once; a runner that makes it wait
	// for its outcome instead would hold it until the commit lands.
	var ferr error
	select {
	case ferr = <-follower:
		close(st.release)
	case <-time.After(200 * time.Millisecond):
		close(st.release)
		ferr = <-follower
	}
	if ferr != nil && !errors.Is(ferr, context.Canceled) {
		t.Fatalf("the follower: %v", ferr)
	}
	if err := <-leader; err != nil {
		t.Fatal(err)
	}
	if s, n := stepOf(t, r, run.ID, "s2"); s != engine.StatusQueued || n != 2 {
		t.Fatalf("s2 after the batch: %s attempt %d, want queued as attempt 2", s, n)
	}
	id := WorkID(run.ID, "s2", 2)

	// Every pass a live replica runs.
	r.Takeover(ctx)
	r.Resettle(ctx)
	if _, err := r.Claim(ctx, "tool:x.read", 10); err != nil {
		t.Fatal(err)
	}
	owner := claims(t, st)["tool:x.read "+id]
	if !disp.wasOffered(id) && owner == "cp-a" {
		t.Fatalf("s2's attempt 2 is claimed by cp-a in the store, offered to no executor, and never released: stuck while cp-a lives (pending handoffs: %d)", len(r.handoff.ids))
	}
}

func stepOf(t *testing.T, r *Runner, runID, step string) (engine.StepStatus, int) {
	t.Helper()
	run, _, err := r.Get(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return run.Steps[step].Status, run.Steps[step].Attempt
}

// The direct hand-off is meant only for a free local executor (commit
// 0c9f0e6): with one credit here and another replica serving the tool, a
// fan of five takes one step here and leaves four for whoever has room.
// On main, Free is asked once per step before any offer is made, so every
// step of the fan is claimed here: four wait behind one credit while
// other replicas' executors sit idle.
func TestReview_DirectHandOffOfAFanTakesOnlyWhatIsFree(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	disp := &credits{n: 1}
	a := New(Config{Store: st, Dispatcher: disp, Replica: "cp-a"})
	if err := st.Announce(ctx, "cp-b", []string{"tool:x.read"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := a.Announce(ctx, []string{"tool:x.read"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	var steps []plan.Step
	for _, id := range []string{"f1", "f2", "f3", "f4", "f5"} {
		steps = append(steps, plan.Step{ID: id, Kind: plan.KindTool, Server: "x", Tool: "read", Args: plan.Object(`{}`), OnFail: plan.OnFailStop})
	}
	if _, _, err := a.Start(ctx, StartRequest{Plan: &plan.Plan{Name: "fan", InitialSteps: steps}, Requester: "alice"}); err != nil {
		t.Fatal(err)
	}
	mine := 0
	for _, owner := range claims(t, st) {
		if owner == "cp-a" {
			mine++
		}
	}
	waiting, err := st.WaitingWork(ctx, "tool:x.read", 10)
	if err != nil {
		t.Fatal(err)
	}
	if mine > 1 {
		t.Fatalf("one free credit here, cp-b serves x.read too, yet cp-a claimed %d of the fan's 5 steps (%d left waiting)", mine, len(waiting))
	}
}

// shardDown is a sharded store one of whose shards fails a claim: the
// others' entries were claimed and come back with the error, as
// redisstore.ClaimWork returns them (out, err).
type shardDown struct{ store.Store }

func (s shardDown) ClaimWork(ctx context.Context, queue, owner string, n int) ([]store.Work, error) {
	ws, err := s.Store.ClaimWork(ctx, queue, owner, n)
	if err != nil {
		return ws, err
	}
	return ws, errors.New("redisstore: claiming work: CLUSTERDOWN (one shard)")
}

// A claim that fails on one shard of a Redis Cluster has claimed the
// entries of the others (redisstore's claim script ran there). On main
// Runner.Claim drops them with the error: they stay claimed by this live
// replica, offered to nobody and released by nobody, until it restarts.
func TestReview_APartlyFailedClaimDoesNotStrandWhatItClaimed(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(memstore.Config{})
	p := &plan.Plan{Name: "one", InitialSteps: []plan.Step{{ID: "s", Kind: plan.KindTool, Server: "x", Tool: "read", Args: plan.Object(`{}`), OnFail: plan.OnFailStop}}}
	// Started through a replica that does not serve x.read: it waits.
	b := New(Config{Store: mem, Dispatcher: servesNothing{}, Replica: "cp-b"})
	if err := mem.Announce(ctx, "cp-a", []string{"tool:x.read"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := b.Announce(ctx, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	run, _, err := b.Start(ctx, StartRequest{Plan: p, Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	disp := &credits{n: 4}
	a := New(Config{Store: shardDown{mem}, Dispatcher: disp, Replica: "cp-a"})
	if err := mem.Heartbeat(ctx, "cp-a", time.Hour); err != nil {
		t.Fatal(err)
	}
	_, _ = a.Claim(ctx, "tool:x.read", 4) // the error is logged by Claiming; what was claimed must not be lost
	a.Takeover(ctx)
	a.Resettle(ctx)
	b.Takeover(ctx)
	id := WorkID(run.ID, "s", 1)
	if owner := claims(t, mem)["tool:x.read "+id]; owner == "cp-a" && !disp.wasOffered(id) {
		t.Fatalf("the step is claimed by cp-a, offered to no executor, and released by nobody while cp-a lives")
	}
}

// unreadable is a store where one run cannot be read (its plan no longer
// loads, its row does not decode: not ErrNotFound), and which counts
// claims.
type unreadable struct {
	store.Store
	run    string
	claims atomic.Int64
}

func (u *unreadable) GetRun(ctx context.Context, id string) (store.Run, error) {
	if id == u.run {
		return store.Run{}, errors.New("decode run: unexpected end of JSON input")
	}
	return u.Store.GetRun(ctx, id)
}

func (u *unreadable) ClaimWork(ctx context.Context, queue, owner string, n int) ([]store.Work, error) {
	u.claims.Add(1)
	return u.Store.ClaimWork(ctx, queue, owner, n)
}

// A step whose run this replica cannot read is given back (claimBack);
// the release hints that work waits, which wakes every claimer at once,
// this one included, which claims it again: claim, read, release,
// publish, without end, on every replica serving the queue. On main one
// such entry keeps a replica's claim loop spinning with no tick between.
func TestReview_AnUnreadableStepDoesNotSpinTheClaimLoop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	mem := memstore.New(memstore.Config{})
	p := &plan.Plan{Name: "one", InitialSteps: []plan.Step{{ID: "s", Kind: plan.KindTool, Server: "x", Tool: "read", Args: plan.Object(`{}`), OnFail: plan.OnFailStop}}}
	b := New(Config{Store: mem, Dispatcher: servesNothing{}, Replica: "cp-b"})
	if err := mem.Announce(ctx, "cp-a", []string{"tool:x.read"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := b.Announce(ctx, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	run, _, err := b.Start(ctx, StartRequest{Plan: p, Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	st := &unreadable{Store: mem, run: run.ID}
	a := New(Config{Store: st, Dispatcher: &credits{n: 4}, Replica: "cp-a"})
	queued := make(chan string, 64)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() {
		_ = mem.Hints(ctx, func(h store.Hint) {
			if h.Queue != "" {
				select {
				case queued <- h.Queue:
				default:
				}
			}
		})
	})
	wants := func() map[string]int { return map[string]int{"tool:x.read": 4} }
	wg.Go(func() { _ = a.Claiming(ctx, time.Hour, wants, queued, nil) })
	queued <- "tool:x.read" // work waits
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) && st.claims.Load() < 100 {
		runtime.Gosched()
	}
	if n := st.claims.Load(); n >= 100 {
		t.Fatalf("%d claims of one unreadable step within a second, with the tick an hour away: the claim loop spins on its own releases", n)
	}
}

// claimedStore is a store where the request key of every create is
// already claimed for a run that is not written, as redisstore answers
// while the first start with that key is committing, or after its
// creator died between the claim and the commit.
type claimedStore struct{ store.Store }

func (s claimedStore) Commit(ctx context.Context, c store.Commit) error {
	if c.ExpectVersion == 0 && c.RequestKey != "" {
		return &store.DuplicateError{RunID: "r_notwritten"}
	}
	return s.Store.Commit(ctx, c)
}

// Issue 21 (found by the fault suite, seed 186179036382359): a retried
// start whose request_id is claimed for a run not written yet was told
// "run r_…: not found" (NOT_FOUND): a script reads that as "nothing was
// started" and gives up, while the first attempt may still commit. It is
// unavailable, to be retried with the same request_id.
func TestReview_RetryOfAStartInFlightIsUnavailableNotNotFound(t *testing.T) {
	ctx := context.Background()
	r := New(Config{Store: claimedStore{memstore.New(memstore.Config{})}, Replica: "cp-a"})
	steps := []plan.Step{{ID: "s", Kind: plan.KindTool, Server: "x", Tool: "read", Args: plan.Object(`{}`), OnFail: plan.OnFailStop}}
	_, _, err := r.Start(ctx, StartRequest{Plan: &plan.Plan{Name: "p", InitialSteps: steps}, Requester: "alice", RequestID: "k1"})
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a start whose request_id is claimed for a run not written: %v; want unavailable (retry), not not-found", err)
	}
}
