package jaegertest

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRoundTrip sends a parent span with two children through the OTel SDK
// and reads the tree, the ids and the attributes back from Jaeger.
func TestRoundTrip(t *testing.T) {
	j := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	service := "jaegertest-" + strings.ReplaceAll(t.Name(), "/", "-")
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(j.OTLPEndpoint), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithIDGenerator(&lowIDs{}),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))),
	)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) }) // before Jaeger stops
	tracer := tp.Tracer("jaegertest")

	pctx, parent := tracer.Start(ctx, "run", trace.WithAttributes(
		attribute.String("tollgate.run_id", "run-7"),
		attribute.Int("tollgate.steps", 2),
	))
	_, a := tracer.Start(pctx, "step", trace.WithAttributes(
		attribute.String("tollgate.step", "build"),
		attribute.Int64("tollgate.attempt", 1),
		attribute.Bool("tollgate.gated", false),
	))
	time.Sleep(time.Millisecond) // b starts strictly after a
	a.End()
	_, b := tracer.Start(pctx, "step", trace.WithAttributes(
		attribute.String("tollgate.step", "deploy"),
		attribute.Int64("tollgate.attempt", 3),
		attribute.Bool("tollgate.gated", true),
		attribute.Float64("tollgate.ratio", 0.5),
	))
	b.End()
	parent.End()
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}

	tr := j.WaitTrace(t, ctx, service, func(tr Trace) bool { return len(tr.Spans) == 3 })

	if want := parent.SpanContext().TraceID().String(); tr.ID != want || !strings.HasPrefix(want, "0000000000000000") {
		t.Errorf("trace id %s, want %s", tr.ID, want)
	}
	runs := tr.ByName("run")
	if len(runs) != 1 {
		t.Fatalf("%d spans named run, want 1:\n%s", len(runs), tr)
	}
	root := runs[0]
	if roots := tr.Roots(); len(roots) != 1 || roots[0].SpanID != root.SpanID {
		t.Errorf("roots %v, want only the run span:\n%s", roots, tr)
	}
	checkSpan(t, root, parent, "", service)
	if got := root.Tag("tollgate.run_id"); got != "run-7" {
		t.Errorf("run_id %q, want run-7", got)
	}
	if got := root.Tag("tollgate.steps"); got != "2" {
		t.Errorf("steps %q, want 2", got)
	}

	kids := tr.Children(root)
	if len(kids) != 2 {
		t.Fatalf("%d children of run, want 2:\n%s", len(kids), tr)
	}
	if steps := tr.ByName("step"); len(steps) != 2 || steps[0].SpanID != kids[0].SpanID || steps[1].SpanID != kids[1].SpanID {
		t.Errorf("ByName(step) %v, want the two children in start order", steps)
	}
	parentID := parent.SpanContext().SpanID().String()
	checkSpan(t, kids[0], a, parentID, service)
	checkSpan(t, kids[1], b, parentID, service)
	for _, c := range []struct {
		s                    Span
		step, attempt, gated string
	}{{kids[0], "build", "1", "false"}, {kids[1], "deploy", "3", "true"}} {
		if got := c.s.Tag("tollgate.step"); got != c.step {
			t.Errorf("step %q, want %q", got, c.step)
		}
		if got := c.s.Tag("tollgate.attempt"); got != c.attempt {
			t.Errorf("%s: attempt %q, want %q", c.step, got, c.attempt)
		}
		if got := c.s.Tag("tollgate.gated"); got != c.gated {
			t.Errorf("%s: gated %q, want %q", c.step, got, c.gated)
		}
		if len(tr.Children(c.s)) != 0 {
			t.Errorf("%s has children:\n%s", c.step, tr)
		}
	}
	if got := kids[1].Tag("tollgate.ratio"); got != "0.5" {
		t.Errorf("ratio %q, want 0.5", got)
	}
	if got := kids[0].Tag("no.such.tag"); got != "" {
		t.Errorf("a missing tag reads %q, want empty", got)
	}
	if !kids[0].Start.Before(kids[1].Start) || kids[0].Start.Before(root.Start) {
		t.Errorf("start times out of order:\n%s", tr)
	}

	byID, err := j.TraceByID(ctx, tr.ID)
	if err != nil {
		t.Fatal(err)
	}
	if byID.String() != tr.String() {
		t.Errorf("TraceByID:\n%s\nwant:\n%s", byID, tr)
	}
	if trs, err := j.Traces(ctx, "jaegertest-no-such-service"); err != nil || len(trs) != 0 {
		t.Errorf("an unknown service: %d traces, %v; want none", len(trs), err)
	}
}

