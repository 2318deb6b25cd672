package wire

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// What `runs show` draws comes from Views.Run: steps in plan order with
// their place, queue and branch times, and the fan's figures as the
// engine computes them (not a second computation here).
func TestRunCarriesTimings(t *testing.T) {
	m := exampleMachine(t, "graph-ask-demo")
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	run := m.Start("r1", "alice", t0).Run
	views := NewViews(1)
	apply := func(ev engine.Event) {
		t.Helper()
		tr, err := m.Apply(run, ev)
		if err != nil {
			t.Fatalf("%T: %v", ev, err)
		}
		run = tr.Run
	}
	ms := time.Millisecond
	// cpu waits 5ms for an executor and runs 300ms; mem waits 100ms and
	// runs 250ms.
	apply(engine.StepLeased{Step: "cpu", Attempt: 1, Executor: "x1", LeaseID: "r1/cpu/1", At: t0.Add(5 * ms)})
	apply(engine.StepLeased{Step: "mem", Attempt: 1, Executor: "x2", LeaseID: "r1/mem/1", At: t0.Add(100 * ms)})
	if pr := views.Run(run, m); len(pr.GetFans()) != 0 {
		t.Fatalf("a fan with branches in flight has no figures: %v", pr.GetFans())
	}
	apply(engine.StepSucceeded{Step: "cpu", Attempt: 1, Output: []byte(`{}`), At: t0.Add(305 * ms)})
	apply(engine.StepSucceeded{Step: "mem", Attempt: 1, Output: []byte(`{}`), At: t0.Add(350 * ms)})

	pr := views.Run(run, m)
	var ids []string
	for _, s := range pr.GetSteps() {
		ids = append(ids, s.GetStepId())
	}
	if !slices.Equal(ids, []string{"cpu", "mem", "join_probes", "brief"}) {
		t.Fatalf("steps in plan order: %v", ids)
	}
	cpu := pr.GetSteps()[0]
	if cpu.GetParallelGroup() != "probes" || cpu.GetPhase() != "" || cpu.GetBranchTime().AsDuration() != 300*ms ||
		!cpu.GetAttempts()[0].GetQueuedAt().AsTime().Equal(t0) {
		t.Fatalf("cpu: %v", cpu)
	}
	if b := pr.GetSteps()[3]; b.GetParallelGroup() != "" || len(b.GetAttempts()) != 1 || b.GetAttempts()[0].GetQueuedAt() == nil {
		t.Fatalf("brief runs alone, queued once the join held: %v", b)
	}
	want, _ := m.Fan(run, "", "probes")
	if len(pr.GetFans()) != 1 {
		t.Fatalf("one fan: %v", pr.GetFans())
	}
	f := pr.GetFans()[0]
	if f.GetGroup() != "probes" || f.GetPhase() != "" || f.GetBranches() != 2 || !slices.Equal(f.GetSteps(), []string{"cpu", "mem"}) ||
		f.GetWall().AsDuration() != want.Wall || f.GetBranchSum().AsDuration() != want.BranchSum || f.GetBranchMax().AsDuration() != want.BranchMax ||
		!f.GetStart().AsTime().Equal(t0) || !f.GetEnd().AsTime().Equal(t0.Add(350*ms)) {
		t.Fatalf("fan: %v, engine: %+v", f, want)
	}
	if want.Wall != 350*ms || want.BranchSum != 550*ms || want.BranchMax != 300*ms {
		t.Fatalf("engine figures: %+v", want)
	}
}

// A plan's view is built once and shared by every run of the plan that a
// Views renders; the bound holds however many plans are shown.
func TestViewsShareThePlanView(t *testing.T) {
	machine := func(skill string) *engine.Machine { return exampleMachine(t, skill) }
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	views := NewViews(1)
	m := machine("graph-ask-demo")
	a, b := views.Run(m.Start("r1", "alice", t0).Run, m), views.Run(m.Start("r2", "bob", t0).Run, m)
	if a.GetPlan() != b.GetPlan() || a.GetPlanCard() == "" || a.GetPlanCard() != b.GetPlanCard() {
		t.Fatal("two runs of one plan share its view")
	}
	if strings.Contains(a.GetPlanCard(), "Nothing runs until") {
		t.Fatalf("a run's card says nothing runs until the plan is started:\n%s", a.GetPlanCard())
	}
	if st := views.Stats(); st.Entries != 1 {
		t.Fatalf("one plan shown, one view kept: %+v", st)
	}
	other := machine("morning-briefing")
	views.Run(other.Start("r3", "alice", t0).Run, other)
	if st := views.Stats(); st.Entries != 1 || st.Evictions != 1 {
		t.Fatalf("a second plan evicts the first under a bound of one: %+v", st)
	}
}
