package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/answer"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/lru"
)

// Counter is what the gauges read from the store at scrape time.
type Counter interface {
	Counts(ctx context.Context) (store.Counts, error)
}

// Config configures the metrics.
type Config struct {
	// Store, when set, feeds the gauges tollgate_runs and tollgate_asks
	// (by state) on every scrape.
	Store Counter
	// CountTimeout bounds the store read of one scrape (default 2s); a
	// scrape whose read fails or times out leaves the gauges out and logs.
	CountTimeout time.Duration
	Log          *slog.Logger
	// Policy, when set, feeds the policy gauges (policy.go).
	Policy PolicyHealth
}

// Bucket boundaries, in the unit of each histogram.
var (
	// A step attempt's wait for an executor: a fraction of a millisecond
	// when one is idle on the same host, seconds when they are all busy,
	// minutes when none offers the tool.
	dispatchBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}
	// A tool call: milliseconds for a read, up to an hour for a job.
	stepBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
	// Branch sum ÷ wall: about 1 for a fan that ran a branch at a time,
	// about its branch count for one that ran at once.
	fanBuckets = []float64{0.5, 0.9, 1.1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64}
)

// other is the label value of anything the engine records that a label
// set does not name (a newer engine's kind, say): the series stay few.
const other = "other"

// Metrics is the control plane's metrics. It is safe for concurrent use;
// after New nothing in it changes but the instruments' own state.
type Metrics struct {
	log      *slog.Logger
	store    Counter
	timeout  time.Duration
	provider *sdkmetric.MeterProvider
	registry *prometheus.Registry
	handler  http.Handler

	runsStarted  metric.Int64Counter
	runsEnded    metric.Int64Counter
	asksOpened   metric.Int64Counter
	expiries     metric.Int64Counter
	answers      metric.Int64Counter
	replies      metric.Int64Counter
	redispatches metric.Int64Counter
	leasesLost   metric.Int64Counter
	inDoubt      metric.Int64Counter
	dispatch     metric.Float64Histogram
	stepTime     metric.Float64Histogram
	fans         metric.Float64Histogram
	runs         metric.Int64ObservableGauge
	asks         metric.Int64ObservableGauge

	meter metric.Meter // for sources registered after New (Report)

	// Attribute sets made once, by the engine's word for them.
	outcomes     map[string]labels // run state → outcome
	answerKinds  map[string]labels // decision or record kind → kind
	replyKinds   map[string]labels // answer.Kind → kind
	reasons      map[string]labels // a dispatch's why → reason
	stepOutcomes map[string]labels // record kind → outcome
	runStates    map[string]labels
	askStates    map[string]labels
}

// labels is one attribute set as each kind of measurement takes it, so
// that a measurement on the commit path allocates nothing for it.
type labels struct {
	add []metric.AddOption
	rec []metric.RecordOption
	obs []metric.ObserveOption
}

func newLabels(key, value string) labels {
	o := metric.WithAttributeSet(attribute.NewSet(attribute.String(key, value)))
	return labels{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}, obs: []metric.ObserveOption{o}}
}

// labelMap maps the engine's words to label values of key; each value
// also maps to itself, and other is always there.
func labelMap(key string, words map[string]string) map[string]labels {
	out := map[string]labels{other: newLabels(key, other)}
	byValue := map[string]labels{}
	for word, value := range words {
		l, ok := byValue[value]
		if !ok {
			l = newLabels(key, value)
			byValue[value] = l
		}
		out[word], out[value] = l, l
	}
	return out
}

func same(words ...string) map[string]string {
	m := make(map[string]string, len(words))
	for _, w := range words {
		m[w] = w
	}
	return m
}

func pick(set map[string]labels, word string) labels {
	if l, ok := set[word]; ok {
		return l
	}
	return set[other]
}

// meterName is the instrumentation scope of every instrument here.
const meterName = "github.com/tollgate-dev/tollgate/internal/metrics"

