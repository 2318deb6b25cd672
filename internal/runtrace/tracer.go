package runtrace

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// Tracer draws runs as traces (DESIGN.md §9): run → phase → fan →
// step, the executor's span inside its step (joined through the lease's
// traceparent), and each ask as a span of its waiting time.
//
// Nothing is held open: each span is built when its part ends, from the
// times the run records durably, with ids derived from the run (see
// telemetry.RunTraceID, SpanID). A parent may therefore reach the
// collector after its children, and a replica that never saw a part
// begin can still draw it. A run that parks does not keep a span open
// across the park: the "run" span covers the run until it first parks
// (or ends), each later stretch — from the decision that released it to
// the next park or the end — is a "run.resumed" span linked to the asks
// that were decided, and the work an approval released links to the
// ask's span.
//
// Spans are drawn off the commit path (issue 22): Committed only checks
// that the run is sampled and queues the committed transition; Run, on a
// goroutine the Tracer's owner starts, draws them. A committed run is
// never changed afterwards (the engine copies on write), so the queued
// runs are read safely. A full queue drops the observation, never
// blocks a commit (Dropped counts them): tracing is an observation.
type Tracer struct {
	tracing *telemetry.Tracing
	tracer  trace.Tracer
	queue   chan observed
	dropped atomic.Uint64
}

// observed is one committed transition waiting to be drawn, or (done
// set) a Flush waiting for what was queued before it.
type observed struct {
	m             *engine.Machine
	before, after *engine.Run
	records       []engine.Record
	done          chan struct{}
}

// QueueSize is how many committed transitions may wait to be drawn: at
// the ~7,000 commits a second a replica makes under load, about half a
// second of them, far longer than a transition takes to draw.
const QueueSize = 4096

var _ runner.Observer = (*Tracer)(nil)

// Scope is the instrumentation scope the spans are reported under. It
// stays the path of the package that first drew them, so queries and
// dashboards that select a scope keep working after the move.
const Scope = "github.com/tollgate-dev/tollgate/internal/controlplane"

// New returns a Tracer that exports through t; runs t does not sample
// are not drawn.
// Nothing is drawn until Run is running.
func New(t *telemetry.Tracing) *Tracer {
	return &Tracer{tracing: t, tracer: t.Tracer(Scope), queue: make(chan observed, QueueSize)}
}

// Run draws the queued transitions until ctx ends, then draws those
// still queued and returns nil. Transitions committed after it returned
// are not drawn.
func (t *Tracer) Run(ctx context.Context) error {
	bg := context.WithoutCancel(ctx)
	for {
		select {
		case o := <-t.queue:
			t.draw(bg, o)
		case <-ctx.Done():
			for {
				select {
				case o := <-t.queue:
					t.draw(bg, o)
				default:
					return nil
				}
			}
		}
	}
}

