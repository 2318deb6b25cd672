package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/lru"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func graphAskDemo(t *testing.T) *engine.Machine {
	t.Helper()
	cb, err := os.ReadFile("../../examples/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := compiler.ParseCatalog(cb)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("../../examples/skills/graph-ask-demo/SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	r := compiler.Compile(string(src), compiler.Options{Catalog: cat, Name: "graph-ask-demo"})
	if r.Plan == nil {
		t.Fatalf("does not compile: %v", r.Diagnostics)
	}
	m, err := engine.New(r.Plan, engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// driver moves one run through the real engine as the Runner does: the
// events of one commit are applied in order, and the observer hears of
// the commit once, with the run before the first and after the last.
type driver struct {
	t   *testing.T
	m   *engine.Machine
	obs *Metrics
	run *engine.Run
	now time.Time
}

func start(t *testing.T, m *engine.Machine, obs *Metrics, id string) *driver {
	d := &driver{t: t, m: m, obs: obs, now: t0}
	tr := m.Start(id, "alice", t0)
	d.run = tr.Run
	obs.Committed(context.Background(), m, nil, tr.Run, tr.Records)
	return d
}

// at is t0 plus ms milliseconds; the driver's clock moves there.
func (d *driver) at(ms float64) time.Time {
	d.now = t0.Add(time.Duration(ms * float64(time.Millisecond)))
	return d.now
}

func (d *driver) commit(evs ...engine.Event) {
	d.t.Helper()
	before, cur := d.run, d.run
	var records []engine.Record
	for _, ev := range evs {
		tr, err := d.m.Apply(cur, ev)
		if err != nil {
			d.t.Fatalf("%T refused: %v", ev, err)
		}
		cur = tr.Run
		records = append(records, tr.Records...)
	}
	d.run = cur
	d.obs.Committed(context.Background(), d.m, before, cur, records)
}

func (d *driver) attempt(step string) int { return d.run.Steps[step].Attempt }

// succeed leases, starts and finishes a step, one commit each, a
// millisecond apart from the driver's clock.
func (d *driver) succeed(step string) {
	d.t.Helper()
	n := d.attempt(step)
	ms := float64(d.now.Sub(t0)) / float64(time.Millisecond)
	d.commit(engine.StepLeased{Step: step, Attempt: n, Executor: "x1", At: d.at(ms + 1)})
	d.commit(engine.StepStarted{Step: step, Attempt: n, At: d.at(ms + 2)})
	d.commit(engine.StepSucceeded{Step: step, Attempt: n, Output: json.RawMessage(`{}`), At: d.at(ms + 3)})
}

// Three runs of graph-ask-demo through the real engine, with timings
// chosen so that a wrong formula lands in another bucket; the values are
// read back through the exporter's registry.
func TestCommittedCountsWhatTheEngineRecorded(t *testing.T) {
	mach := graphAskDemo(t)
	obs, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Shutdown(context.Background())

	// A: cpu leased 5ms after queueing and runs 300ms; mem waits 150ms
	// and runs 200ms, then fails: a fan of 500ms branch time in a 350ms
	// wall (parallelism 1.43). brief is leased, started and done in one
	// commit. The approved save loses its executor after it started: in
	// doubt; alice says retry, and it runs again. The run ends partial.
	a := start(t, mach, obs, "a")
	a.commit(engine.StepLeased{Step: "cpu", Attempt: 1, Executor: "x1", At: a.at(5)})
	a.commit(engine.StepLeased{Step: "mem", Attempt: 1, Executor: "x2", At: a.at(150)})
	a.commit(engine.StepSucceeded{Step: "cpu", Attempt: 1, Output: json.RawMessage(`{}`), At: a.at(305)})
	a.commit(engine.StepFailed{Step: "mem", Attempt: 1, Error: "no /proc", At: a.at(350)})
	a.commit(engine.StepLeased{Step: "brief", Attempt: 1, Executor: "x1", At: a.at(351)},
		engine.StepStarted{Step: "brief", Attempt: 1, At: a.at(351)},
		engine.StepSucceeded{Step: "brief", Attempt: 1, Output: json.RawMessage(`"calm"`), At: a.at(400)})
	if a.run.State != engine.Parked {
		t.Fatalf("run a is %s, want parked", a.run.State)
	}
	a.commit(engine.Decide{Ask: "ask_1", Actor: "alice", Option: "1", At: a.at(1000)})
	a.commit(engine.StepLeased{Step: "save", Attempt: 1, Executor: "x1", At: a.at(1001)})
	a.commit(engine.StepStarted{Step: "save", Attempt: 1, At: a.at(1002)})
	a.commit(engine.LeaseLost{Step: "save", Attempt: 1, At: a.at(3000)})
	if a.run.Steps["save"].Status != engine.StatusInDoubt {
		t.Fatalf("save is %s, want in doubt", a.run.Steps["save"].Status)
	}
	a.commit(engine.Decide{Ask: "doubt_save_1", Actor: "alice", Option: engine.DoubtRetry, At: a.at(4000)})
	a.succeed("save")
	if a.run.State != engine.Partial {
		t.Fatalf("run a is %s (%s), want partial", a.run.State, a.run.Reason)
	}

	// B: every step a millisecond apart (fan: 4ms of branches in a 6ms
	// wall, parallelism 0.67), then alice says no.
	b := start(t, mach, obs, "b")
	b.succeed("cpu")
	b.succeed("mem")
	b.succeed("brief")
	b.commit(engine.Decide{Ask: "ask_1", Actor: "alice", Reject: true, Reason: "not today", At: b.at(10)})
	if b.run.State != engine.Rejected {
		t.Fatalf("run b is %s, want rejected", b.run.State)
	}

	// C: as B, but brief's first executor goes away before it reports
	// (leased again), and nobody answers: the ask expires.
	c := start(t, mach, obs, "c")
	c.succeed("cpu")
	c.succeed("mem")
	c.commit(engine.StepLeased{Step: "brief", Attempt: 1, Executor: "x1", At: c.at(7)})
	c.commit(engine.LeaseLost{Step: "brief", Attempt: 1, At: c.at(2007)})
	c.succeed("brief")
	c.commit(engine.Tick{At: c.at(float64(100 * time.Hour / time.Millisecond))})
	if c.run.State != engine.Expired {
		t.Fatalf("run c is %s, want expired", c.run.State)
	}

	g := gather(t, obs)
	for _, w := range []struct {
		name        string
		label, want string
		n           float64
	}{
		{"tollgate_runs_started_total", "", "", 3},
		{"tollgate_runs_ended_total", "outcome", "partial", 1},
		{"tollgate_runs_ended_total", "outcome", "rejected", 1},
		{"tollgate_runs_ended_total", "outcome", "expired", 1},
		{"tollgate_runs_ended_total", "outcome", "complete", 0},
		{"tollgate_runs_ended_total", "outcome", "cancelled", 0},
		{"tollgate_asks_opened_total", "", "", 4}, // three ask_1 and one in-doubt ask
		{"tollgate_ask_expiries_total", "", "", 1},
		{"tollgate_answers_total", "kind", "approve", 1},
		{"tollgate_answers_total", "kind", "reject", 1},
		{"tollgate_answers_total", "kind", "in_doubt", 1},
		{"tollgate_answers_total", "kind", "expire", 1},
		{"tollgate_answers_total", "kind", "vote", 0},
		{"tollgate_steps_in_doubt_total", "", "", 1},
		{"tollgate_leases_lost_total", "", "", 2},
		{"tollgate_step_redispatches_total", "reason", "in_doubt_retry", 1},
		{"tollgate_step_redispatches_total", "reason", "lease_lost", 1},
		{"tollgate_step_redispatches_total", "reason", "retry", 0},
	} {
		if got := g.counter(w.name, w.label, w.want); got != w.n {
			t.Errorf("%s{%s=%q} = %v, want %v", w.name, w.label, w.want, got, w.n)
		}
	}

	// Dispatch latency: 12 leases (a: cpu, mem, brief, save twice; b:
	// three; c: cpu, mem, brief twice). Only a's mem waited more than
	// 100ms; c's second brief waited 1ms after its loss, not 2s.
	h := g.histogram("tollgate_dispatch_latency_seconds", "", "")
	if h.GetSampleCount() != 12 || bucket(h, 0.1) != 11 || bucket(h, 0.25) != 12 {
		t.Errorf("dispatch latency: count %d, ≤0.1s %d, ≤0.25s %d; want 12, 11, 12", h.GetSampleCount(), bucket(h, 0.1), bucket(h, 0.25))
	}
	if math.Abs(h.GetSampleSum()-0.171) > 1e-9 {
		// a: 5+150+1+1+1 ms; b: 1+4+1 (mem queued with cpu, leased
		// after it); c: 1+4+1+1.
		t.Errorf("dispatch latency sum %v, want 0.171", h.GetSampleSum())
	}
	// Step duration by outcome.
	if h := g.histogram("tollgate_step_duration_seconds", "outcome", "failed"); h.GetSampleCount() != 1 || math.Abs(h.GetSampleSum()-0.2) > 1e-9 {
		t.Errorf("failed steps: %d, %vs; want mem's 0.2s", h.GetSampleCount(), h.GetSampleSum())
	}
	if h := g.histogram("tollgate_step_duration_seconds", "outcome", "lease_lost"); h.GetSampleCount() != 2 || math.Abs(h.GetSampleSum()-3.999) > 1e-9 {
		t.Errorf("lost leases: %d, %vs; want save's 1.999s and brief's 2s", h.GetSampleCount(), h.GetSampleSum())
	}
	// succeeded: a's cpu, brief (batched) and save; three each in b and c.
	if h := g.histogram("tollgate_step_duration_seconds", "outcome", "succeeded"); h.GetSampleCount() != 9 {
		t.Errorf("succeeded steps: %d, want 9", h.GetSampleCount())
	}
	// Fan parallelism: a's 500/350 in (1.1, 1.5]; b's and c's 4/6 in (0.5, 0.9].
	f := g.histogram("tollgate_fan_parallelism", "", "")
	if f.GetSampleCount() != 3 || bucket(f, 0.5) != 0 || bucket(f, 0.9) != 2 || bucket(f, 1.1) != 2 || bucket(f, 1.5) != 3 {
		t.Errorf("fan parallelism: count %d, buckets ≤0.5 %d ≤0.9 %d ≤1.1 %d ≤1.5 %d; want 3, 0, 2, 2, 3",
			f.GetSampleCount(), bucket(f, 0.5), bucket(f, 0.9), bucket(f, 1.1), bucket(f, 1.5))
	}
	if want := 500.0/350 + 2*(4.0/6); math.Abs(f.GetSampleSum()-want) > 1e-9 {
		t.Errorf("fan parallelism sum %v, want %v", f.GetSampleSum(), want)
	}
	if g.has("tollgate_runs") || g.has("tollgate_asks") {
		t.Error("without a store there are no gauges of runs and asks")
	}
}

// counts is a hand-written store.Counts source.
type counts struct {
	c   store.Counts
	err error
}

func (c *counts) Counts(ctx context.Context) (store.Counts, error) { return c.c, c.err }

func TestGaugesReadTheStoreAtScrapeTime(t *testing.T) {
	src := &counts{c: store.Counts{Runs: map[string]int64{"parked": 2, "running": 1, "complete": 7, "mystery": 1}, Asks: map[string]int64{"pending": 3, "consumed": 4}}}
	obs, err := New(Config{Store: src})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Shutdown(context.Background())
	g := gather(t, obs)
	for _, w := range []struct {
		name, state string
		n           float64
	}{{"tollgate_runs", "parked", 2}, {"tollgate_runs", "running", 1}, {"tollgate_runs", "complete", 7}, {"tollgate_runs", "blocked", 0},
		{"tollgate_asks", "pending", 3}, {"tollgate_asks", "consumed", 4}, {"tollgate_asks", "evidence_requested", 0}} {
		if got := g.gauge(w.name, "state", w.state); got != w.n {
			t.Errorf("%s{state=%q} = %v, want %v", w.name, w.state, got, w.n)
		}
	}
	if n := len(g.families["tollgate_runs"].GetMetric()); n != 9 {
		t.Errorf("tollgate_runs has %d series, want one per engine state (9): unknown states are left out", n)
	}
	// The next scrape reads again.
	src.c.Runs["parked"] = 0
	if got := gather(t, obs).gauge("tollgate_runs", "state", "parked"); got != 0 {
		t.Errorf("parked after the runs moved on: %v, want 0", got)
	}
	// A store that cannot answer leaves the gauges out, not stale.
	src.err = errors.New("redis down")
	g = gather(t, obs)
	if g.has("tollgate_runs") || g.has("tollgate_asks") {
		t.Error("gauges shown although the store could not be read")
	}
	if !g.has("tollgate_runs_started_total") {
		t.Error("the counters are still served")
	}
}

// gathered is one scrape, read through the registry the handler serves.
type gathered struct {
	t        *testing.T
	families map[string]*dto.MetricFamily
}

func gather(t *testing.T, m *Metrics) gathered {
	t.Helper()
	fams, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	g := gathered{t: t, families: map[string]*dto.MetricFamily{}}
	for _, f := range fams {
		g.families[f.GetName()] = f
	}
	return g
}

func (g gathered) has(name string) bool { return g.families[name] != nil }

// metric finds the series of name with label=value ("" for none).
func (g gathered) metric(name, label, value string) *dto.Metric {
	g.t.Helper()
	f := g.families[name]
	if f == nil {
		g.t.Fatalf("no metric family %s", name)
	}
	for _, m := range f.GetMetric() {
		if label == "" && len(m.GetLabel()) == 0 {
			return m
		}
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				return m
			}
		}
	}
	g.t.Fatalf("%s has no series {%s=%q}", name, label, value)
	return nil
}

