package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/jaegertest"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
)

// A fan whose branches sleep 600, 400 and 200 ms: run in parallel its
// wall clock is about 600 ms, run a branch at a time at least 1,200.
const tracedFan = `together naps:
  a: test.sleep {"ms": 600}
  b: test.sleep {"ms": 400}
  c: test.sleep {"ms": 200}
then:
  brief: one line about {a, b, c}
ask me:
  keep it?
keep: notes.store {"text": "{brief}"}
`

// The whole road to Jaeger: a real control plane and executor process
// export OTLP to a real Jaeger, and the trace read back through Jaeger's
// query API is the run: run → phase → fan → step → the executor's span
// (joined through the lease's traceparent) → its tool call; the fan's
// attributes say it ran in parallel; the ask is a span of its wait, and
// the stretch after the park and the approved step link to it.
func TestTraceOfAFanInJaeger(t *testing.T) {
	// Not in parallel: it measures how long a fan takes, which other
	// tests sharing the two cores would stretch.
	j := jaegertest.Start(t)
	c := newClusterWith(t, []string{"--otlp-endpoint", j.OTLPEndpoint}, "edge-1")
	id := c.start(tracedFan)
	c.until(id, "parked", func(r runOut) bool { return r.State == "parked" })
	if r := c.plane.ctl(t, "", "--as", "alice", "approve", id+"/ask_1"); r.code != 0 {
		t.Fatalf("approve: %s", r.stderr)
	}
	c.until(id, "complete", func(r runOut) bool { return r.State == "complete" })

	want := []string{"run", "run.resumed", "phase main", "fan naps", "step a", "step b", "step c", "step brief", "step keep", "ask ask_1", "execute notes.store"}
	tid := telemetry.RunTraceID(id).String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var tr jaegertest.Trace
	for {
		got, err := j.TraceByID(ctx, tid)
		if err == nil && len(got.ByName("execute test.sleep")) == 3 && hasAll(got, want) {
			tr = got
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the run's trace %s never held every span (%v): %s", tid, err, got)
		case <-time.After(100 * time.Millisecond):
		}
	}
	one := func(name string) jaegertest.Span {
		t.Helper()
		s := tr.ByName(name)
		if len(s) != 1 {
			t.Fatalf("want one %q span, have %d:\n%s", name, len(s), tr)
		}
		return s[0]
	}
	byID := map[string]jaegertest.Span{}
	for _, s := range tr.Spans {
		if _, dup := byID[s.SpanID]; dup {
			t.Fatalf("two spans share id %s:\n%s", s.SpanID, tr)
		}
		byID[s.SpanID] = s
	}
	parentOf := func(s jaegertest.Span) jaegertest.Span {
		t.Helper()
		p, ok := byID[s.ParentSpanID]
		if !ok {
			t.Fatalf("%s (%s) has no parent in the trace:\n%s", s.Operation, s.Service, tr)
		}
		return p
	}
	run, phase, fan := one("run"), one("phase main"), one("fan naps")
	if run.ParentSpanID != "" || run.Service != "tollgate-controlplane" {
		t.Fatalf("the run span is the control plane's root: %+v", run)
	}
	if parentOf(phase).SpanID != run.SpanID || parentOf(fan).SpanID != phase.SpanID {
		t.Fatalf("run → phase → fan:\n%s", tr)
	}
	num := func(s jaegertest.Span, k string) float64 {
		t.Helper()
		v, err := strconv.ParseFloat(s.Tag(k), 64)
		if err != nil {
			t.Fatalf("%s: tag %s = %q", s.Operation, k, s.Tag(k))
		}
		return v
	}
	for _, exec := range tr.ByName("execute test.sleep") {
		if exec.Service != "tollgate-executor" || exec.Tag("tollgate.executor") != "edge-1" {
			t.Fatalf("executor spans are the executor's: %+v", exec)
		}
		step := parentOf(exec)
		if step.Operation != "step "+exec.Tag("tollgate.step.id") || step.Tag("tollgate.lease.id") != exec.Tag("tollgate.lease.id") {
			t.Fatalf("%s sits in step %q, want the step of its lease %q", exec.Operation, step.Operation, exec.Tag("tollgate.lease.id"))
		}
		if parentOf(step).SpanID != fan.SpanID {
			t.Fatalf("%s is not in the fan", step.Operation)
		}
		if exec.Start.Before(step.Start) || exec.Start.Add(exec.Duration).After(step.Start.Add(step.Duration).Add(time.Millisecond)) {
			t.Fatalf("the executor's span %v+%v lies outside its step's %v+%v", exec.Start, exec.Duration, step.Start, step.Duration)
		}
		// One span per lease (issue 22): the tool call is its attributes,
		// not a child span.
		if kids := tr.Children(exec); len(kids) != 0 || exec.Tag("mcp.tool") != "sleep" {
			t.Fatalf("the executor's span is the whole lease, the call in its attributes: %v %+v", kids, exec)
		}
		if call := num(exec, "tollgate.step.call_ms"); call < 150 {
			t.Fatalf("%s: the call took %vms, the naps are at least 200ms", exec.Operation, call)
		}
	}
	branches, wall, sum, most := num(fan, "tollgate.fan.branches"), num(fan, "tollgate.fan.wall_ms"), num(fan, "tollgate.fan.branch_sum_ms"), num(fan, "tollgate.fan.branch_max_ms")
	t.Logf("fan naps: wall %.1fms · sum %.1fms · max %.1fms", wall, sum, most)
	// The figures are the control plane's record of each step's start and
	// finish, which lag the tool's own sleep by how long each report took
	// to commit: a few milliseconds, more on a loaded machine (the e2e
	// tests run in parallel). The naps are 600 + 400 + 200 ms.
	const skew = 25
	if branches != 3 || most < 600-skew || sum < 1200-3*skew || wall < most {
		t.Fatalf("fan figures: branches %v wall %v sum %v max %v", branches, wall, sum, most)
	}
	// Parallel: the wall is near the slowest branch. A branch at a time
	// would make it at least the sum (1,200 ms).
	if wall > most+300 {
		t.Fatalf("the fan's wall clock %.0fms is not near its slowest branch %.0fms (sum %.0fms): it did not run in parallel", wall, most, sum)
	}
	ask, resumed, keep := one("ask ask_1"), one("run.resumed"), one("step keep")
	if !linksTo(resumed, ask) || !linksTo(keep, ask) {
		t.Fatalf("the stretch after the park and the approved step link to the ask:\n%s", tr)
	}
	if ask.Tag("tollgate.ask.actor") != "alice" || resumed.Tag("tollgate.run.state") != "complete" {
		t.Fatalf("ask %v, resumed %v", ask.Tags, resumed.Tags)
	}
}

func hasAll(tr jaegertest.Trace, names []string) bool {
	for _, n := range names {
		if len(tr.ByName(n)) == 0 {
			return false
		}
	}
	return true
}

func linksTo(s, to jaegertest.Span) bool {
	for _, l := range s.Links {
		if l == to.SpanID {
			return true
		}
	}
	return false
}
