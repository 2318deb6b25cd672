package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"

	"github.com/tollgate-dev/tollgate/bench/peers/peerkit"
)

// config is what the flags set.
type config struct {
	jsonPath, mdPath string
	n                int           // iterations of each latency workload
	duration         time.Duration // sustained phase length
	clients          int           // sustained concurrent clients
	runs             int           // cap on sustained runs (0: none)
	warmup           int           // 1-step runs before each workload, not counted
	only             string        // run one workload (by key), for debugging
	tuned            bool          // raise the history queues' poll rate limits
	store            string        // postgres or sqlite (temporaltest)
	pg               string        // postgres: the admin database's URL
	shards           int           // postgres: history shards
	serverLog        string        // postgres: write the server's log here
	log              *peerkit.Progress
}

// Stores: where the server keeps its state.
const (
	storePostgres = "postgres" // Temporal's own server on this machine's PostgreSQL
	storeSQLite   = "sqlite"   // temporaltest: SQLite in memory, one shard (the issue-6 peer)
)

// stderrLog is the progress on stderr, its times counted from the start of
// the process (across Runs, in tests).
var stderrLog = peerkit.NewProgress(os.Stderr, "temporal")

// Run parses args, runs every workload against a fresh in-process Temporal
// server each, and writes the report.
func Run(ctx context.Context, args []string) error {
	cfg := config{log: stderrLog}
	fs := flag.NewFlagSet("temporal", flag.ContinueOnError)
	fs.StringVar(&cfg.jsonPath, "json", "", "write the JSON report to `file` (- for stdout)")
	fs.StringVar(&cfg.mdPath, "md", "", "write the Markdown table to `file` (- for stdout)")
	fs.IntVar(&cfg.n, "n", 200, "iterations of each latency workload")
	fs.DurationVar(&cfg.duration, "duration", 60*time.Second, "length of the sustained phase")
	fs.IntVar(&cfg.clients, "clients", 64, "concurrent clients in the sustained phase")
	fs.IntVar(&cfg.runs, "runs", 0, "stop the sustained phase after this many runs as well (0: duration only)")
	fs.IntVar(&cfg.warmup, "warmup", 3, "uncounted 1-step runs on each fresh server")
	fs.BoolVar(&cfg.tuned, "tuned", false, "raise history.transferProcessorMaxPollRPS and history.visibilityProcessorMaxPollRPS from 20 to 10000 (per shard)")
	fs.StringVar(&cfg.store, "store", storePostgres, "persistence: postgres (temporal.NewServer on PostgreSQL at -pg, fresh databases per workload, -shards history shards) or sqlite (temporaltest: SQLite in memory, one shard)")
	fs.StringVar(&cfg.pg, "pg", peerkit.DefaultPG, "with -store postgres: URL of the server's admin database; each workload's databases are created beside it and dropped after")
	fs.StringVar(&cfg.serverLog, "server-log", "", "with -store postgres: write the server's own log (level info) to `file`, to explain a failure or an outlier")
	fs.IntVar(&cfg.shards, "shards", 4, "with -store postgres: history shards (Temporal's own docker and development-postgres12 configs use 4)")
	fs.StringVar(&cfg.only, "only", "", "run only this workload: one-step, three-step, fan-10, fan-100, approve, sustained")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if cfg.n < 1 || cfg.clients < 1 || cfg.duration <= 0 || cfg.warmup < 0 || cfg.shards < 1 {
		return errors.New("-n, -clients and -shards must be ≥ 1, -duration > 0, -warmup ≥ 0")
	}
	if cfg.store != storePostgres && cfg.store != storeSQLite {
		return fmt.Errorf("-store %q: want postgres or sqlite", cfg.store)
	}
	if cfg.jsonPath == "" && cfg.mdPath == "" {
		cfg.mdPath = "-"
	}
	if cfg.only != "" && !slices.ContainsFunc(workloads, func(w workload) bool { return w.key == cfg.only }) {
		return fmt.Errorf("unknown workload %q", cfg.only)
	}

	var pg map[string]string
	if cfg.store == storePostgres {
		s := pgServer{peerkit.PG{Admin: cfg.pg, Prefix: dbPrefix}}
		if dropped, err := s.DropStale(ctx); err != nil {
			return fmt.Errorf("PostgreSQL at -pg %q: %w", cfg.pg, err)
		} else if len(dropped) > 0 {
			cfg.log.Printf("dropped %d databases left by earlier runs: %v", len(dropped), dropped)
		}
		var err error
		if pg, err = s.Settings(ctx); err != nil {
			return err
		}
	}
	rep := newReport(cfg, pg)
	started := time.Now()
	for _, w := range workloads {
		if cfg.only != "" && w.key != cfg.only {
			continue
		}
		res, err := runWorkload(ctx, cfg, w)
		if err != nil {
			return fmt.Errorf("%s: %w", w.key, err)
		}
		rep.Results = append(rep.Results, res)
	}
	rep.WallSeconds = time.Since(started).Seconds()
	rep.LoadAfter = peerkit.LoadAvg()
	return peerkit.WriteReport(cfg.jsonPath, rep, cfg.mdPath, rep.markdown)
}