func (g gathered) counter(name, label, value string) float64 {
	return g.metric(name, label, value).GetCounter().GetValue()
}

func (g gathered) gauge(name, label, value string) float64 {
	return g.metric(name, label, value).GetGauge().GetValue()
}

func (g gathered) histogram(name, label, value string) *dto.Histogram {
	return g.metric(name, label, value).GetHistogram()
}

// bucket is the cumulative count of observations ≤ le.
func bucket(h *dto.Histogram, le float64) uint64 {
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == le {
			return b.GetCumulativeCount()
		}
	}
	return math.MaxUint64
}

// One commit's worth of observing (a lease, a result, a fan finished and
// a run ended) on the commit path.
func BenchmarkCommitted(b *testing.B) {
	t := &testing.T{}
	mach := graphAskDemo(t)
	obs, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer obs.Shutdown(context.Background())
	d := start(t, mach, obs, "a")
	d.commit(engine.StepLeased{Step: "cpu", Attempt: 1, Executor: "x1", At: d.at(1)})
	d.commit(engine.StepSucceeded{Step: "cpu", Attempt: 1, Output: json.RawMessage(`{}`), At: d.at(2)})
	d.commit(engine.StepLeased{Step: "mem", Attempt: 1, Executor: "x1", At: d.at(3)})
	before := d.run
	tr, err := mach.Apply(before, engine.StepSucceeded{Step: "mem", Attempt: 1, Output: json.RawMessage(`{}`), At: d.at(4)})
	if err != nil {
		b.Fatal(err)
	}
	records := append([]engine.Record{{Kind: engine.JournalStepLeased, Payload: map[string]any{"step": "mem", "attempt": 1}}}, tr.Records...)
	records = append(records, engine.Record{Kind: engine.JournalRunEnded, Payload: map[string]any{"state": "complete"}})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		obs.Committed(ctx, mach, before, tr.Run, records)
	}
}