// lowIDs makes trace ids whose high 64 bits are zero, which Jaeger's v1 API
// prints as 16 digits, and span ids with leading zeros: Trace and Span must
// still carry them as the SDK's String methods do.
type lowIDs struct {
	mu sync.Mutex
	n  uint64
}

func (g *lowIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	binary.BigEndian.PutUint64(tid[8:], uint64(time.Now().UnixNano()))
	return tid, g.NewSpanID(ctx, tid)
}

func (g *lowIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
	var sid trace.SpanID
	binary.BigEndian.PutUint64(sid[:], 0xc0_0000_0000+g.n)
	return sid
}

// checkSpan compares what Jaeger stored with the SDK's span.
func checkSpan(t *testing.T, got Span, sent trace.Span, parentID, service string) {
	t.Helper()
	ro := sent.(sdktrace.ReadOnlySpan)
	sc := sent.SpanContext()
	if got.TraceID != sc.TraceID().String() || got.SpanID != sc.SpanID().String() || got.ParentSpanID != parentID {
		t.Errorf("%s: ids %s/%s parent %q, want %s/%s parent %q", got.Operation,
			got.TraceID, got.SpanID, got.ParentSpanID, sc.TraceID(), sc.SpanID(), parentID)
	}
	if got.Service != service {
		t.Errorf("%s: service %q, want %q", got.Operation, got.Service, service)
	}
	if !got.Start.Equal(ro.StartTime().Truncate(time.Microsecond)) {
		t.Errorf("%s: start %v, want %v", got.Operation, got.Start, ro.StartTime())
	}
	if want := ro.EndTime().Sub(ro.StartTime()); got.Duration < want-2*time.Microsecond || got.Duration > want+2*time.Microsecond {
		t.Errorf("%s: duration %v, want %v", got.Operation, got.Duration, want)
	}
}

// TestStopKillsJaeger: when the test that started Jaeger ends, the process
// is gone; two instances run side by side on ports of their own.
func TestStopKillsJaeger(t *testing.T) {
	var pids []int
	t.Run("two", func(t *testing.T) {
		j1, j2 := Start(t), Start(t)
		if j1.OTLPEndpoint == j2.OTLPEndpoint || j1.QueryURL == j2.QueryURL {
			t.Fatalf("shared ports: %+v %+v", j1, j2)
		}
		pids = []int{j1.Pid(), j2.Pid()}
		for _, j := range []*Jaeger{j1, j2} {
			if _, err := j.Traces(context.Background(), "nobody"); err != nil {
				t.Fatal(err)
			}
		}
	})
	for _, pid := range pids {
		if ok, err := gone(pid); !ok {
			t.Errorf("jaeger %d is still there after its test ended (kill 0: %v)", pid, err)
		}
	}
}

// TestConfigValidates checks Start's config with `jaeger validate`, and
// that validate does reject a broken one.
func TestConfigValidates(t *testing.T) {
	bin := Binary(t)
	dir := t.TempDir()
	validate := func(cfg string) (string, error) {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "validate", "--config=file:"+p).CombinedOutput()
		return string(out), err
	}
	good := Config(14317, 16686, 16685)
	if out, err := validate(good); err != nil {
		t.Fatalf("jaeger validate rejects the config: %v\n%s\n%s", err, out, good)
	}
	// validate checks the structure, not the names of storage backends
	// (trace_storage: nostore passes it; Start would fail on it).
	for _, bad := range []string{
		strings.Replace(good, "level: none", "level: nonsense", 1),
		strings.Replace(good, "exporters: [jaeger_storage_exporter]", "exporters: [nosuch]", 1),
	} {
		if out, err := validate(bad); err == nil {
			t.Errorf("jaeger validate accepts a broken config:\n%s\n%s", out, bad)
		}
	}
}
