package schedules

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tollgate-dev/tollgate/internal/controlplane/api/runsvc"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is the store's clock, moved by the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time)     { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// runs is the one start path as the scheduler sees it: it makes a run per
// new request key (as the runner does) and counts every start by tick.
type runs struct {
	mu      sync.Mutex
	st      *memstore.Store
	byKey   map[string]string
	live    map[string]bool
	origin  map[string]engine.Origin
	started map[time.Time]int
	refuse  error
	n       int
	gets    int // runs read
}

func (r *runs) Start(_ context.Context, who string, in runsvc.Start) (*engine.Run, *engine.Machine, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse != nil {
		return nil, nil, false, r.refuse
	}
	key := who + "\x00" + in.RequestID
	if id, ok := r.byKey[key]; ok {
		return &engine.Run{ID: id}, nil, false, nil
	}
	r.n++
	id := fmt.Sprintf("r%d", r.n)
	r.byKey[key], r.live[id] = id, true
	if r.origin == nil {
		r.origin = map[string]engine.Origin{}
	}
	r.origin[id] = engine.Origin{Schedule: in.Schedule, Tick: in.Tick}
	r.started[in.Tick.UTC()]++
	return &engine.Run{ID: id, Requester: who, Origin: engine.Origin{Schedule: in.Schedule, Tick: in.Tick}}, nil, true, nil
}

func (r *runs) Get(_ context.Context, id string) (*engine.Run, *engine.Machine, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gets++
	if _, ok := r.live[id]; !ok {
		return nil, nil, store.ErrNotFound
	}
	st := engine.Complete
	if r.live[id] {
		st = engine.Running
	}
	return &engine.Run{ID: id, State: st, Origin: r.origin[id]}, nil, nil
}

func (r *runs) end(id string) { r.mu.Lock(); r.live[id] = false; r.mu.Unlock() }

func (r *runs) count(tick time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started[tick.UTC()]
}

func (r *runs) total() int { r.mu.Lock(); defer r.mu.Unlock(); return r.n }

// requested answers RequestedRun from the fake's keys: the memstore does
// not see the fake's runs.
type withRequests struct {
	*memstore.Store
	r *runs
}

func (w withRequests) RequestedRun(_ context.Context, key string) (string, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	return w.r.byKey[key], nil
}

type world struct {
	clock *clock
	st    withRequests
	runs  *runs
	book  *Book
}

// everyone holds the roles the map gives them.
type everyone map[string][]string

func (e everyone) Holds(_ context.Context, who, role string) bool {
	for _, o := range e[role] {
		if o == who {
			return true
		}
	}
	return false
}

type oneSkill struct{}

func (oneSkill) Runnable(_ context.Context, name string, version int64) (store.SkillVersion, error) {
	if name != "brief" {
		return store.SkillVersion{}, fmt.Errorf("no skill named %s: %w", name, errkind.NotFound)
	}
	return store.SkillVersion{Name: name, Version: 1}, nil
}

var t0 = time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC) // a Monday

func newWorld(t *testing.T) *world {
	c := &clock{t: t0}
	ms := memstore.New(memstore.Config{Now: c.now})
	r := &runs{st: ms, byKey: map[string]string{}, live: map[string]bool{}, started: map[time.Time]int{}}
	w := &world{clock: c, st: withRequests{ms, r}, runs: r}
	w.book = NewBook(BookConfig{Store: ms, Skills: oneSkill{}, Roles: everyone{"operator": {"otto"}, "auditor": {"audrey"}}, OperatorRole: "operator", AuditorRole: "auditor",
		Now: func(context.Context) (time.Time, error) { return c.now(), nil }})
	return w
}

func (w *world) scheduler(replica string) *Scheduler {
	return NewScheduler(SchedulerConfig{Store: w.st, Starter: w.runs, Runs: w.runs, Replica: replica})
}

func (w *world) add(t *testing.T, sp Spec) {
	t.Helper()
	if _, err := w.book.Put(context.Background(), "alice", sp, 0); err != nil {
		t.Fatal(err)
	}
}