// New builds the instruments, the exporter and its registry (with the Go
// runtime's and the process's collectors). Shutdown releases them.
func New(cfg Config) (*Metrics, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.CountTimeout <= 0 {
		cfg.CountTimeout = 2 * time.Second
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes))
	if err != nil {
		return nil, fmt.Errorf("metrics: prometheus exporter: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp),
		sdkmetric.WithResource(resource.NewSchemaless(attribute.String("service.name", "tollgate-controlplane"))))
	m := &Metrics{log: cfg.Log, store: cfg.Store, timeout: cfg.CountTimeout, provider: provider, registry: reg, meter: provider.Meter(meterName),
		handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{
			ErrorLog: slog.NewLogLogger(cfg.Log.Handler(), slog.LevelWarn), ErrorHandling: promhttp.ContinueOnError, Registry: reg}),
		outcomes: labelMap("outcome", same(string(engine.Complete), string(engine.Partial), string(engine.Failed),
			string(engine.Cancelled), string(engine.Rejected), string(engine.Expired))),
		// The decision an ask.decided record names, then this package's
		// word for each other act on an ask (by record kind, in Committed).
		answerKinds: labelMap("kind", same(string(engine.DecisionApprove), string(engine.DecisionReject), string(engine.DecisionAnswer),
			engine.DecidedInDoubt, "vote", "amend", "revoke", "delegate", "request_evidence", "attach_evidence", "expire")),
		replyKinds: labelMap("kind", map[string]string{string(answer.Selected): "selected", string(answer.Reshown): "reshown",
			string(answer.NoMatch): "no_match", string(answer.EscapeHint): "escape_hint", string(answer.Dropped): "dropped"}),
		// The engine's reasons for queueing a step again: a retry after a
		// failure, a lease lost, a person's "retry" on an in-doubt step, a
		// re-run after an approval went stale (re-prepare: "runnable"),
		// an ask's freshness probe read again.
		reasons: labelMap("reason", map[string]string{"retry": "retry", "re-lease": "lease_lost", "retry after doubt": "in_doubt_retry",
			"runnable": "reprepare", "the ask opened": "probe", "verify the approval": "probe"}),
		stepOutcomes: labelMap("outcome", map[string]string{string(engine.JournalStepSucceeded): "succeeded", string(engine.JournalStepFailed): "failed",
			string(engine.JournalStepLeaseLost): "lease_lost", string(engine.JournalStepResultAfterEnd): "after_end"}),
		runStates: labelMap("state", same(string(engine.Running), string(engine.Parked), string(engine.Blocked),
			string(engine.Complete), string(engine.Partial), string(engine.Failed), string(engine.Cancelled),
			string(engine.Rejected), string(engine.Expired))),
		askStates: labelMap("state", same(string(engine.AskPending), string(engine.AskEvidenceRequested), string(engine.AskApproved),
			string(engine.AskConsumed), string(engine.AskAnswered), string(engine.AskRejected), string(engine.AskExpired),
			string(engine.AskCancelled), string(engine.AskStale))),
	}
	meter := m.meter
	err = m.instruments(meter)
	if err == nil && cfg.Policy != nil {
		err = m.policyInstruments(meter, cfg.Policy)
	}
	if err != nil {
		_ = provider.Shutdown(context.Background())
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return m, nil
}

