package approvals

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
	"github.com/tollgate-dev/tollgate/pkg/webhook"
)

var hookSecret = []byte("a-webhook-secret-of-32-bytes-or-so")

// hookReceiver is a webhook endpoint on loopback that verifies every
// request with the shipped Verifier and processes each event once,
// deduplicating on the event id. hold, when set, keeps the first request
// unanswered until the sender gives up on it.
type hookReceiver struct {
	srv  *httptest.Server
	hold bool

	mu        sync.Mutex
	requests  int
	processed map[string]int // event id → times processed
	kinds     []string
	held      chan struct{} // closed when the first request is held
	changed   chan struct{}
}

func newHookReceiver(t *testing.T, hold bool) *hookReceiver {
	t.Helper()
	v := webhook.NewVerifier(hookSecret)
	rc := &hookReceiver{hold: hold, processed: map[string]int{}, held: make(chan struct{}), changed: make(chan struct{})}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, env, err := v.Verify(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		rc.mu.Lock()
		rc.requests++
		first := rc.requests == 1
		rc.mu.Unlock()
		if first && rc.hold {
			close(rc.held)
			<-r.Context().Done() // never answered
			return
		}
		rc.mu.Lock()
		if rc.processed[env.Event.ID] == 0 {
			rc.kinds = append(rc.kinds, env.Event.Kind)
		}
		rc.processed[env.Event.ID]++
		close(rc.changed)
		rc.changed = make(chan struct{})
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// waitKinds waits until the receiver has processed events of kinds, in
// this order.
func (rc *hookReceiver) waitKinds(t *testing.T, kinds ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		rc.mu.Lock()
		got := strings.Join(rc.kinds, ",")
		ch := rc.changed
		rc.mu.Unlock()
		if got == strings.Join(kinds, ",") {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("the receiver processed %s, want %s", got, strings.Join(kinds, ","))
		}
	}
}

// replica is one control plane replica's part in notices: a Runner whose
// AskHook and Outbox is a Desk, and a Deliverer.
type replica struct {
	name    string
	runner  *runner.Runner
	desk    *Desk
	deliver *Deliverer
	stop    func()
}

func newReplica(t *testing.T, st store.Store, name, url string) *replica {
	t.Helper()
	n, err := webhook.New(webhook.Config{BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, AttemptTimeout: 5 * time.Second},
		[]webhook.Endpoint{{Name: "pager", URL: url, Secret: hookSecret, Roles: []string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	desk := New(Config{Notifier: n, Work: st, Replica: name})
	r := runner.New(runner.Config{Store: st, Replica: name, Asks: desk, Outbox: desk})
	return &replica{name: name, runner: r, desk: desk,
		deliver: NewDeliverer(DelivererConfig{Store: st, Sender: n, Recorder: r, Replica: name, Held: desk, Every: 10 * time.Millisecond})}
}

// run starts the replica's Deliverer until stop (or the test's end).
func (rp *replica) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rp.deliver.Run(ctx, nil) }()
	var once sync.Once
	rp.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(rp.stop)
}

// question is a plan that asks its requester before anything runs.
func question() *plan.Plan {
	return &plan.Plan{Name: "ask", InitialSteps: []plan.Step{}, StoppingPoints: []plan.StoppingPoint{{
		ID: "q", Type: plan.StopText, Title: "which one?", Audience: plan.AudienceRequester, After: []string{},
		Then: &plan.Phase{Steps: []plan.Step{}, StoppingPoints: []plan.StoppingPoint{}},
	}}}
}

func deliveries(t *testing.T, st store.Store, runID string) []map[string]any {
	t.Helper()
	recs, err := st.Journal(context.Background(), runID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, r := range recs {
		if r.Kind == string(engine.JournalNoticeDelivery) {
			var p map[string]any
			if err := json.Unmarshal(r.Payload, &p); err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

func workOf(t *testing.T, st store.Store) (waiting, claimed []store.Work) {
	t.Helper()
	waiting, err := st.WaitingWork(context.Background(), Queue, 100)
	if err != nil {
		t.Fatal(err)
	}
	all, err := st.ClaimedWork(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range all {
		if w.Queue == Queue {
			claimed = append(claimed, w)
		}
	}
	return waiting, claimed
}

// waitFinished waits until the outbox is empty.
func waitFinished(t *testing.T, st store.Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w, c := workOf(t, st)
		if len(w) == 0 && len(c) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var ids []string
			for _, x := range append(w, c...) {
				ids = append(ids, x.ID+" owner "+x.Owner)
			}
			t.Fatalf("outbox not empty: %v", ids)
		}
		<-time.After(5 * time.Millisecond)
	}
}

// The opened notice is enqueued by the commit that opened the ask, held
// by the committing replica until Opened judged it, then waits for any
// replica; the decided notice is enqueued by the answer's commit. The
// Deliverer sends each once, journals each attempt in the run and
// finishes the entries.
func TestNoticesGoThroughTheOutbox(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	rc := newHookReceiver(t, false)
	a := newReplica(t, st, "cp-a", rc.srv.URL)

	run, _, err := a.runner.Start(ctx, runner.StartRequest{Plan: question(), Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	waiting, claimed := workOf(t, st)
	if len(waiting) != 1 || len(claimed) != 0 || waiting[0].ID != run.ID+"/q/ask.opened/1/pager" || waiting[0].RunID != run.ID {
		t.Fatalf("after Start: waiting %+v, claimed %+v; want the opened notice, let go by Opened", waiting, claimed)
	}
	a.run(t)
	rc.waitKinds(t, webhook.KindOpened)
	if _, err := a.runner.Event(ctx, run.ID, func(now time.Time) engine.Event {
		return engine.Answer{Ask: "q", Actor: "alice", Text: "this one", At: now}
	}); err != nil {
		t.Fatal(err)
	}
	rc.waitKinds(t, webhook.KindOpened, webhook.KindDecided)
	waitFinished(t, st)
	ds := deliveries(t, st, run.ID)
	if len(ds) != 2 || ds[0]["outcome"] != "delivered" || ds[0]["final"] != true || ds[0]["endpoint"] != "pager" ||
		ds[0]["event"] != webhook.KindOpened || ds[1]["event"] != webhook.KindDecided {
		t.Fatalf("journaled deliveries %+v", ds)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for id, n := range rc.processed {
		if n != 1 {
			t.Fatalf("event %s processed %d times", id, n)
		}
	}
}

// Done-when of issue 15 item 5, in one process: replica A claims the
// opened notice and sends it; the receiver holds the request; A dies (its
// store calls fail from then on, so it can neither finish nor release).
// Once A's heartbeat has lapsed, B's takeover releases A's claim and B
// delivers: the receiver processes the event once, under the same event
// id, and the run's journal records B's delivery.
func TestADeadReplicasPendingNoticeIsDeliveredByAnother(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(memstore.Config{})
	rc := newHookReceiver(t, true)
	dead := &dyingStore{Store: mem}
	a := newReplica(t, dead, "cp-a", rc.srv.URL)
	b := newReplica(t, mem, "cp-b", rc.srv.URL)
	if err := mem.Heartbeat(ctx, "cp-a", time.Hour); err != nil {
		t.Fatal(err)
	}
	run, _, err := a.runner.Start(ctx, runner.StartRequest{Plan: question(), Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	a.run(t)
	<-rc.held // A's request is at the receiver, unanswered
	if _, claimed := workOf(t, mem); len(claimed) != 1 || claimed[0].Owner != "cp-a" {
		t.Fatalf("claimed %+v, want A's", claimed)
	}
	dead.die()
	a.stop() // its request is cut; it cannot release the claim

	b.run(t)
	if err := b.runner.ReleaseClaims(ctx, false); err != nil { // A still alive: nothing
		t.Fatal(err)
	}
	if _, claimed := workOf(t, mem); len(claimed) != 1 || claimed[0].Owner != "cp-a" {
		t.Fatalf("a live replica's claim was released: %+v", claimed)
	}
	if err := mem.Leave(ctx, "cp-a"); err != nil { // its heartbeat lapses
		t.Fatal(err)
	}
	b.runner.Takeover(ctx)
	rc.waitKinds(t, webhook.KindOpened)
	waitFinished(t, mem)
	rc.mu.Lock()
	requests, processed := rc.requests, rc.processed
	rc.mu.Unlock()
	if requests != 2 || len(processed) != 1 {
		t.Fatalf("%d requests, %v processed; want A's held one and B's, one event", requests, processed)
	}
	for id, n := range processed {
		if n != 1 || !strings.HasPrefix(id, run.ID+"/q/ask.opened/") {
			t.Fatalf("event %s processed %d times", id, n)
		}
	}
	ds := deliveries(t, mem, run.ID)
	if len(ds) != 1 || ds[0]["outcome"] != "delivered" || ds[0]["final"] != true {
		t.Fatalf("journaled deliveries %+v, want B's", ds)
	}
}

// dyingStore is a replica's view of the store until the replica dies:
// from then on every call fails.
type dyingStore struct {
	store.Store
	mu   sync.Mutex
	dead bool
}

func (d *dyingStore) die() { d.mu.Lock(); d.dead = true; d.mu.Unlock() }

func (d *dyingStore) check() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return store.ErrUnavailable
	}
	return nil
}

func (d *dyingStore) Commit(ctx context.Context, c store.Commit) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.Store.Commit(ctx, c)
}

func (d *dyingStore) ClaimWork(ctx context.Context, queue, owner string, n int) ([]store.Work, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.Store.ClaimWork(ctx, queue, owner, n)
}

func (d *dyingStore) ReleaseWork(ctx context.Context, owner string, refs []store.WorkRef) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.Store.ReleaseWork(ctx, owner, refs)
}

func (d *dyingStore) FinishWork(ctx context.Context, refs []store.WorkRef) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.Store.FinishWork(ctx, refs)
}

// An opened notice is held back until Opened has judged the ask: dropped
// unsent when the ask was settled at once (a standing approval, an
// escalation), and released when its hook never ran.
func TestHeldOpenedNotices(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	n, err := webhook.New(webhook.Config{}, []webhook.Endpoint{
		{Name: "pager", URL: "http://127.0.0.1:1", Secret: hookSecret, Roles: []string{"*"}},
		{Name: "ops\nroom", URL: "http://127.0.0.1:1", Secret: hookSecret, Roles: []string{"*"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	desk := New(Config{Notifier: n, Work: st, Replica: "cp-a"})
	// The Runner with no hook: the test plays Opened's part.
	r := runner.New(runner.Config{Store: st, Replica: "cp-a", Outbox: desk})
	run, _, err := r.Start(ctx, runner.StartRequest{Plan: question(), Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	waiting, claimed := workOf(t, st)
	if len(waiting) != 0 || len(claimed) != 2 || claimed[0].Owner != "cp-a" {
		t.Fatalf("waiting %+v, claimed %+v: want both endpoints' opened notices held by cp-a", waiting, claimed)
	}
	for _, w := range claimed {
		if strings.Contains(w.ID, "\n") || !strings.HasPrefix(w.ID, run.ID+"/") {
			t.Fatalf("work id %q", w.ID)
		}
	}
	desk.settleOpened(ctx, run, "q", false)
	if waiting, claimed := workOf(t, st); len(waiting)+len(claimed) != 0 {
		t.Fatalf("settled unsent: waiting %+v, claimed %+v", waiting, claimed)
	}

	run2, _, err := r.Start(ctx, runner.StartRequest{Plan: question(), Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	desk.ReleaseHeld(ctx) // not yet due
	if waiting, _ := workOf(t, st); len(waiting) != 0 {
		t.Fatalf("released before its time: %+v", waiting)
	}
	for id, refs := range desk.held.due(time.Now().Add(heldFor)) {
		desk.held.readd(id, refs) // as if heldFor passed
	}
	desk.ReleaseHeld(ctx)
	waiting, claimed = workOf(t, st)
	if len(waiting) != 2 || len(claimed) != 0 || waiting[0].RunID != run2.ID {
		t.Fatalf("after heldFor: waiting %+v, claimed %+v", waiting, claimed)
	}
	desk.settleOpened(ctx, run2, "q", false) // late: nothing held any more
	if waiting, _ := workOf(t, st); len(waiting) != 2 {
		t.Fatalf("a late hook changed released notices: %+v", waiting)
	}
}

// A notice to an endpoint no longer configured (the configuration
// changed) is final at once: recorded in the run's journal as dropped,
// and finished.
func TestNoticeToAnEndpointGoneIsFinal(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	rc := newHookReceiver(t, false)
	a := newReplica(t, st, "cp-a", rc.srv.URL)
	run, _, err := a.runner.Start(ctx, runner.StartRequest{Plan: question(), Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	// Replica B knows the endpoint under another name.
	n, err := webhook.New(webhook.Config{}, []webhook.Endpoint{{Name: "pager-2", URL: rc.srv.URL, Secret: hookSecret, Roles: []string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	b := NewDeliverer(DelivererConfig{Store: st, Sender: n, Recorder: a.runner, Replica: "cp-b", Every: 10 * time.Millisecond})
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = b.Run(bctx, nil) }()
	defer func() { cancel(); <-done }()
	waitFinished(t, st)
	ds := deliveries(t, st, run.ID)
	if len(ds) != 1 || ds[0]["outcome"] != string(webhook.Dropped) || ds[0]["final"] != true || ds[0]["endpoint"] != "pager" {
		t.Fatalf("journaled %+v", ds)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.requests != 0 {
		t.Fatalf("%d requests", rc.requests)
	}
}

// A work id is the event id and the endpoint, unless that cannot be a
// work id: then a digest, under the run id.
func TestNoticeWorkID(t *testing.T) {
	if id := noticeWorkID("r1", "r1/q/ask.opened/3", "pager"); id != "r1/q/ask.opened/3/pager" {
		t.Fatal(id)
	}
	long := noticeWorkID("r1", "r1/q/ask.opened/3", strings.Repeat("x", store.MaxWorkName))
	nl := noticeWorkID("r1", "r1/q/ask.opened/3", "a\nb")
	for _, id := range []string{long, nl} {
		if err := store.CheckWork("r1", store.WorkRef{Queue: Queue, ID: id, RunID: "r1"}, nil); err != nil || !strings.HasPrefix(id, "r1/") {
			t.Fatalf("%q: %v", id, err)
		}
	}
	if long == nl {
		t.Fatal("two endpoints share a work id")
	}
}

// A Deliverer with room for one delivery at a time sends a second as soon
// as the first is final, without waiting for its tick.
func TestDelivererClaimsAgainWhenRoomFrees(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	rc := newHookReceiver(t, false)
	a := newReplica(t, st, "cp-a", rc.srv.URL)
	for range 2 {
		if _, _, err := a.runner.Start(ctx, runner.StartRequest{Plan: question(), Requester: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := webhook.New(webhook.Config{}, []webhook.Endpoint{{Name: "pager", URL: rc.srv.URL, Secret: hookSecret, Roles: []string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	one := NewDeliverer(DelivererConfig{Store: st, Sender: n, Recorder: a.runner, Replica: "cp-a", Every: time.Hour, MaxInHand: 1})
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = one.Run(dctx, nil) }()
	defer func() { cancel(); <-done }()
	rc.waitKinds(t, webhook.KindOpened, webhook.KindOpened)
	waitFinished(t, st)
}