// workload is one figure of the table.
type workload struct {
	key    string
	figure string // as in BENCHMARKS.md
	goal   string // Tollgate's goal for it (DESIGN.md §12)
	run    func(e *env, ctx context.Context, cfg config, res *Result) error
}

var workloads = []workload{
	{"one-step", "1-step run, start → complete", "—", func(e *env, ctx context.Context, cfg config, res *Result) error {
		return e.latency(ctx, cfg, res, func(ctx context.Context) (time.Duration, error) {
			return e.timed(ctx, "Sequential", 1)
		})
	}},
	{"three-step", "3-step sequential run, start → complete", "p50 ≤ 5 ms", func(e *env, ctx context.Context, cfg config, res *Result) error {
		return e.latency(ctx, cfg, res, func(ctx context.Context) (time.Duration, error) {
			return e.timed(ctx, "Sequential", 3)
		})
	}},
	{"fan-10", "10-way fan of no-op steps", "p50 ≤ 10 ms", func(e *env, ctx context.Context, cfg config, res *Result) error {
		return e.latency(ctx, cfg, res, func(ctx context.Context) (time.Duration, error) {
			return e.timed(ctx, "Fan", 10)
		})
	}},
	{"fan-100", "100-way fan", "p50 ≤ 50 ms", func(e *env, ctx context.Context, cfg config, res *Result) error {
		return e.latency(ctx, cfg, res, func(ctx context.Context) (time.Duration, error) {
			return e.timed(ctx, "Fan", 100)
		})
	}},
	{"approve", "approve → next step: signal sent → activity started", "p50 ≤ 2 ms, p99 ≤ 10 ms", (*env).approve},
	{"sustained", "sustained, 64 clients, 1-step runs", "≥ 5,000 steps/s, p99 ≤ 100 ms", (*env).sustained},
}

// tunedConfig is temporaltest's own dynamic config (which this replaces)
// plus poll limits fit for one shard. Each history queue reads its tasks at
// most 20 times a second per shard by default; temporaltest runs one shard,
// so every workflow task waits for the next read, up to 50 ms.
func tunedConfig() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): []dynamicconfig.ConstrainedValue{{Value: true}},
		dynamicconfig.TransferProcessorMaxPollRPS.Key():             []dynamicconfig.ConstrainedValue{{Value: 10000}},
		dynamicconfig.VisibilityProcessorMaxPollRPS.Key():           []dynamicconfig.ConstrainedValue{{Value: 10000}},
	}
}

// env is one fresh in-process Temporal server with one worker and one
// shared client, like Tollgate's benchWorld (one executor, one connection).
type env struct {
	c        client.Client
	hostPort string
	stop     func() error
	acts     *activities
	seq      atomic.Int64
	key      string
	// connPeak, on PostgreSQL, is the most connections the server has held
	// to the workload's databases so far.
	connPeak func() int64

	// closes, when set, collects for each timed run the time from its start
	// to the close the server recorded, and how long after that close the
	// client's Get returned.
	closes *closeLog
}

