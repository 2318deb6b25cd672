package runtrace

import (
	"context"
	"regexp"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tollgate-dev/tollgate/examples"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

func TestTraceparent(t *testing.T) {
	w3c := regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$`)
	tp := func(run, lease string) string {
		return telemetry.Traceparent(telemetry.RunTraceID(run), telemetry.SpanID(lease), true)
	}
	a, b := tp("r1", leaseID("r1", "a", 1)), tp("r1", leaseID("r1", "b", 1))
	if !w3c.MatchString(a) || !w3c.MatchString(b) {
		t.Fatalf("not W3C trace context: %q %q", a, b)
	}
	if a[3:35] != b[3:35] || a[36:52] == b[36:52] {
		t.Fatalf("leases of one run share the trace id and differ in span id: %q %q", a, b)
	}
	if tp("r2", leaseID("r2", "a", 1))[3:35] == a[3:35] {
		t.Fatal("runs have their own traces")
	}
	sc, err := telemetry.ParseTraceparent(a)
	if err != nil || sc.TraceID() != telemetry.RunTraceID("r1") || sc.SpanID() != telemetry.SpanID("r1/a/1") || !sc.IsSampled() {
		t.Fatalf("parse %q: %v %v", a, sc, err)
	}
	if _, err := telemetry.ParseTraceparent("00-zz"); err == nil {
		t.Fatal("a malformed traceparent is an error")
	}
}

// fanRun drives graph-ask-demo's fan (cpu and mem) to its end, handing
// every transition to tr as the Runner would after each commit: cpu waits
// 5ms for an executor and runs 300ms, mem waits 100ms and runs 250ms.
func fanRun(t *testing.T, tr *Tracer) (*engine.Machine, *engine.Run) {
	t.Helper()
	src, _ := examples.Skills.ReadFile("skills/graph-ask-demo/SKILL.md")
	cat, _ := compiler.ParseCatalog(examples.Catalog)
	res := compiler.Compile(string(src), compiler.Options{Catalog: cat})
	m, err := engine.New(res.Plan, engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	start := m.Start("r1", "alice", t0)
	tr.Committed(ctx, m, nil, start.Run, start.Records)
	run := start.Run
	ms := time.Millisecond
	for _, ev := range []engine.Event{
		engine.StepLeased{Step: "cpu", Attempt: 1, Executor: "x1", LeaseID: "r1/cpu/1", At: t0.Add(5 * ms)},
		engine.StepLeased{Step: "mem", Attempt: 1, Executor: "x2", LeaseID: "r1/mem/1", At: t0.Add(100 * ms)},
		engine.StepSucceeded{Step: "cpu", Attempt: 1, Output: []byte(`{}`), At: t0.Add(305 * ms)},
		engine.StepSucceeded{Step: "mem", Attempt: 1, Output: []byte(`{}`), At: t0.Add(350 * ms)},
	} {
		next, err := m.Apply(run, ev)
		if err != nil {
			t.Fatalf("%T: %v", ev, err)
		}
		tr.Committed(ctx, m, run, next.Run, next.Records)
		run = next.Run
	}
	// Everything was queued; Run, stopped at once, draws what is queued.
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	if err := tr.Run(stopped); err != nil {
		t.Fatal(err)
	}
	return m, run
}

func attr(sp tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range sp.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// Fans are fans (I10): the fan's span shows its wall clock and its
// branches' sum and maximum, the engine's figures for the committed run,
// and each branch is a step span under it whose id is its lease's.
func TestFanSpanShowsWallAndBranchSum(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tracing, err := telemetry.New(context.Background(), telemetry.Config{Exporter: exp, Service: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tracing.Shutdown(context.Background()) })
	m, run := fanRun(t, New(tracing))
	if err := tracing.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	byName := map[string][]tracetest.SpanStub{}
	for _, sp := range exp.GetSpans() {
		if sp.SpanContext.TraceID() != telemetry.RunTraceID(run.ID) {
			t.Fatalf("%s is outside the run's trace", sp.Name)
		}
		if sp.InstrumentationScope.Name != Scope {
			t.Fatalf("%s is under scope %q, not %q", sp.Name, sp.InstrumentationScope.Name, Scope)
		}
		byName[sp.Name] = append(byName[sp.Name], sp)
	}
	if len(byName["fan probes"]) != 1 || len(byName["step cpu"]) != 1 || len(byName["step mem"]) != 1 {
		t.Fatalf("want one fan span and one span per branch, have %v", byName)
	}
	fan := byName["fan probes"][0]
	want, ok := m.Fan(run, "", "probes")
	if !ok {
		t.Fatal("the fan is done")
	}
	if want.Wall != 350*time.Millisecond || want.BranchSum != 550*time.Millisecond || want.BranchMax != 300*time.Millisecond {
		t.Fatalf("engine figures: %+v", want)
	}
	if attr(fan, "tollgate.fan.branches").AsInt64() != 2 || attr(fan, "tollgate.fan.wall_ms").AsFloat64() != 350 ||
		attr(fan, "tollgate.fan.branch_sum_ms").AsFloat64() != 550 || attr(fan, "tollgate.fan.branch_max_ms").AsFloat64() != 300 {
		t.Fatalf("fan attributes %v, record %+v", fan.Attributes, want)
	}
	if !fan.StartTime.Equal(want.Start) || !fan.EndTime.Equal(want.End) {
		t.Fatalf("the fan span covers first queued → last finished: %v–%v, record %v–%v", fan.StartTime, fan.EndTime, want.Start, want.End)
	}
	if fan.Parent.SpanID() != telemetry.SpanID(phaseSpanName(run.ID, "")) {
		t.Fatal("the fan is drawn inside its phase")
	}
	for _, step := range []string{"cpu", "mem"} {
		sp := byName["step "+step][0]
		if sp.Parent.SpanID() != fan.SpanContext.SpanID() {
			t.Fatalf("%s is not a child of the fan", sp.Name)
		}
		if sp.SpanContext.SpanID() != telemetry.SpanID(leaseID(run.ID, step, 1)) {
			t.Fatalf("%s: a step's span id is the one its lease's traceparent names", sp.Name)
		}
	}
}

// A run the sampler leaves out draws nothing.
func TestUnsampledRunDrawsNothing(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tracing, err := telemetry.New(context.Background(), telemetry.Config{Exporter: exp, Sample: 1e-12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tracing.Shutdown(context.Background()) })
	if tracing.Sampled(telemetry.RunTraceID("r1")) {
		t.Fatal("a run id fell in a 1e-12 sample: the sampling rule is broken")
	}
	fanRun(t, New(tracing))
	_ = tracing.Flush(context.Background())
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("an unsampled run exported %d spans", n)
	}
}

// Drawing is off the commit path: Committed never blocks, even with
// nobody drawing; what does not fit the queue is dropped and counted.
func TestCommittedNeverBlocksAndCountsWhatItDrops(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tracing, err := telemetry.New(context.Background(), telemetry.Config{Exporter: exp, Service: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tracing.Shutdown(context.Background()) })
	tr := New(tracing)
	src, _ := examples.Skills.ReadFile("skills/graph-ask-demo/SKILL.md")
	cat, _ := compiler.ParseCatalog(examples.Catalog)
	m, err := engine.New(compiler.Compile(string(src), compiler.Options{Catalog: cat}).Plan, engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	start := m.Start("r1", "alice", time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	for range QueueSize + 7 {
		tr.Committed(context.Background(), m, nil, start.Run, start.Records)
	}
	if got := tr.Dropped(); got != 7 {
		t.Fatalf("dropped %d, want the 7 past the queue's %d", got, QueueSize)
	}
}

// Run draws while commits go on at the same time (run with -race), and
// returns once its context ends.
func TestRunDrawsConcurrentlyWithCommits(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tracing, err := telemetry.New(context.Background(), telemetry.Config{Exporter: exp, Service: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tracing.Shutdown(context.Background()) })
	tr := New(tracing)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx) }()
	_, run := fanRun(t, tr) // fanRun's own Run drains alongside this one
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_ = tracing.Flush(context.Background())
	n := 0
	for _, sp := range exp.GetSpans() {
		if sp.SpanContext.TraceID() == telemetry.RunTraceID(run.ID) && sp.Name == "fan probes" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("want the fan drawn once, have %d", n)
	}
}
