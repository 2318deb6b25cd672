package controlplane

import (
	"slices"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/examples"
	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// What `runs show` draws comes from runToProto: steps in plan order with
// their place, queue and branch times, and the fan's figures as the
// engine computes them (not a second computation here).
func TestRunToProtoCarriesTimings(t *testing.T) {
	src, _ := examples.Skills.ReadFile("skills/graph-ask-demo/SKILL.md")
	cat, _ := compiler.ParseCatalog(examples.Catalog)
	res := compiler.Compile(string(src), compiler.Options{Catalog: cat})
	m, err := engine.New(res.Plan, engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	run := m.Start("r1", "alice", t0).Run
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
	if pr := runToProto(run, m, ""); len(pr.GetFans()) != 0 {
		t.Fatalf("a fan with branches in flight has no figures: %v", pr.GetFans())
	}
	apply(engine.StepSucceeded{Step: "cpu", Attempt: 1, Output: []byte(`{}`), At: t0.Add(305 * ms)})
	apply(engine.StepSucceeded{Step: "mem", Attempt: 1, Output: []byte(`{}`), At: t0.Add(350 * ms)})

	pr := runToProto(run, m, "")
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

// An ask's summary says when it closed and, while it is pending, how to
// answer it; system decisions have kinds of their own.
func TestAskSummaryClosedAndCommand(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	run := &engine.Run{ID: "r1", Requester: "alice"}
	a := &engine.AskRun{ID: "ask_1", Type: "menu", Title: "ok?", State: engine.AskPending, OpenedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	s := askSummary(run, a, "")
	if s.GetClosedAt() != nil || s.GetAnswerCommand() != "approvectl approve r1/ask_1   or   approvectl reject r1/ask_1 --reason TEXT" {
		t.Fatalf("pending: %v", s)
	}
	a.State, a.Closed = engine.AskExpired, t0.Add(time.Hour)
	a.Decisions = []engine.Decision{{Kind: "expire", Actor: "system", At: a.Closed}}
	s = askSummary(run, a, "")
	if !s.GetClosedAt().AsTime().Equal(t0.Add(time.Hour)) || s.GetAnswerCommand() != "" {
		t.Fatalf("expired: %v", s)
	}
	if k := askToProto(run, a, "").GetDecisions()[0].GetKind(); k != tollgatev1.DecisionKind_DECISION_KIND_EXPIRE {
		t.Fatalf("an expiry is recorded as EXPIRE, got %v", k)
	}
}
