package runner

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/memstore"
	"github.com/tollgate-dev/tollgate/internal/store/storetest"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// expiring is askFirst whose ask reminds after remind and expires after
// expires (the run then ends expired).
func expiring(remind, expires string) *plan.Plan {
	p := askFirst()
	p.StoppingPoints[0].RemindAfter, p.StoppingPoints[0].Expires = remind, expires
	return p
}

// askState is the state of run's ask q.
func askState(run *engine.Run) engine.AskState {
	if a := run.Asks["q"]; a != nil {
		return a.State
	}
	return ""
}

// GetRuns gives each run what Get gives it — every rung of the deadline
// ladder that is due applied and committed (a reminder: the ask still
// waits; the deadline: it expired), a run with nothing due as stored —
// in one read of the runs and one of the clock, from the replica that
// committed them and from another; a repeated id is one run.
func TestGetRunsAppliesDueRungsAsGetDoes(t *testing.T) {
	ctx := context.Background()
	for _, elsewhere := range []bool{false, true} {
		t.Run(fmt.Sprintf("elsewhere=%v", elsewhere), func(t *testing.T) {
			clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
			st := &storetest.Reads{Store: memstore.New(memstore.Config{Now: clock.Now})}
			a := New(Config{Store: st, Replica: "cp-a"})
			start := func(p *plan.Plan) string {
				run, _, err := a.Start(ctx, StartRequest{Plan: p, Requester: "alice"})
				if err != nil {
					t.Fatal(err)
				}
				return run.ID
			}
			// The runs start together; their rungs differ. (Starts take
			// the time from the runner's estimate of the store's clock,
			// which follows a test's jumps of the clock only when it is
			// measured again.)
			expires := start(expiring("1h", "80m")) // due for its deadline at the read
			reminds := start(expiring("1h", "3h"))  // due for its reminder
			waits := start(expiring("2h", "3h"))    // nothing due
			clock.add(90 * time.Minute)
			reader := a
			if elsewhere {
				reader = New(Config{Store: st, Replica: "cp-b"})
			}
			st.Reset()
			ids := []string{waits, expires, reminds, waits}
			runs, err := reader.GetRuns(ctx, ids)
			if err != nil {
				t.Fatal(err)
			}
			// One read of the runs; the commits of the due rungs read
			// what Get's commits read (the clock; the run, where this
			// replica did not commit it), and nothing else.
			if st.GetRunsCalls.Load() != 1 || st.RunVersionCalls.Load() != 0 {
				t.Fatalf("GetRuns of 3 runs read the store with %s; want 1 GetRuns and no RunVersion", st)
			}
			// Once the rungs are applied, reading the page again is one
			// read of the runs and one of the clock.
			st.Reset()
			if _, err := reader.GetRuns(ctx, ids); err != nil {
				t.Fatal(err)
			}
			if st.GetRunsCalls.Load() != 1 || st.NowCalls.Load() != 1 || st.GetRunCalls.Load()+st.RunVersionCalls.Load() != 0 {
				t.Fatalf("GetRuns of 3 runs with nothing due read the store with %s; want 1 GetRuns and 1 Now", st)
			}
			for _, tc := range []struct {
				i        int
				state    engine.State
				ask      engine.AskState
				version  int64
				reminded bool
			}{
				{0, engine.Parked, engine.AskPending, 1, false},
				{1, engine.Expired, engine.AskExpired, 2, true}, // both rungs passed: one commit
				{2, engine.Parked, engine.AskPending, 2, true},
				{3, engine.Parked, engine.AskPending, 1, false},
			} {
				run := runs[tc.i]
				if run.ID != ids[tc.i] || run.State != tc.state || askState(run) != tc.ask || run.Version != tc.version || run.Asks["q"].Reminded != tc.reminded {
					t.Errorf("runs[%d] = %s %s, ask %s (reminded %v), v%d; want %s %s, ask %s (reminded %v), v%d", tc.i, run.ID, run.State, askState(run),
						run.Asks["q"].Reminded, run.Version, ids[tc.i], tc.state, tc.ask, tc.reminded, tc.version)
				}
				stored, err := st.GetRun(ctx, run.ID)
				if err != nil {
					t.Fatal(err)
				}
				if stored.Version != run.Version {
					t.Errorf("runs[%d] is v%d, the store holds v%d: the rung was not committed", tc.i, run.Version, stored.Version)
				}
				// Get, now, agrees: nothing more is due.
				got, _, err := reader.Get(ctx, run.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.Version != run.Version || got.State != run.State || askState(got) != askState(run) {
					t.Errorf("Get(%s) = %s v%d after GetRuns gave %s v%d", run.ID, got.State, got.Version, run.State, run.Version)
				}
			}
			if runs[0] != runs[3] {
				t.Error("a repeated id gave two different runs")
			}
			if n := reader.Expiries(); n != 1 {
				t.Errorf("the reader saw %d expiries, want 1", n)
			}
		})
	}
}

// A page without an open ask needs no clock; an empty page, no read.
func TestGetRunsReadsTheClockOnlyForOpenAsks(t *testing.T) {
	ctx := context.Background()
	st := &storetest.Reads{Store: memstore.New(memstore.Config{})}
	r := New(Config{Store: st})
	run, _, err := r.Start(ctx, StartRequest{Plan: twoSteps(), Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                  string
		ids                   []string
		wantGetRuns, wantNows int64
	}{
		{"empty", nil, 0, 0},
		{"no open ask", []string{run.ID, run.ID}, 1, 0},
	} {
		st.Reset()
		runs, err := r.GetRuns(ctx, tc.ids)
		if err != nil || len(runs) != len(tc.ids) {
			t.Fatalf("%s: %d runs, %v", tc.name, len(runs), err)
		}
		if st.GetRunsCalls.Load() != tc.wantGetRuns || st.NowCalls.Load() != tc.wantNows || st.GetRunCalls.Load()+st.RunVersionCalls.Load() != 0 {
			t.Fatalf("%s: %s; want %d GetRuns and %d Now", tc.name, st, tc.wantGetRuns, tc.wantNows)
		}
	}
}

// A run the store does not hold fails the read as Get fails for it:
// ErrNotFound, naming the run.
func TestGetRunsOfAMissingRunIsNotFound(t *testing.T) {
	ctx := context.Background()
	r := New(Config{Store: memstore.New(memstore.Config{})})
	run, _, err := r.Start(ctx, StartRequest{Plan: askFirst(), Requester: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	_, _, getErr := r.Get(ctx, "r_gone")
	_, err = r.GetRuns(ctx, []string{run.ID, "r_gone"})
	if !errors.Is(err, store.ErrNotFound) || err.Error() != getErr.Error() {
		t.Fatalf("GetRuns with a missing run: %v; want Get's error %v", err, getErr)
	}
}

// A replica decodes a version of a run it did not commit once: the next
// page that shows it gets the same run without decoding it again, and a
// later version (another replica committed it) is read and decoded, never
// the one held.
func TestGetRunsDecodesAVersionOnce(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	a, b := New(Config{Store: st, Replica: "cp-a"}), New(Config{Store: st, Replica: "cp-b"})
	var ids []string
	for range 3 {
		run, _, err := a.Start(ctx, StartRequest{Plan: askFirst(), Requester: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, run.ID)
	}
	first, err := b.GetRuns(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.GetRuns(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ids {
		if first[i] != again[i] {
			t.Fatalf("run %d was decoded again though its version did not change", i)
		}
	}
	// a moves the second run on; b must read the new version.
	moved, err := a.Event(ctx, ids[1], func(now time.Time) engine.Event {
		return engine.Answer{Ask: "q", Actor: "alice", Text: "this one", At: now}
	})
	if err != nil {
		t.Fatal(err)
	}
	latest, err := b.GetRuns(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if latest[1] == first[1] || latest[1].Version != moved.Run.Version || askState(latest[1]) == engine.AskPending {
		t.Fatalf("after a moved the run to v%d, b shows v%d with its ask %s", moved.Run.Version, latest[1].Version, askState(latest[1]))
	}
	if latest[0] != first[0] || latest[2] != first[2] {
		t.Fatal("runs that did not move were decoded again")
	}
	// a holds every run it committed decoded: it decodes none.
	mine, err := a.GetRuns(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		c, ok := a.recent(id)
		if !ok || mine[i] != c.run {
			t.Fatalf("a decoded run %d though it holds the version it committed", i)
		}
	}
}

// BenchmarkGetRuns is the runs of a page of 50 parked runs read by a
// replica that did not commit them: "cold" decodes every run (nothing
// kept from an earlier page), "warm" finds each version already decoded.
func BenchmarkGetRuns(b *testing.B) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	a := New(Config{Store: st, Replica: "cp-a"})
	ids := make([]string, 50)
	for i := range ids {
		run, _, err := a.Start(ctx, StartRequest{Plan: askFirst(), Requester: "alice"})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = run.ID
	}
	for _, warm := range []bool{false, true} {
		name := "cold"
		if warm {
			name = "warm"
		}
		b.Run(name, func(b *testing.B) {
			r := New(Config{Store: st, Replica: "cp-b"})
			if _, err := r.GetRuns(ctx, ids); err != nil { // the plan loaded
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if !warm {
					for _, id := range ids {
						r.paged.Remove(id)
					}
				}
				if _, err := r.GetRuns(ctx, ids); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