// Flush returns once every transition queued before it was drawn, or
// with ctx's error. It waits for room in the queue, so it is for tests
// and shutdown, never for a commit; Run must be running.
func (t *Tracer) Flush(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case t.queue <- observed{done: done}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Dropped is how many sampled transitions were not drawn because the
// queue was full.
func (t *Tracer) Dropped() uint64 { return t.dropped.Load() }

// Span names.
const (
	spanRun     = "run"
	spanResumed = "run.resumed"
	spanPhase   = "phase"
	spanFan     = "fan"
	spanStep    = "step"
	spanAsk     = "ask"
)

// Span id names, unique within a run's trace.
func runSpanName(runID string) string          { return runID + "/run" }
func phaseSpanName(runID, phase string) string { return runID + "/phase/" + phase }
func fanSpanName(runID, phase, group string) string {
	return runID + "/fan/" + phase + "/" + group
}
func askSpanName(runID, ask string, round int) string {
	return runID + "/ask/" + ask + "/" + strconv.Itoa(round)
}
func leaseID(runID, step string, attempt int) string {
	return runID + "/" + step + "/" + strconv.Itoa(attempt)
}

// Committed implements runner.Observer: it queues the transition (see
// Tracer); Run draws the parts of the run this commit finished, from the
// times the committed run records.
func (t *Tracer) Committed(_ context.Context, m *engine.Machine, before, after *engine.Run, records []engine.Record) {
	if !t.tracing.Sampled(telemetry.RunTraceID(after.ID)) {
		return
	}
	select {
	case t.queue <- observed{m: m, before: before, after: after, records: records}:
	default:
		t.dropped.Add(1)
	}
}

// draw draws the parts of the run one committed transition finished.
func (t *Tracer) draw(ctx context.Context, o observed) {
	if o.done != nil {
		close(o.done)
		return
	}
	m, before, after, records := o.m, o.before, o.after, o.records
	var phases []string
	for _, rec := range records {
		switch rec.Kind {
		case engine.JournalStepSucceeded, engine.JournalStepFailed, engine.JournalStepLeaseLost, engine.JournalStepCancelled:
		default:
			continue
		}
		id, _ := rec.Payload["step"].(string)
		n := attemptOf(rec.Payload["attempt"])
		s := after.Steps[id]
		if s == nil {
			continue
		}
		if n == 0 {
			n = s.Attempt
		}
		if n >= 1 && n <= len(s.Attempts) {
			t.step(ctx, m, after, id, s, s.Attempts[n-1], rec)
		}
		if p, ok := m.Place(id); ok && !slices.Contains(phases, p.Phase) {
			phases = append(phases, p.Phase)
		}
	}
	for _, f := range m.FansDone(before, after, records) {
		t.fan(ctx, after, f)
	}
	for _, ph := range phases {
		if phaseDone(m, after, ph) && (before == nil || !phaseDone(m, before, ph)) {
			t.phase(ctx, m, after, ph)
		}
	}
	for id, a := range after.Asks {
		if a.State.Open() {
			continue
		}
		if before != nil {
			if b := before.Asks[id]; b != nil && !b.State.Open() && b.Round == a.Round {
				continue
			}
		}
		t.ask(ctx, m, after, id, a)
	}
	parked := after.State == engine.Parked && (before == nil || before.State != engine.Parked)
	if parked || (after.State.Terminal() && (before == nil || !before.State.Terminal())) {
		t.stretch(ctx, after)
	}
}

// parent returns ctx carrying a remote parent span in the run's trace.
func parent(ctx context.Context, tid trace.TraceID, name string) context.Context {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: telemetry.SpanID(name), TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

func link(tid trace.TraceID, name string, kind string) trace.Link {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: telemetry.SpanID(name), TraceFlags: trace.FlagsSampled})
	return trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String("tollgate.link", kind)}}
}

// emit builds one finished span with a chosen id under parentName ("":
// a root of the run's trace).
func (t *Tracer) emit(ctx context.Context, run *engine.Run, name, parentName, spanName string, start, end time.Time, attrs []attribute.KeyValue, links []trace.Link, fail string) {
	tid := telemetry.RunTraceID(run.ID)
	if parentName != "" {
		ctx = parent(ctx, tid, parentName)
	}
	ctx = telemetry.WithIDs(ctx, tid, telemetry.SpanID(spanName))
	if end.Before(start) {
		end = start
	}
	attrs = append(attrs, attribute.String("tollgate.run.id", run.ID))
	_, sp := t.tracer.Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...), trace.WithLinks(links...), trace.WithSpanKind(trace.SpanKindInternal))
	if fail != "" {
		sp.SetStatus(codes.Error, fail)
	}
	sp.End(trace.WithTimestamp(end))
}