type closeLog struct {
	mu               sync.Mutex
	toClose, getLags []time.Duration
}

func runWorkload(ctx context.Context, cfg config, w workload) (res Result, err error) {
	res = Result{Key: w.key, Figure: w.figure, Goal: w.goal}
	t0 := time.Now()
	log := &sdkLog{peerkit.NewTally(cfg.log, w.key, "sdk")}
	var e *env
	if cfg.store == storePostgres {
		e, err = startPostgres(ctx, cfg, w.key, log, newActivities())
	} else {
		e, err = start(w.key, cfg.tuned, log)
	}
	if err != nil {
		return res, err
	}
	defer func() {
		if stopErr := e.stop(); stopErr != nil && err == nil {
			err = fmt.Errorf("stop: %w", stopErr)
		}
	}()
	res.ServerStartMs = peerkit.Ms(time.Since(t0))
	cfg.log.Printf("%s: server up in %.0f ms (%s, %s)", w.key, res.ServerStartMs, e.hostPort, cfg.store)
	for range cfg.warmup {
		if _, err := e.timed(ctx, "Sequential", 1); err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
	}
	t1 := time.Now()
	if err := w.run(e, ctx, cfg, &res); err != nil {
		return res, err
	}
	res.Seconds = time.Since(t1).Seconds()
	if e.connPeak != nil {
		if res.Extra == nil {
			res.Extra = map[string]float64{}
		}
		res.Extra["pg_connections_peak"] = float64(e.connPeak())
	}
	res.SDKWarnings, res.SDKErrors, res.SDKLog = log.Counts()
	cfg.log.Printf("%s: %s", w.key, res.summary())
	return res, nil
}

// start starts temporaltest's server (SQLite in memory, one shard).
func start(key string, tuned bool, log *sdkLog) (e *env, err error) {
	// temporaltest panics (it has no testing.T here) when the server cannot
	// start: turn that into an error.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("temporaltest: %v", r)
		}
	}()
	acts := newActivities()
	opts := []temporaltest.TestServerOption{temporaltest.WithBaseClientOptions(client.Options{Logger: log})}
	if tuned {
		opts = append(opts, temporaltest.WithBaseServerOptions(temporal.WithDynamicConfigClient(tunedConfig())))
	}
	ts := temporaltest.NewServer(opts...)
	ts.NewWorker(taskQueue, register(acts))
	stop := func() (err error) {
		// Stop logs a shutdown error through its (nil) testing.T.
		defer func() { _ = recover() }()
		ts.Stop()
		return nil
	}
	return &env{c: ts.GetDefaultClient(), hostPort: ts.GetFrontendHostPort(), stop: stop, acts: acts, key: key}, nil
}

func (e *env) id(kind string) string {
	return fmt.Sprintf("%s-%s-%d", e.key, kind, e.seq.Add(1))
}

// timed starts a workflow and waits until it completes (the SDK long-polls
// its history for the close event, as Tollgate's client watches the run).
func (e *env) timed(ctx context.Context, wf string, arg int) (time.Duration, error) {
	t0 := time.Now()
	run, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: e.id(wf), TaskQueue: taskQueue}, wf, arg)
	if err != nil {
		return 0, err
	}
	if err := run.Get(ctx, nil); err != nil {
		return 0, err
	}
	got := time.Now()
	if e.closes != nil {
		d, err := e.c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
		if err != nil {
			return 0, err
		}
		closed := d.GetWorkflowExecutionInfo().GetCloseTime().AsTime()
		e.closes.mu.Lock()
		e.closes.toClose = append(e.closes.toClose, closed.Sub(t0))
		e.closes.getLags = append(e.closes.getLags, got.Sub(closed))
		e.closes.mu.Unlock()
	}
	return got.Sub(t0), nil
}