// passAll makes one pass on each replica, concurrently.
func passAll(t *testing.T, ss ...*Scheduler) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Go(func() {
			if _, _, err := s.Pass(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// Issue 19, item 3: three replicas passing over every second of a
// schedule that fires every second start exactly one run per tick, and
// none while it is paused.
func TestThreeReplicasStartOneRunPerTick(t *testing.T) {
	w := newWorld(t)
	w.add(t, Spec{Name: "every-second", Skill: "brief", Cron: "* * * * * *", Concurrency: "allow"})
	ss := []*Scheduler{w.scheduler("a"), w.scheduler("b"), w.scheduler("c")}
	for i := 1; i <= 10; i++ {
		w.clock.add(time.Second)
		passAll(t, ss...)
		passAll(t, ss...) // a second pass finds nothing more
	}
	for i := 1; i <= 10; i++ {
		if n := w.runs.count(t0.Add(time.Duration(i) * time.Second)); n != 1 {
			t.Fatalf("tick %d started %d runs, want 1", i, n)
		}
	}
	if n := w.runs.total(); n != 10 {
		t.Fatalf("%d runs for 10 ticks", n)
	}
	if _, err := w.book.Pause(context.Background(), "alice", "every-second"); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		w.clock.add(time.Second)
		passAll(t, ss...)
	}
	if n := w.runs.total(); n != 10 {
		t.Fatalf("paused, yet %d runs were started", n-10)
	}
	if _, err := w.book.Resume(context.Background(), "alice", "every-second"); err != nil {
		t.Fatal(err)
	}
	passAll(t, ss...)
	if n := w.runs.total(); n != 10 {
		t.Fatalf("resume caught up %d ticks of the pause", n-10)
	}
	w.clock.add(time.Second)
	passAll(t, ss...)
	if n := w.runs.total(); n != 11 {
		t.Fatalf("after resume, the next tick started %d runs", n-10)
	}
	sc, _ := w.book.Get(context.Background(), "every-second")
	if sc.Started != 11 || sc.Pending != nil || sc.LastRun == "" {
		t.Fatalf("record after the ticks: %+v", sc)
	}
}

// Every replica down across ticks: catch_up says what becomes of them.
func TestCatchUpAfterEveryReplicaWasDown(t *testing.T) {
	for _, tc := range []struct {
		catchUp string
		want    int // runs for the ticks while down
	}{{"none", 0}, {"last", 1}} {
		t.Run(tc.catchUp, func(t *testing.T) {
			w := newWorld(t)
			// every 10 seconds, grace 2s
			w.add(t, Spec{Name: "s", Skill: "brief", Cron: "*/10 * * * * *", CatchUp: tc.catchUp, Grace: 2 * time.Second, Concurrency: "allow"})
			a := w.scheduler("a")
			w.clock.add(10 * time.Second)
			passAll(t, a)
			before := w.runs.total()
			// Down from 8:00:10 to 8:00:35: the ticks at :20 and :30 pass.
			w.clock.add(25 * time.Second)
			passAll(t, w.scheduler("b"))
			got := w.runs.total() - before
			if got != tc.want {
				t.Fatalf("catch_up %s: %d runs for the missed ticks, want %d", tc.catchUp, got, tc.want)
			}
			if tc.want == 1 && w.runs.count(t0.Add(30*time.Second)) != 1 {
				t.Fatalf("catch_up last started a run, but not for the latest missed tick (:30)")
			}
			sc, _ := w.book.Get(context.Background(), "s")
			if sc.Missed != int64(2-tc.want) || (tc.want == 0) != (sc.LastSkip != "") {
				t.Fatalf("missed ticks are not counted: %+v", sc)
			}
			w.clock.add(5 * time.Second) // :40 on time
			passAll(t, a)
			if w.runs.count(t0.Add(40*time.Second)) != 1 {
				t.Fatalf("the on-time tick after the outage did not start")
			}
		})
	}
}

// concurrency: skip passes over a tick while the last run is live; wait
// starts it when that run ends; allow starts it anyway.
func TestConcurrency(t *testing.T) {
	for _, tc := range []struct {
		mode             string
		atTick, atEnd    int // runs started at the second tick, and once the first run ended
		waitingAfterTick bool
	}{{"skip", 0, 0, false}, {"wait", 0, 1, true}, {"allow", 1, 0, false}} {
		t.Run(tc.mode, func(t *testing.T) {
			w := newWorld(t)
			w.add(t, Spec{Name: "s", Skill: "brief", Cron: "*/10 * * * * *", Concurrency: tc.mode})
			a := w.scheduler("a")
			w.clock.add(10 * time.Second)
			passAll(t, a)
			sc, _ := w.book.Get(context.Background(), "s")
			first := sc.LastRun
			w.clock.add(10 * time.Second)
			passAll(t, a)
			if got := w.runs.total() - 1; got != tc.atTick {
				t.Fatalf("%s: %d runs at the second tick while the first is live, want %d", tc.mode, got, tc.atTick)
			}
			sc, _ = w.book.Get(context.Background(), "s")
			if !sc.Buffered.IsZero() != tc.waitingAfterTick {
				t.Fatalf("%s: waiting tick %v", tc.mode, sc.Buffered)
			}
			w.runs.end(first)
			w.clock.add(time.Second)
			passAll(t, a)
			if got := w.runs.total() - 1 - tc.atTick; got != tc.atEnd {
				t.Fatalf("%s: %d runs once the first ended, want %d", tc.mode, got, tc.atEnd)
			}
			if tc.mode == "wait" && w.runs.count(t0.Add(20*time.Second)) != 1 {
				t.Fatalf("wait started a run, but not for the tick that waited")
			}
		})
	}
}

// A replica that claimed a tick and died before starting its run: another
// finishes the claim with the same request id — one run, not two, and
// not none.
func TestClaimOfADeadReplicaIsFinishedOnce(t *testing.T) {
	w := newWorld(t)
	w.add(t, Spec{Name: "s", Skill: "brief", Cron: "*/10 * * * * *"})
	ctx := context.Background()
	sc, _ := w.book.Get(ctx, "s")
	tick := t0.Add(10 * time.Second)
	w.clock.set(tick)
	// "a" claims and stops answering (its heartbeat has not lapsed yet):
	// the claim is in the store, no run yet.
	if err := w.st.Heartbeat(ctx, "a", time.Hour); err != nil {
		t.Fatal(err)
	}
	claimed := sc
	claimed.LastTick = tick
	claimed.Pending = &store.TickClaim{Tick: tick, RequestID: RequestID(sc, tick), By: "a", At: tick}
	if _, err := w.st.PutSchedule(ctx, claimed, sc.Version); err != nil {
		t.Fatal(err)
	}
	b := w.scheduler("b")
	passAll(t, b)
	if w.runs.total() != 0 {
		t.Fatal("b finished the claim of a replica that still beats, before the claim timed out")
	}
	w.clock.add(11 * time.Second) // past ClaimTimeout
	passAll(t, b, w.scheduler("c"))
	if n := w.runs.count(tick); n != 1 {
		t.Fatalf("the dead replica's tick started %d runs, want 1", n)
	}
	sc, _ = w.book.Get(ctx, "s")
	if sc.Pending != nil || sc.Started != 1 {
		t.Fatalf("claim not recorded: %+v", sc)
	}
}

// A claim of a replica whose heartbeat lapsed is finished at once.
func TestClaimOfAReplicaThatLeftIsFinishedAtOnce(t *testing.T) {
	w := newWorld(t)
	w.add(t, Spec{Name: "s", Skill: "brief", Cron: "*/10 * * * * *"})
	ctx := context.Background()
	sc, _ := w.book.Get(ctx, "s")
	tick := t0.Add(10 * time.Second)
	w.clock.set(tick)
	claimed := sc
	claimed.LastTick = tick
	claimed.Pending = &store.TickClaim{Tick: tick, RequestID: RequestID(sc, tick), By: "gone", At: tick}
	if _, err := w.st.PutSchedule(ctx, claimed, sc.Version); err != nil {
		t.Fatal(err)
	}
	passAll(t, w.scheduler("b"))
	if n := w.runs.count(tick); n != 1 {
		t.Fatalf("the claim of a replica with no heartbeat started %d runs, want 1", n)
	}
}

// The attacker's and the unlucky operator's paths through a claim.
func TestClaimSurvivesChangesMadeWhileItWaits(t *testing.T) {
	ctx := context.Background()
	claimedBy := func(t *testing.T, w *world, replica string) (store.Schedule, time.Time) {
		t.Helper()
		sc, _ := w.book.Get(ctx, "s")
		tick := t0.Add(10 * time.Second)
		w.clock.set(tick)
		claimed := sc
		claimed.LastTick = tick
		claimed.Pending = &store.TickClaim{Tick: tick, RequestID: RequestID(sc, tick), RunAs: sc.RunAs, By: replica, At: tick}
		out, err := w.st.PutSchedule(ctx, claimed, sc.Version)
		if err != nil {
			t.Fatal(err)
		}
		return out, tick
	}
	t.Run("run_as changed after the claim's run started", func(t *testing.T) {
		w := newWorld(t)
		if _, err := w.book.Put(ctx, "otto", Spec{Name: "s", Skill: "brief", Cron: "*/10 * * * * *", RunAs: "alice"}, 0); err != nil {
			t.Fatal(err)
		}
		sc, tick := claimedBy(t, w, "gone")
		// The dying replica started the run as alice, and recorded nothing.
		if _, _, _, err := w.runs.Start(ctx, "alice", runsvc.Start{RequestID: sc.Pending.RequestID, Skill: "brief", Schedule: "s", Tick: tick}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.book.Put(ctx, "otto", Spec{Name: "s", Skill: "brief", Cron: "*/10 * * * * *", RunAs: "bob"}, sc.Version); err != nil {
			t.Fatal(err)
		}
		passAll(t, w.scheduler("b"))
		if n := w.runs.count(tick); n != 1 {
			t.Fatalf("the tick has %d runs after its run_as changed, want the one started as alice", n)
		}
	})
	t.Run("paused while claimed, then resumed", func(t *testing.T) {
		w := newWorld(t)
		w.add(t, Spec{Name: "s", Skill: "brief", Cron: "*/10 * * * * *"})
		claimedBy(t, w, "gone")
		if _, err := w.book.Pause(ctx, "alice", "s"); err != nil {
			t.Fatal(err)
		}
		passAll(t, w.scheduler("b"))
		if n := w.runs.total(); n != 0 {
			t.Fatalf("a paused schedule's claimed tick started %d runs", n)
		}
		w.clock.add(5 * time.Second)
		if _, err := w.book.Resume(ctx, "alice", "s"); err != nil {
			t.Fatal(err)
		}
		passAll(t, w.scheduler("b"))
		if n := w.runs.total(); n != 0 {
			t.Fatalf("resume started the tick claimed before the pause (%d runs)", n)
		}
	})
	t.Run("a request id taken by another run", func(t *testing.T) {
		w := newWorld(t)
		w.add(t, Spec{Name: "s", Skill: "brief", Cron: "*/10 * * * * *"})
		sc, tick := claimedBy(t, w, "gone")
		// alice started a run of her own under the tick's id (the API
		// refuses the prefix; this is the store's view if it did not).
		if _, _, _, err := w.runs.Start(ctx, "alice", runsvc.Start{RequestID: sc.Pending.RequestID, Skill: "brief"}); err != nil {
			t.Fatal(err)
		}
		passAll(t, w.scheduler("b"))
		got, _ := w.book.Get(ctx, "s")
		if got.Pending != nil || got.Started != 0 || got.LastRun != "" || !strings.Contains(got.LastError, "taken") {
			t.Fatalf("a foreign run was taken for the tick's: %+v", got)
		}
		_ = tick
	})
	t.Run("an error that says nothing is not retried forever", func(t *testing.T) {
		w := newWorld(t)
		w.add(t, Spec{Name: "s", Skill: "brief", Cron: "*/10 * * * * *"})
		w.runs.refuse = errors.New("policy evaluation failed")
		w.clock.add(10 * time.Second)
		passAll(t, w.scheduler("a"))
		got, _ := w.book.Get(context.Background(), "s")
		if got.Pending != nil || got.LastError == "" {
			t.Fatalf("an unclassified refusal held the claim: %+v", got)
		}
	})
}

// A pass that finds no tick due reads no run: every replica passes over
// every schedule every second.
func TestIdlePassReadsNoRun(t *testing.T) {
	w := newWorld(t)
	w.add(t, Spec{Name: "s", Skill: "brief", Cron: "*/10 * * * * *"})
	a := w.scheduler("a")
	w.clock.add(10 * time.Second)
	passAll(t, a) // starts r1: the schedule now has a last run
	w.runs.mu.Lock()
	w.runs.gets = 0
	w.runs.mu.Unlock()
	for range 5 {
		w.clock.add(time.Second)
		passAll(t, a)
	}
	if w.runs.gets != 0 {
		t.Fatalf("5 idle passes read the last run %d times", w.runs.gets)
	}
	w.clock.add(5 * time.Second) // the next tick: skip, for r1 is live
	passAll(t, a)
	if sc, _ := w.book.Get(context.Background(), "s"); sc.Skipped != 1 || w.runs.gets == 0 {
		t.Fatalf("a due tick must read whether the last run is live: skipped %d, reads %d", sc.Skipped, w.runs.gets)
	}
}

// A start refused for good (policy, a skill gone) is the tick's error;
// the schedule goes on with the next tick.
func TestRefusedStartIsRecorded(t *testing.T) {
	w := newWorld(t)
	w.add(t, Spec{Name: "s", Skill: "brief", Cron: "*/10 * * * * *"})
	w.runs.refuse = fmt.Errorf("alice may not approve post by starting the run: %w", errkind.Denied)
	a := w.scheduler("a")
	w.clock.add(10 * time.Second)
	passAll(t, a)
	sc, _ := w.book.Get(context.Background(), "s")
	if sc.Pending != nil || sc.LastError == "" || sc.Started != 0 {
		t.Fatalf("refused start: %+v", sc)
	}
	// A store outage is not a refusal: the claim stays for the next pass.
	w.runs.refuse = fmt.Errorf("redis: %w", store.ErrUnavailable)
	w.clock.add(10 * time.Second)
	passAll(t, a)
	sc, _ = w.book.Get(context.Background(), "s")
	if sc.Pending == nil {
		t.Fatalf("a start that failed for now dropped its claim: %+v", sc)
	}
	w.runs.refuse = nil
	passAll(t, a)
	sc, _ = w.book.Get(context.Background(), "s")
	if sc.Pending != nil || sc.Started != 1 || sc.LastError != "" {
		t.Fatalf("the claim was not finished once the store came back: %+v", sc)
	}
}

// Who may run as whom, and who may change a schedule.
func TestBookAuthority(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	if _, err := w.book.Put(ctx, "alice", Spec{Name: "s", Skill: "brief", Cron: "@daily", RunAs: "bob"}, 0); !errors.Is(err, errkind.Denied) {
		t.Fatalf("alice made a schedule that runs as bob: %v", err)
	}
	if _, err := w.book.Put(ctx, "otto", Spec{Name: "s", Skill: "brief", Cron: "@daily", RunAs: "bob"}, 0); err != nil {
		t.Fatalf("an operator may: %v", err)
	}
	if _, err := w.book.Pause(ctx, "mallory", "s"); !errors.Is(err, errkind.NotFound) {
		t.Fatalf("mallory paused someone else's schedule, or learnt it exists: %v", err)
	}
	// It holds bob's inputs: only its creator, bob, operators and
	// auditors read it; to anyone else it does not exist.
	for who, sees := range map[string]bool{"otto": true, "bob": true, "audrey": true, "mallory": false, "alice": false} {
		_, err := w.book.Read(ctx, who, "s")
		all, _ := w.book.ReadAll(ctx, who, "")
		if sees != (err == nil) || sees != (len(all) == 1) {
			t.Errorf("%s reads it: %v, lists %d; want %v", who, err, len(all), sees)
		}
		if !sees && !errors.Is(err, errkind.NotFound) {
			t.Errorf("%s is told %v, want not found", who, err)
		}
	}
	if _, err := w.book.Pause(ctx, "audrey", "s"); !errors.Is(err, errkind.Denied) {
		t.Fatalf("an auditor paused a schedule: %v", err)
	}
	if _, err := w.book.Pause(ctx, "bob", "s"); err != nil {
		t.Fatalf("whom it runs as may pause it: %v", err)
	}
	for _, sp := range []Spec{
		{Name: "x", Skill: "brief", Cron: "not a cron"},
		{Name: "x", Skill: "brief", Cron: "@daily", Zone: "Mars/Olympus"},
		{Name: "x", Skill: "brief", Cron: "@daily", CatchUp: "all"},
		{Name: "x", Skill: "brief", Cron: "@daily", Concurrency: "queue"},
		{Name: "x", Skill: "brief", Cron: "@daily", Grace: time.Millisecond},
		{Name: "X!", Skill: "brief", Cron: "@daily"},
	} {
		if _, err := w.book.Put(ctx, "alice", sp, 0); !errors.Is(err, errkind.Invalid) {
			t.Errorf("%+v: %v, want invalid", sp, err)
		}
	}
	if _, err := w.book.Put(ctx, "alice", Spec{Name: "big", Skill: "brief", Cron: "@daily", Inputs: map[string]string{"x": strings.Repeat("a", MaxInputBytes)}}, 0); !errors.Is(err, errkind.Invalid) {
		t.Errorf("a schedule with %d bytes of inputs: %v", MaxInputBytes+1, err)
	}
	// One person cannot take every place in the book.
	for i := range MaxPerCreator {
		if _, err := w.book.Put(ctx, "carol", Spec{Name: fmt.Sprintf("c%03d", i), Skill: "brief", Cron: "@daily"}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.book.Put(ctx, "carol", Spec{Name: "one-more", Skill: "brief", Cron: "@daily"}, 0); !errors.Is(err, errkind.Exhausted) {
		t.Errorf("schedule %d of one person: %v", MaxPerCreator+1, err)
	}
	if _, err := w.book.Put(ctx, "alice", Spec{Name: "x", Skill: "nope", Cron: "@daily"}, 0); !errors.Is(err, errkind.NotFound) {
		t.Errorf("a schedule of an unknown skill: %v", err)
	}
	if _, err := w.book.Put(ctx, "alice", Spec{Name: "s", Skill: "brief", Cron: "@daily"}, 0); !errors.Is(err, errkind.Precondition) {
		t.Errorf("a second create of the same name: %v", err)
	}
}
