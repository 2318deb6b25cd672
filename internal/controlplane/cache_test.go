package controlplane

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// Item 12: a caller who starts ever more distinct plans does not grow the
// plane's memory with them. Every plan cache stays at its configured
// bound, and a run whose plan was evicted still reads and moves (its plan
// is loaded from the store again).
func TestItem12_PlanCachesStayBoundedAndEvictedPlansStillWork(t *testing.T) {
	const bound, plans = 4, 12
	e := newEnvOn(t, nil, devPolicy(t), nil, func(c *Config) { c.PlanCache = bound })
	var ids []string
	for i := range plans {
		// No executors: each run stays blocked, so it can still move.
		resp, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{
			Recipe: fmt.Sprintf("r: notes.search {\"q\":\"%d\"}\n", i)}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.GetRun().GetId())
	}
	caches := e.srv.Caches()
	for _, name := range []string{"plans", "compiled", "plan_views"} {
		st := caches[name]
		if st.Entries > bound || st.Bound != bound {
			t.Errorf("cache %s holds %d entries (bound %d) after %d distinct plans; want at most %d", name, st.Entries, st.Bound, plans, bound)
		}
		if st.Evictions < plans-bound {
			t.Errorf("cache %s evicted %d entries; want at least %d", name, st.Evictions, plans-bound)
		}
	}
	// The first run's plan is long evicted: reading and cancelling it
	// loads it again.
	g, err := e.runs("alice").GetRun(bg, &tollgatev1.GetRunRequest{RunId: ids[0]})
	if err != nil {
		t.Fatalf("read a run whose plan was evicted: %v", err)
	}
	if g.GetRun().GetPlan() == nil || len(g.GetRun().GetSteps()) != 1 {
		t.Fatalf("run of an evicted plan reads without its plan: %v", g.GetRun())
	}
	c, err := e.runs("alice").CancelRun(bg, &tollgatev1.CancelRunRequest{RunId: ids[0], Reason: "evicted plan"})
	if err != nil {
		t.Fatalf("cancel a run whose plan was evicted: %v", err)
	}
	if c.GetRun().GetState() != tollgatev1.RunState_RUN_STATE_CANCELLED {
		t.Fatalf("run is %v after cancel", c.GetRun().GetState())
	}
	if st := e.srv.Caches()["plans"]; st.Entries > bound {
		t.Errorf("plan cache holds %d after reloading; bound %d", st.Entries, bound)
	}
}

// The bounds are in the config file as well as in flags; a flag wins.
func TestItem12_BoundsFromConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp.yaml")
	if err := os.WriteFile(path, []byte("plan_cache: 7\nmax_watches_per_caller: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var o Options
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o.register(fs)
	if err := fs.Parse([]string{"--max-watches-per-caller", "5"}); err != nil {
		t.Fatal(err)
	}
	if err := o.load(path, fs); err != nil {
		t.Fatal(err)
	}
	if o.PlanCache != 7 || o.MaxWatchesPerCaller != 5 {
		t.Fatalf("plan_cache %d (want 7 from the file), max_watches_per_caller %d (want 5 from the flag)", o.PlanCache, o.MaxWatchesPerCaller)
	}
}