func (t *Tracer) step(ctx context.Context, m *engine.Machine, run *engine.Run, id string, s *engine.StepRun, a engine.Attempt, rec engine.Record) {
	p, _ := m.Place(id)
	parentName := phaseSpanName(run.ID, p.Phase)
	if p.Group != "" {
		parentName = fanSpanName(run.ID, p.Phase, p.Group)
	}
	end := a.FinishedAt
	if end.IsZero() {
		end = rec.At
	}
	outcome := strings.TrimPrefix(string(rec.Kind), "step.")
	attrs := []attribute.KeyValue{
		attribute.String("tollgate.step.id", id),
		attribute.Int("tollgate.step.attempt", a.N),
		attribute.String("tollgate.step.outcome", outcome),
		attribute.String("tollgate.lease.id", leaseID(run.ID, id, a.N)),
	}
	if st, ok := m.Step(id); ok {
		attrs = append(attrs, attribute.String("tollgate.step.kind", string(st.Kind)), attribute.Bool("tollgate.step.side_effect", st.SideEffect))
		if st.Tool != "" {
			attrs = append(attrs, attribute.String("tollgate.step.tool", st.Server+"."+st.Tool))
		}
	}
	if a.Executor != "" {
		attrs = append(attrs, attribute.String("tollgate.executor", a.Executor))
	}
	if !a.LeasedAt.IsZero() {
		attrs = append(attrs, attribute.Float64("tollgate.step.dispatch_ms", ms(a.LeasedAt.Sub(a.QueuedAt))))
		if !a.FinishedAt.IsZero() {
			attrs = append(attrs, attribute.Float64("tollgate.step.run_ms", ms(a.FinishedAt.Sub(a.LeasedAt))))
		}
	}
	var links []trace.Link
	if s.Grant != "" && s.Grant != engine.GrantStart {
		if ask := run.Asks[s.Grant]; ask != nil {
			links = append(links, link(telemetry.RunTraceID(run.ID), askSpanName(run.ID, s.Grant, ask.Round), "approved_by"))
		}
	}
	fail := ""
	if rec.Kind != engine.JournalStepSucceeded && rec.Kind != engine.JournalStepCancelled {
		fail = a.Error
		if fail == "" {
			fail = outcome
		}
	}
	t.emit(ctx, run, spanStep+" "+id, parentName, leaseID(run.ID, id, a.N), a.QueuedAt, end, attrs, links, fail)
}

func (t *Tracer) fan(ctx context.Context, run *engine.Run, f engine.FanFigures) {
	attrs := []attribute.KeyValue{
		attribute.String("tollgate.fan.group", f.Group),
		attribute.Int("tollgate.fan.branches", f.Branches),
		attribute.Float64("tollgate.fan.wall_ms", ms(f.Wall)),
		attribute.Float64("tollgate.fan.branch_sum_ms", ms(f.BranchSum)),
		attribute.Float64("tollgate.fan.branch_max_ms", ms(f.BranchMax)),
		attribute.Float64("tollgate.fan.parallelism", f.Parallelism()),
	}
	t.emit(ctx, run, spanFan+" "+f.Group, phaseSpanName(run.ID, f.Phase), fanSpanName(run.ID, f.Phase, f.Group), f.Start, f.End, attrs, nil, "")
}

func phaseDone(m *engine.Machine, run *engine.Run, phase string) bool {
	ids := m.PhaseSteps(phase)
	for _, id := range ids {
		if s := run.Steps[id]; s == nil || !s.Status.Done() {
			return false
		}
	}
	return len(ids) > 0
}

func (t *Tracer) phase(ctx context.Context, m *engine.Machine, run *engine.Run, phase string) {
	var start, end time.Time
	failed := 0
	for _, id := range m.PhaseSteps(phase) {
		s := run.Steps[id]
		for _, a := range s.Attempts {
			if !a.QueuedAt.IsZero() && (start.IsZero() || a.QueuedAt.Before(start)) {
				start = a.QueuedAt
			}
			if a.FinishedAt.After(end) {
				end = a.FinishedAt
			}
		}
		if s.Status == engine.StatusFailed {
			failed++
		}
	}
	if start.IsZero() {
		return // nothing of it ran
	}
	label := phase
	if label == "" {
		label = "main"
	}
	attrs := []attribute.KeyValue{attribute.String("tollgate.phase", label), attribute.Int("tollgate.phase.steps", len(m.PhaseSteps(phase))), attribute.Int("tollgate.phase.failed", failed)}
	var links []trace.Link
	if i := strings.LastIndexByte(phase, '/'); i >= 0 { // "ASK/OPTION"
		owner := phase[:i]
		if ask := run.Asks[owner]; ask != nil {
			links = append(links, link(telemetry.RunTraceID(run.ID), askSpanName(run.ID, owner, ask.Round), "chosen_by"))
		}
	}
	t.emit(ctx, run, spanPhase+" "+label, runSpanName(run.ID), phaseSpanName(run.ID, phase), start, end, attrs, links, "")
}