func (m *Metrics) instruments(meter metric.Meter) error {
	var errs []error
	counter := func(name, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	histogram := func(name, unit, desc string, buckets []float64) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit(unit), metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	m.runsStarted = counter("tollgate_runs_started", "Runs this replica created.")
	m.runsEnded = counter("tollgate_runs_ended", "Runs this replica saw reach an outcome, by outcome.")
	m.asksOpened = counter("tollgate_asks_opened", "Asks opened (gates, questions, in-doubt asks).")
	m.expiries = counter("tollgate_ask_expiries", "Asks whose deadline passed unanswered.")
	m.answers = counter("tollgate_answers", "Acts on asks as the engine records them, by kind: approve, reject, answer, in_doubt (decided); "+
		"vote (an approval toward a quorum; the one completing it is also an approve or answer); amend; revoke; delegate; "+
		"request_evidence; attach_evidence; expire.")
	m.replies = counter("tollgate_ask_replies", "Free-text replies to asks, by how they were read (selected, reshown, no_match, escape_hint, dropped).")
	m.redispatches = counter("tollgate_step_redispatches", "Step attempts after the first, by reason: retry, lease_lost, in_doubt_retry, reprepare, probe.")
	m.leasesLost = counter("tollgate_leases_lost", "Leases whose executor went away before reporting.")
	m.inDoubt = counter("tollgate_steps_in_doubt", "Side effects whose outcome became unknown (executor lost after start); each opens an in-doubt ask.")
	m.dispatch = histogram("tollgate_dispatch_latency", "s", "A step attempt's wait from queued to leased by an executor.", dispatchBuckets)
	m.stepTime = histogram("tollgate_step_duration", "s", "A step attempt's time from its lease to its end, by outcome (succeeded, failed, lease_lost, after_end).", stepBuckets)
	m.fans = histogram("tollgate_fan_parallelism", "", "Branch time summed over wall time, per finished fan (parallel group).", fanBuckets)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Every counter series exists from the start, at zero: a rate over a
	// series that appears with its first event misses that event.
	ctx := context.Background()
	m.runsStarted.Add(ctx, 0)
	m.asksOpened.Add(ctx, 0)
	m.expiries.Add(ctx, 0)
	m.leasesLost.Add(ctx, 0)
	m.inDoubt.Add(ctx, 0)
	for _, c := range []struct {
		counter metric.Int64Counter
		set     map[string]labels
	}{{m.runsEnded, m.outcomes}, {m.answers, m.answerKinds}, {m.replies, m.replyKinds}, {m.redispatches, m.reasons}} {
		for word, l := range c.set {
			if word != other {
				c.counter.Add(ctx, 0, l.add...)
			}
		}
	}
	if m.store == nil {
		return nil
	}
	var err error
	if m.runs, err = meter.Int64ObservableGauge("tollgate_runs", metric.WithDescription("Runs in the store by state (the store's figure: every replica reports the same).")); err != nil {
		return err
	}
	if m.asks, err = meter.Int64ObservableGauge("tollgate_asks", metric.WithDescription("Asks in the store by state (the store's figure: every replica reports the same).")); err != nil {
		return err
	}
	_, err = meter.RegisterCallback(m.observeCounts, m.runs, m.asks)
	return err
}

// Bounds is what reports a replica's bounded resources: its caches'
// figures by name and its watch streams (open, refused so far).
type Bounds interface {
	Caches() map[string]lru.Stats
	WatchFigures() (active int, refused int64)
	// TracesDropped is how many sampled transitions the replica's tracer
	// left undrawn because its queue was full (0 with tracing off).
	TracesDropped() uint64
}

// Report registers the figures of a replica's bounded resources, read at
// scrape time: tollgate_cache_entries and tollgate_cache_evictions_total
// by cache, tollgate_watch_streams and tollgate_watches_refused_total,
// tollgate_traces_dropped_total.
// The replica is built after its metrics (they observe its commits), so
// it is registered as a source once it exists, as a collector would be.
func (m *Metrics) Report(b Bounds) error {
	meter := m.meter
	var errs []error
	cacheEntries, err := meter.Int64ObservableGauge("tollgate_cache_entries", metric.WithDescription("Entries in each bounded cache of this replica (plans, compiled, plan_views, runs, ended_runs, watch_events)."))
	errs = append(errs, err)
	cacheEvictions, err := meter.Int64ObservableCounter("tollgate_cache_evictions", metric.WithDescription("Entries each bounded cache of this replica dropped to stay within its bound."))
	errs = append(errs, err)
	watchStreams, err := meter.Int64ObservableGauge("tollgate_watch_streams", metric.WithDescription("Watch streams (WatchRun, WatchAsks) open on this replica."))
	errs = append(errs, err)
	watchRefused, err := meter.Int64ObservableCounter("tollgate_watches_refused", metric.WithDescription("Watch streams refused because their caller held as many as one caller may."))
	errs = append(errs, err)
	tracesDropped, err := meter.Int64ObservableCounter("tollgate_traces_dropped", metric.WithDescription("Sampled transitions this replica drew no trace for: the tracer's queue was full (tracing never holds up a commit)."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for name, st := range b.Caches() {
			set := metric.WithAttributeSet(attribute.NewSet(attribute.String("cache", name)))
			o.ObserveInt64(cacheEntries, int64(st.Entries), set)
			o.ObserveInt64(cacheEvictions, st.Evictions, set)
		}
		active, refused := b.WatchFigures()
		o.ObserveInt64(watchStreams, int64(active))
		o.ObserveInt64(watchRefused, refused)
		o.ObserveInt64(tracesDropped, int64(min(b.TracesDropped(), math.MaxInt64)))
		return nil
	}, cacheEntries, cacheEvictions, watchStreams, watchRefused, tracesDropped)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// observeCounts reads the store's counts for one scrape. A store that
// cannot answer leaves the gauges out of this scrape rather than showing
// a stale figure.
func (m *Metrics) observeCounts(ctx context.Context, o metric.Observer) error {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	c, err := m.store.Counts(ctx)
	if err != nil {
		m.log.Warn("metrics: the store's counts could not be read; tollgate_runs and tollgate_asks are left out of this scrape", "error", err)
		return nil
	}
	for state, l := range m.runStates {
		if state != other {
			o.ObserveInt64(m.runs, c.Runs[state], l.obs...)
		}
	}
	for state, l := range m.askStates {
		if state != other {
			o.ObserveInt64(m.asks, c.Asks[state], l.obs...)
		}
	}
	return nil
}

// Committed implements controlplane.Observer. It reads only the records
// and the steps they name (never every step of the run), on the
// committing goroutine, and takes no lock of its own.
func (m *Metrics) Committed(ctx context.Context, mach *engine.Machine, before, after *engine.Run, records []engine.Record) {
	for i := range records {
		rec := &records[i]
		switch rec.Kind {
		case engine.JournalRunStarted:
			m.runsStarted.Add(ctx, 1)
		case engine.JournalRunEnded:
			m.runsEnded.Add(ctx, 1, pick(m.outcomes, str(rec.Payload, "state")).add...)
		case engine.JournalAskOpened:
			m.asksOpened.Add(ctx, 1)
			if _, ok := rec.Payload["in_doubt"]; ok {
				m.inDoubt.Add(ctx, 1)
			}
		case engine.JournalAskExpired:
			m.expiries.Add(ctx, 1)
			m.answers.Add(ctx, 1, m.answerKinds["expire"].add...)
		case engine.JournalAskDecided:
			m.answers.Add(ctx, 1, pick(m.answerKinds, str(rec.Payload, "decision")).add...)
		case engine.JournalAskVoted:
			m.answers.Add(ctx, 1, m.answerKinds["vote"].add...)
		case engine.JournalAskAmended:
			m.answers.Add(ctx, 1, m.answerKinds["amend"].add...)
		case engine.JournalApprovalRevoked:
			m.answers.Add(ctx, 1, m.answerKinds["revoke"].add...)
		case engine.JournalAskDelegated:
			m.answers.Add(ctx, 1, m.answerKinds["delegate"].add...)
		case engine.JournalAskEvidenceRequested:
			m.answers.Add(ctx, 1, m.answerKinds["request_evidence"].add...)
		case engine.JournalAskEvidenceAttached:
			m.answers.Add(ctx, 1, m.answerKinds["attach_evidence"].add...)
		case engine.JournalAskReply:
			m.replies.Add(ctx, 1, pick(m.replyKinds, str(rec.Payload, "kind")).add...)
		case engine.JournalStepDispatched:
			if num(rec.Payload, "attempt") > 1 {
				m.redispatches.Add(ctx, 1, pick(m.reasons, str(rec.Payload, "why")).add...)
			}
		case engine.JournalStepLeased:
			if a := attemptOf(after, rec); a != nil && !a.QueuedAt.IsZero() && !a.LeasedAt.Before(a.QueuedAt) {
				m.dispatch.Record(ctx, a.LeasedAt.Sub(a.QueuedAt).Seconds())
			}
		case engine.JournalStepLeaseLost:
			m.leasesLost.Add(ctx, 1)
			m.stepDuration(ctx, after, rec)
		case engine.JournalStepSucceeded, engine.JournalStepFailed:
			if _, ok := rec.Payload["by"]; ok {
				continue // a person's word on an in-doubt step, not an executor's result
			}
			m.stepDuration(ctx, after, rec)
		case engine.JournalStepResultAfterEnd:
			m.stepDuration(ctx, after, rec)
		}
	}
	for _, f := range mach.FansDone(before, after, records) {
		if f.Wall > 0 {
			m.fans.Record(ctx, f.Parallelism())
		}
	}
}

// stepDuration records the attempt a record ended: its lease to its end.
func (m *Metrics) stepDuration(ctx context.Context, run *engine.Run, rec *engine.Record) {
	a := attemptOf(run, rec)
	if a == nil || a.LeasedAt.IsZero() || a.FinishedAt.Before(a.LeasedAt) {
		return // never leased (a probe refused before its lease), or no end
	}
	m.stepTime.Record(ctx, a.FinishedAt.Sub(a.LeasedAt).Seconds(), pick(m.stepOutcomes, string(rec.Kind)).rec...)
}

// attemptOf finds the attempt a step record names in run; nil if none.
func attemptOf(run *engine.Run, rec *engine.Record) *engine.Attempt {
	s := run.Steps[str(rec.Payload, "step")]
	n := num(rec.Payload, "attempt")
	if s == nil || n < 1 {
		return nil
	}
	if n <= len(s.Attempts) && s.Attempts[n-1].N == n {
		return &s.Attempts[n-1]
	}
	for i := len(s.Attempts) - 1; i >= 0; i-- {
		if s.Attempts[i].N == n {
			return &s.Attempts[i]
		}
	}
	return nil
}

func str(p map[string]any, k string) string {
	s, _ := p[k].(string)
	return s
}

// num reads an integer payload field: an int as the engine writes it, a
// float64 once it went through JSON.
func num(p map[string]any, k string) int {
	switch v := p[k].(type) {
	case int:
		return v
	case int64:
		return int(v)
	case float64:
		return int(v)
	}
	return 0
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Gatherer is the registry the handler serves, for those who read the
// metrics in process.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.registry }

// Shutdown stops the meter provider; the handler serves nothing new
// after it.
func (m *Metrics) Shutdown(ctx context.Context) error {
	if err := m.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}