// latency runs one measurement cfg.n times, one after another.
func (e *env) latency(ctx context.Context, cfg config, res *Result, one func(context.Context) (time.Duration, error)) error {
	ds := make([]time.Duration, 0, cfg.n)
	e.closes = &closeLog{}
	defer func() { e.closes = nil }()
	tick := cfg.log.Ticker(res.Key, cfg.n)
	for i := range cfg.n {
		d, err := one(ctx)
		if err != nil {
			return err
		}
		ds = append(ds, d)
		tick(i + 1)
	}
	res.Runs = len(ds)
	res.P50Ms, res.P99Ms = peerkit.Percentiles(ds)
	res.MaxMs = peerkit.Ms(slices.Max(ds))
	p50, p99 := peerkit.Percentiles(e.closes.toClose)
	late := 0
	for _, l := range e.closes.getLags {
		if l > time.Second {
			late++
		}
	}
	res.Extra = map[string]float64{"server_close_p50_ms": p50, "server_close_p99_ms": p99, "late_wakeups": float64(late)}
	return nil
}

// approve: a workflow parks on the "approve" signal; once the server has
// recorded it parked (its first workflow task completed), the client
// signals; measured from just before the signal is sent to the moment the
// worker starts the governed activity, and to the workflow's completion.
func (e *env) approve(ctx context.Context, cfg config, res *Result) error {
	var toStart, toDone []time.Duration
	tick := cfg.log.Ticker(res.Key, cfg.n)
	for i := range cfg.n {
		id := e.id("approval")
		started := e.acts.watch(id)
		run, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, "Approval")
		if err != nil {
			return err
		}
		if err := e.waitParked(ctx, id); err != nil {
			return err
		}
		t0 := time.Now()
		if err := e.c.SignalWorkflow(ctx, id, "", approveSig, nil); err != nil {
			return err
		}
		var at time.Time
		select {
		case at = <-started:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := run.Get(ctx, nil); err != nil {
			return err
		}
		toDone = append(toDone, time.Since(t0))
		toStart = append(toStart, at.Sub(t0))
		e.acts.forget(id)
		tick(i + 1)
	}
	res.Runs = len(toStart)
	res.P50Ms, res.P99Ms = peerkit.Percentiles(toStart)
	res.MaxMs = peerkit.Ms(slices.Max(toStart))
	p50, p99 := peerkit.Percentiles(toDone)
	res.Extra = map[string]float64{"signal_to_complete_p50_ms": p50, "signal_to_complete_p99_ms": p99}
	return nil
}

// waitParked polls until the workflow's first task has completed and no
// other is pending: history is Started, TaskScheduled, TaskStarted,
// TaskCompleted and the workflow waits on its signal.
func (e *env) waitParked(ctx context.Context, id string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := e.c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return err
		}
		if d.GetWorkflowExecutionInfo().GetHistoryLength() >= 4 && d.GetPendingWorkflowTask() == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("workflow %s never parked", id)
		}
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// sustained: cfg.clients goroutines, each running 1-step workflows back to
// back through the shared client until cfg.duration has passed (or cfg.runs
// runs have started); steps/s over the whole phase and the p99 of a run.
func (e *env) sustained(ctx context.Context, cfg config, res *Result) error {
	phase := peerkit.Sustained{Key: res.Key, Noun: "run", Clients: cfg.clients, Duration: cfg.duration, Cap: cfg.runs}
	lat, elapsed, err := phase.Run(ctx, cfg.log, func(ctx context.Context) (time.Duration, error) {
		return e.timed(ctx, "Sequential", 1)
	})
	if err != nil {
		return err
	}
	res.Runs = len(lat)
	res.Clients = cfg.clients
	res.Figure = fmt.Sprintf("sustained, %d clients, 1-step runs", cfg.clients)
	res.StepsPerSec = float64(len(lat)) / elapsed.Seconds()
	res.P50Ms, res.P99Ms = peerkit.Percentiles(lat)
	res.MaxMs = peerkit.Ms(slices.Max(lat))
	return nil
}