func (t *Tracer) ask(ctx context.Context, m *engine.Machine, run *engine.Run, id string, a *engine.AskRun) {
	end := a.Closed
	if end.IsZero() && len(a.Decisions) > 0 {
		end = a.Decisions[len(a.Decisions)-1].At
	}
	if end.IsZero() {
		end = run.UpdatedAt
	}
	parentName := runSpanName(run.ID)
	if ph, ok := m.AskPhase(id); ok {
		parentName = phaseSpanName(run.ID, ph)
	}
	attrs := []attribute.KeyValue{
		attribute.String("tollgate.ask.id", id),
		attribute.String("tollgate.ask.type", string(a.Type)),
		attribute.String("tollgate.ask.state", string(a.State)),
		attribute.String("tollgate.ask.audience", a.Audience),
		attribute.Float64("tollgate.ask.wait_ms", ms(end.Sub(a.OpenedAt))),
		attribute.Int("tollgate.ask.round", a.Round),
	}
	if n := len(a.Decisions); n > 0 {
		d := a.Decisions[n-1]
		attrs = append(attrs, attribute.String("tollgate.ask.decision", string(d.Kind)), attribute.String("tollgate.ask.actor", d.Actor))
	}
	t.emit(ctx, run, spanAsk+" "+id, parentName, askSpanName(run.ID, id, a.Round), a.OpenedAt, end, attrs, nil, "")
}

// stretch draws the stretch of the run that just stopped moving (parked
// or ended): the first is the "run" span, from creation; each later one a
// "run.resumed" span, from when it left its last park, linked to the
// first and to the asks decided by then.
func (t *Tracer) stretch(ctx context.Context, run *engine.Run) {
	end := run.UpdatedAt
	first := run.Parks == 0 || (run.Parks == 1 && run.State == engine.Parked)
	attrs := []attribute.KeyValue{attribute.String("tollgate.run.state", string(run.State)), attribute.String("tollgate.run.requester", run.Requester), attribute.Int("tollgate.run.parks", run.Parks)}
	if run.Reason != "" {
		attrs = append(attrs, attribute.String("tollgate.run.reason", run.Reason))
	}
	fail := ""
	if run.State == engine.Failed {
		fail = run.Reason
	}
	if first {
		t.emit(ctx, run, spanRun, "", runSpanName(run.ID), run.CreatedAt, end, attrs, nil, fail)
		return
	}
	start := run.ResumedAt
	if start.IsZero() || start.Before(run.ParkedAt) {
		start = run.ParkedAt // it ended while parked (a cancel)
	}
	tid := telemetry.RunTraceID(run.ID)
	links := []trace.Link{link(tid, runSpanName(run.ID), "run")}
	for id, a := range run.Asks {
		if !a.State.Open() && len(a.Decisions) > 0 && !a.Decisions[len(a.Decisions)-1].At.After(start) {
			links = append(links, link(tid, askSpanName(run.ID, id, a.Round), "decided"))
		}
	}
	n := run.Parks // the stretch after park n
	if run.State == engine.Parked {
		n--
	}
	t.emit(ctx, run, spanResumed, runSpanName(run.ID), runSpanName(run.ID)+"/resumed/"+strconv.Itoa(n), start, end, attrs, links, fail)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func attemptOf(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case int64:
		return int(n)
	case float64:
		return int(n)
	}
	return 0
}
