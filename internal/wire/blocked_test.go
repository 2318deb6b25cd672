package wire

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// Issue 16: a blocked run says which steps wait, for which server·tool,
// and which executors are connected with what they offer.
func TestBlockedRunSaysWhy(t *testing.T) {
	m := exampleMachine(t, "graph-ask-demo")
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	run := m.Start("r1", "alice", t0).Run
	if pr := NewViews(1).Run(run, m); len(pr.GetBlocked()) != 0 || len(pr.GetExecutors()) != 0 {
		t.Fatalf("a running run lists nothing blocked: %v %v", pr.GetBlocked(), pr.GetExecutors())
	}
	tr, err := m.Apply(run, engine.StepsBlocked{Steps: []engine.StepAttempt{{Step: "cpu", Attempt: 1}, {Step: "mem", Attempt: 1}}, At: t0})
	if err != nil {
		t.Fatal(err)
	}
	run = tr.Run
	if run.State != engine.Blocked {
		t.Fatalf("state %s", run.State)
	}

	none := NewViews(1)
	pr := none.Run(run, m)
	if len(pr.GetBlocked()) != 2 || pr.GetBlocked()[0].GetStepId() != "cpu" || pr.GetBlocked()[0].GetServer() != "mcp-monitor" ||
		pr.GetBlocked()[0].GetTool() != "get_cpu_info" || pr.GetBlocked()[1].GetTool() != "get_memory_info" {
		t.Fatalf("blocked: %v", pr.GetBlocked())
	}
	if r := pr.GetBlocked()[0].GetReason(); !strings.Contains(r, "mcp-monitor·get_cpu_info") || !strings.Contains(r, "none is connected") {
		t.Errorf("reason with nobody connected: %q", r)
	}
	if r := pr.GetStateReason(); r != "waiting for an executor that offers mcp-monitor·get_cpu_info, mcp-monitor·get_memory_info" {
		t.Errorf("state reason: %q", r)
	}

	some := NewViews(1)
	some.Connected = func() []Executor {
		return []Executor{{ID: "edge-1", Labels: []string{"edge"}, Tools: []string{"notes.search", "notes.store"}, Prose: true}}
	}
	pr = some.Run(run, m)
	if r := pr.GetBlocked()[1].GetReason(); r != "no connected executor offers mcp-monitor·get_memory_info (connected to this replica: edge-1)" {
		t.Errorf("reason with edge-1 connected: %q", r)
	}
	if ex := pr.GetExecutors(); len(ex) != 1 || ex[0].GetId() != "edge-1" || len(ex[0].GetTools()) != 2 || !ex[0].GetProse() || ex[0].GetLabels()[0] != "edge" {
		t.Errorf("executors: %v", ex)
	}
}

func TestBlockedReasonLabels(t *testing.T) {
	cpu := engine.Target{Server: "mcp-monitor", Tool: "get_cpu_info", On: "gpu"}
	execs := []Executor{{ID: "edge-1", Labels: []string{"edge"}, Tools: []string{"mcp-monitor.get_cpu_info"}}}
	if r := blockedReason(cpu, execs); r != "no connected executor labelled gpu offers mcp-monitor·get_cpu_info (edge-1 offers it without the label)" {
		t.Errorf("label missing: %q", r)
	}
	execs[0].Labels = append(execs[0].Labels, "gpu")
	if r := blockedReason(cpu, execs); !strings.HasPrefix(r, "edge-1 offers mcp-monitor·get_cpu_info now") {
		t.Errorf("one fits: %q", r)
	}
}

// However many executors are connected, a blocked run's view stays small:
// it lists at most MaxListedExecutors, and a reason names a few.
func TestBlockedViewIsBounded(t *testing.T) {
	var execs []Executor
	for i := range MaxListedExecutors + 10 {
		execs = append(execs, Executor{ID: fmt.Sprintf("x%03d", i)})
	}
	if n := len(executorsProto(execs)); n != MaxListedExecutors {
		t.Errorf("listed %d executors", n)
	}
	r := blockedReason(engine.Target{Server: "notes", Tool: "store"}, execs)
	if !strings.HasSuffix(r, "x007 and 66 more)") {
		t.Errorf("reason: %q", r)
	}
}
