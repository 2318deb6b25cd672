package runner

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// noticeOutbox enqueues one "notice" entry per ask effect, named by the
// run's version, as the approvals desk does; builds counts its calls.
type noticeOutbox struct {
	mu     sync.Mutex
	builds int
}

func (o *noticeOutbox) Work(run *engine.Run, effects []engine.Effect) []store.Work {
	o.mu.Lock()
	o.builds++
	o.mu.Unlock()
	var out []store.Work
	for _, e := range effects {
		var what string
		switch e := e.(type) {
		case engine.AskOpened:
			what = e.Ask + "/opened"
		case engine.AskNotice:
			what = e.Ask + "/" + string(e.Kind)
		case engine.AskClosed:
			what = e.Ask + "/" + string(e.State)
		default:
			continue
		}
		out = append(out, store.Work{Queue: "notice", ID: fmt.Sprintf("%s/%s/%d", run.ID, what, run.Version), RunID: run.ID})
	}
	return out
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// askFirst is a plan that asks its requester a question, with a reminder
// after an hour, before anything runs.
func askFirst() *plan.Plan {
	return &plan.Plan{Name: "ask", InitialSteps: []plan.Step{}, StoppingPoints: []plan.StoppingPoint{{
		ID: "q", Type: plan.StopText, Title: "which one?", Audience: plan.AudienceRequester, After: []string{},
		RemindAfter: "1h", Then: &plan.Phase{Steps: []plan.Step{}, StoppingPoints: []plan.StoppingPoint{}},
	}}}
}

func waiting(t *testing.T, st store.Store) []string {
	t.Helper()
	ws, err := st.WaitingWork(context.Background(), "notice", 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, w := range ws {
		ids = append(ids, w.ID)
	}
	return ids
}

// The outbox's work lands in the commit of the transition that caused
// it, from Start and from the group commit; a rung of the deadline ladder
// (a reminder) that two replicas both apply is committed once — the
// other's commit conflicts and, applied again to the stored run, finds
// the rung passed — so its notice is enqueued once.
func TestOutboxWorkIsCommittedWithItsTransitionOnce(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	st := memstore.New(memstore.Config{Now: clock.Now})
	oa, ob := &noticeOutbox{}, &noticeOutbox{}
	a := New(Config{Store: st, Replica: "cp-a", Outbox: oa})
	b := New(Config{Store: st, Replica: "cp-b", Outbox: ob})

	run, _, err := b.Start(ctx, StartRequest{Plan: askFirst(), Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	opened := run.ID + "/q/opened/1"
	if got := waiting(t, st); len(got) != 1 || got[0] != opened {
		t.Fatalf("after Start: %v, want %s", got, opened)
	}

	clock.add(time.Hour + time.Second)
	// a reads the run: the reminder is applied and committed by a.
	if _, _, err := a.Get(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	reminder := fmt.Sprintf("%s/q/%s/2", run.ID, engine.NoticeReminder)
	if got := waiting(t, st); len(got) != 2 || got[1] != reminder {
		t.Fatalf("after a's reminder: %v, want %s too", got, reminder)
	}
	// b still holds version 1 (it committed it last) and applies the same
	// rung: the commit it builds carries the reminder, conflicts, and the
	// stored run has nothing due.
	builds := ob.builds
	if _, err := b.Event(ctx, run.ID, func(now time.Time) engine.Event { return engine.Tick{At: now} }); err != nil {
		t.Fatal(err)
	}
	if ob.builds == builds {
		t.Fatal("b never built a commit with the stale run: the test did not race")
	}
	if got := waiting(t, st); len(got) != 2 || got[0] != opened || got[1] != reminder {
		t.Fatalf("after b's stale tick: %v, want only %s and %s", got, opened, reminder)
	}
	r, _, err := b.Get(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rec := range journalOf(t, st, run.ID) {
		if rec.Kind == string(engine.JournalAskReminded) {
			n++
		}
	}
	if n != 1 || r.Asks["q"].State != engine.AskPending {
		t.Fatalf("reminders journaled: %d, ask %s", n, r.Asks["q"].State)
	}

	// The answer closes the ask in the group commit: its notice is
	// enqueued with it.
	if _, err := a.Event(ctx, run.ID, func(now time.Time) engine.Event {
		return engine.Answer{Ask: "q", Actor: "alice", Text: "this one", At: now}
	}); err != nil {
		t.Fatal(err)
	}
	r, _, _ = a.Get(ctx, run.ID)
	closed := fmt.Sprintf("%s/q/%s/%d", run.ID, engine.AskAnswered, r.Version)
	if got := waiting(t, st); len(got) != 3 || got[2] != closed {
		t.Fatalf("after the answer: %v, want %s too", got, closed)
	}
}

func journalOf(t *testing.T, st store.Store, id string) []store.JournalRecord {
	t.Helper()
	recs, err := st.Journal(context.Background(), id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
