package controlplane

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
)

// spanSet indexes exported spans of one trace.
type spanSet struct {
	t     *testing.T
	spans tracetest.SpanStubs
}

func (s spanSet) one(name string) tracetest.SpanStub {
	s.t.Helper()
	var found []tracetest.SpanStub
	for _, sp := range s.spans {
		if sp.Name == name {
			found = append(found, sp)
		}
	}
	if len(found) != 1 {
		s.t.Fatalf("want one span %q, have %d; all: %v", name, len(found), s.names())
	}
	return found[0]
}

func (s spanSet) names() []string {
	var out []string
	for _, sp := range s.spans {
		out = append(out, sp.Name)
	}
	return out
}

func attr(sp tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range sp.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func childOf(t *testing.T, child, parent tracetest.SpanStub) {
	t.Helper()
	if child.Parent.SpanID() != parent.SpanContext.SpanID() {
		t.Fatalf("%s is not a child of %s", child.Name, parent.Name)
	}
}

func linked(sp tracetest.SpanStub, to tracetest.SpanStub) bool {
	for _, l := range sp.Links {
		if l.SpanContext.SpanID() == to.SpanContext.SpanID() {
			return true
		}
	}
	return false
}

// A run with a fan, a park and an approval is drawn as one trace: run →
// phase → fan → step, the ask as a span of its wait, the stretch after
// the park as a span linked to the decision, the approved step linked to
// its ask, and the fan's figures those of the run's own record.
func TestRunIsDrawnAsATrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, err := telemetry.New(context.Background(), telemetry.Config{Exporter: exp, Service: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	e := newEnvOn(t, nil, devPolicy(t), echoTools(), func(c *Config) { c.Tracing = tr })
	r := e.start("alice", "graph-ask-demo")
	if r.GetState() != tollgatev1.RunState_RUN_STATE_PARKED {
		t.Fatalf("want parked, got %v", r.GetState())
	}
	if err := errors.Join(e.srv.FlushTraces(bg), tr.Flush(bg)); err != nil {
		t.Fatal(err)
	}
	parkedSpans := spanSet{t, exp.GetSpans()}
	root := parkedSpans.one("run")
	if root.Parent.IsValid() || attr(root, "tollgate.run.state").AsString() != "parked" {
		t.Fatalf("the run's first stretch is drawn when it parks, as a root: %+v", root)
	}
	packet, err := e.approvals("alice").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: r.GetId() + "/ask_1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.approvals("alice").Decide(bg, &tollgatev1.DecideRequest{AskId: r.GetId() + "/ask_1", ExpectedPayloadDigest: packet.GetAsk().GetPayloadDigest(),
		Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{OptionId: "1"}}}); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if got := e.get("alice", r.GetId()); got.GetState() != tollgatev1.RunState_RUN_STATE_COMPLETE {
		t.Fatalf("want complete, got %v", got.GetState())
	}
	if err := errors.Join(e.srv.FlushTraces(bg), tr.Flush(bg)); err != nil {
		t.Fatal(err)
	}
	all := spanSet{t, exp.GetSpans()}
	tid := telemetry.RunTraceID(r.GetId())
	seen := map[trace.SpanID]string{}
	for _, sp := range all.spans {
		if sp.SpanContext.TraceID() != tid {
			t.Fatalf("%s is outside the run's trace", sp.Name)
		}
		if prev, dup := seen[sp.SpanContext.SpanID()]; dup {
			t.Fatalf("%s and %s share a span id", prev, sp.Name)
		}
		seen[sp.SpanContext.SpanID()] = sp.Name
	}
	root = all.one("run")
	phase := all.one("phase main")
	fan := all.one("fan probes")
	cpu, brief, save := all.one("step cpu"), all.one("step brief"), all.one("step save")
	ask := all.one("ask ask_1")
	resumed := all.one("run.resumed")
	childOf(t, phase, root)
	childOf(t, fan, phase)
	childOf(t, cpu, fan)
	childOf(t, all.one("step mem"), fan)
	childOf(t, brief, phase)
	childOf(t, ask, phase)
	childOf(t, resumed, root)
	if cpu.SpanContext.SpanID() != telemetry.SpanID(r.GetId()+"/cpu/1") {
		t.Fatal("a step's span id is the one its lease's traceparent names")
	}
	if !linked(save, ask) || !linked(resumed, ask) {
		t.Fatal("the approved step and the stretch after the park link to the ask")
	}
	if attr(resumed, "tollgate.run.state").AsString() != "complete" || !resumed.StartTime.Before(resumed.EndTime) && !resumed.StartTime.Equal(resumed.EndTime) {
		t.Fatalf("the last stretch carries the outcome: %+v", resumed.Attributes)
	}
	if ask.StartTime.After(ask.EndTime) || attr(ask, "tollgate.ask.actor").AsString() != "alice" || attr(ask, "tollgate.ask.wait_ms").AsFloat64() <= 0 {
		t.Fatalf("the ask is a span of its wait, decided by alice: %+v", ask.Attributes)
	}
	// The fan's attributes are the run record's figures.
	run, m, err := e.srv.Runner.Get(bg, r.GetId())
	if err != nil {
		t.Fatal(err)
	}
	f, ok := m.Fan(run, "", "probes")
	if !ok {
		t.Fatal("the fan is done")
	}
	if attr(fan, "tollgate.fan.branches").AsInt64() != 2 || attr(fan, "tollgate.fan.wall_ms").AsFloat64() != ms(f.Wall) ||
		attr(fan, "tollgate.fan.branch_sum_ms").AsFloat64() != ms(f.BranchSum) || attr(fan, "tollgate.fan.branch_max_ms").AsFloat64() != ms(f.BranchMax) {
		t.Fatalf("fan attributes %v, record %+v", fan.Attributes, f)
	}
	if !fan.StartTime.Equal(f.Start) || !fan.EndTime.Equal(f.End) {
		t.Fatalf("the fan span covers first queued → last finished: %v–%v, record %v–%v", fan.StartTime, fan.EndTime, f.Start, f.End)
	}
}

// ms is a duration as the trace's _ms attributes carry it.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// A run that is not sampled draws nothing and its leases say so.
func TestUnsampledRunsDrawNothing(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, err := telemetry.New(context.Background(), telemetry.Config{Exporter: exp, Sample: 1e-12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	e := newEnvOn(t, nil, devPolicy(t), echoTools(), func(c *Config) { c.Tracing = tr })
	r := e.start("alice", "graph-ask-demo")
	if tr.Sampled(telemetry.RunTraceID(r.GetId())) {
		t.Fatal("a run id fell in a 1e-12 sample: the sampling rule is broken")
	}
	_ = errors.Join(e.srv.FlushTraces(bg), tr.Flush(bg))
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("an unsampled run exported %d spans", n)
	}
}