// Items 12 and 13: the bounded caches and the watch limit are read at
// scrape time: entries and evictions by cache, open and refused watches.
func TestBoundsAreReadAtScrapeTime(t *testing.T) {
	caches := map[string]lru.Stats{"plans": {Entries: 4, Bound: 4, Evictions: 9}, "compiled": {Entries: 2, Bound: 4}}
	obs, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Shutdown(context.Background())
	if err := obs.Report(fixedBounds{caches: caches, active: 3, refused: 5, dropped: 7}); err != nil {
		t.Fatal(err)
	}
	g := gather(t, obs)
	for _, w := range []struct {
		name, label, value string
		n                  float64
	}{{"tollgate_cache_entries", "cache", "plans", 4}, {"tollgate_cache_entries", "cache", "compiled", 2},
		{"tollgate_watch_streams", "", "", 3}} {
		if got := g.gauge(w.name, w.label, w.value); got != w.n {
			t.Errorf("%s{%s=%q} = %v, want %v", w.name, w.label, w.value, got, w.n)
		}
	}
	for _, w := range []struct {
		name, label, value string
		n                  float64
	}{{"tollgate_cache_evictions_total", "cache", "plans", 9}, {"tollgate_watches_refused_total", "", "", 5}, {"tollgate_traces_dropped_total", "", "", 7}} {
		if got := g.counter(w.name, w.label, w.value); got != w.n {
			t.Errorf("%s{%s=%q} = %v, want %v", w.name, w.label, w.value, got, w.n)
		}
	}
}

type fixedBounds struct {
	caches  map[string]lru.Stats
	active  int
	refused int64
	dropped uint64
}

func (b fixedBounds) Caches() map[string]lru.Stats { return b.caches }
func (b fixedBounds) WatchFigures() (int, int64)   { return b.active, b.refused }
func (b fixedBounds) TracesDropped() uint64        { return b.dropped }
