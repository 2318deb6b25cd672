package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/tollgate-dev/tollgate/bench/peers/peerkit"
)

// config is what the flags set.
type config struct {
	jsonPath, mdPath  string
	srv               server
	n                 int           // iterations of each latency workload
	duration          time.Duration // sustained phase length
	clients           int           // sustained concurrent clients
	runs              int           // cap on sustained runs (0: none)
	warmup            int           // 1-step jobs before each workload, not counted
	only              string        // run one workload (by key)
	maxWorkers        int           // the default queue's MaxWorkers (0: clients)
	maxConns          int           // the pgx pool's size
	fetchCooldown     time.Duration // River's FetchCooldown (0: its default)
	fetchPollInterval time.Duration // River's FetchPollInterval (0: its default)
	log               *peerkit.Progress
}

// jobTimeout bounds the wait for one timed job (or chain, or fan): a job
// that fails is retried by River after a backoff of seconds, which would
// otherwise hang the run.
const jobTimeout = 60 * time.Second

// Run parses args, runs every workload against a fresh database and River
// client each, and writes the report. Progress goes to stderr.
func Run(ctx context.Context, args []string, stderr io.Writer) error {
	cfg := config{log: peerkit.NewProgress(stderr, "river")}
	var pg string
	fs := flag.NewFlagSet("river", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.jsonPath, "json", "", "write the JSON report to `file` (- for stdout)")
	fs.StringVar(&cfg.mdPath, "md", "", "write the Markdown table to `file` (- for stdout)")
	fs.StringVar(&pg, "pg", peerkit.DefaultPG, "PostgreSQL: a connection string to its admin database; a fresh database is created beside it for each workload and dropped after")
	fs.IntVar(&cfg.n, "n", 200, "iterations of each latency workload")
	fs.DurationVar(&cfg.duration, "duration", 60*time.Second, "length of the sustained phase")
	fs.IntVar(&cfg.clients, "clients", 64, "concurrent clients in the sustained phase")
	fs.IntVar(&cfg.runs, "runs", 0, "stop the sustained phase after this many jobs as well (0: duration only)")
	fs.IntVar(&cfg.warmup, "warmup", 3, "uncounted 1-step jobs on each fresh client")
	fs.IntVar(&cfg.maxWorkers, "max-workers", 0, "MaxWorkers of the default queue (River has no default for it; 0: -clients, and at least 100 for the 100-way fan's sake)")
	fs.IntVar(&cfg.maxConns, "max-conns", 20, "size of the pgx pool the client and the workers share (pgxpool's default, 4, would serialise 64 clients on 4 transactions)")
	fs.DurationVar(&cfg.fetchCooldown, "fetch-cooldown", 0, "River's FetchCooldown (0: River's default, 100ms; minimum 1ms)")
	fs.DurationVar(&cfg.fetchPollInterval, "fetch-poll-interval", 0, "River's FetchPollInterval (0: River's default, 1s)")
	fs.StringVar(&cfg.only, "only", "", "run only this workload: dispatch, one-step, three-step, fan-10, fan-100, sustained")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if cfg.n < 1 || cfg.clients < 1 || cfg.duration <= 0 || cfg.warmup < 0 || cfg.maxWorkers < 0 || cfg.maxConns < 2 {
		return errors.New("-n and -clients must be ≥ 1, -duration > 0, -warmup and -max-workers ≥ 0, -max-conns ≥ 2")
	}
	if cfg.maxWorkers == 0 {
		cfg.maxWorkers = max(cfg.clients, 100)
	}
	if cfg.jsonPath == "" && cfg.mdPath == "" {
		cfg.mdPath = "-"
	}
	if cfg.only != "" && !slices.ContainsFunc(workloads, func(w workload) bool { return w.key == cfg.only }) {
		return fmt.Errorf("unknown workload %q", cfg.only)
	}
	cfg.srv = server{peerkit.PG{Admin: pg, Prefix: dbPrefix}}

	if dropped, err := cfg.srv.DropStale(ctx); err != nil {
		return fmt.Errorf("PostgreSQL at -pg %q: %w", pg, err)
	} else if len(dropped) > 0 {
		cfg.log.Printf("dropped %d databases left by earlier runs: %v", len(dropped), dropped)
	}
	settings, err := cfg.srv.Settings(ctx)
	if err != nil {
		return err
	}
	rep := newReport(cfg, settings)
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
	figure string
	goal   string // Tollgate's goal for it (DESIGN.md §12), for the reader
	run    func(e *env, ctx context.Context, cfg config, res *Result) error
}

var workloads = []workload{
	{"dispatch", "job committed → Work called", "p50 ≤ 1 ms, p99 ≤ 5 ms", (*env).dispatch},
	{"one-step", "1-step job, insert → completion committed", "—", func(e *env, ctx context.Context, cfg config, res *Result) error {
		return e.latency(ctx, cfg, res, 1, 1)
	}},
	{"three-step", "3-step chain (each step inserts the next), insert → last completion committed", "p50 ≤ 5 ms", func(e *env, ctx context.Context, cfg config, res *Result) error {
		return e.latency(ctx, cfg, res, 3, 1)
	}},
	{"fan-10", "10 jobs inserted at once, insert → all completions committed", "p50 ≤ 10 ms", func(e *env, ctx context.Context, cfg config, res *Result) error {
		return e.latency(ctx, cfg, res, 1, 10)
	}},
	{"fan-100", "100 jobs inserted at once, insert → all completions committed", "p50 ≤ 50 ms", func(e *env, ctx context.Context, cfg config, res *Result) error {
		return e.latency(ctx, cfg, res, 1, 100)
	}},
	{"sustained", "sustained, 64 clients, 1-step jobs", "≥ 5,000 steps/s, p99 ≤ 100 ms", (*env).sustained},
}

// env is one fresh database with River's schema, one pool and one River
// client that both inserts and works, like Tollgate's benchWorld (one
// control plane, one executor, one client connection).
type env struct {
	srv    server
	db     string
	pool   *pgxpool.Pool
	client *river.Client[pgxTx]
	waits  *waiters
	subs   *subscription
	log    *riverLog
}

func runWorkload(ctx context.Context, cfg config, w workload) (res Result, err error) {
	res = Result{Key: w.key, Figure: w.figure, Goal: w.goal}
	t0 := time.Now()
	log := &riverLog{peerkit.NewTally(cfg.log, w.key, "river")}
	e, err := start(ctx, cfg, w.key, log)
	if e != nil {
		defer func() {
			if stopErr := e.stop(); stopErr != nil && err == nil {
				err = stopErr
			}
		}()
	}
	if err != nil {
		return res, err
	}
	res.ServerStartMs = peerkit.Ms(time.Since(t0))
	cfg.log.Printf("%s: database %s ready in %.0f ms", w.key, e.db, res.ServerStartMs)
	for range cfg.warmup {
		if _, _, err := e.timed(ctx, 1, 1, false); err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
	}
	t1 := time.Now()
	if err := w.run(e, ctx, cfg, &res); err != nil {
		return res, err
	}
	res.Seconds = time.Since(t1).Seconds()
	res.Warnings, res.Errors, res.Log = log.Counts()
	cfg.log.Printf("%s: %s", w.key, res.summary())
	return res, nil
}

// start creates the database, migrates it with rivermigrate and starts a
// River client on it. On error the env returned (when not nil) holds what
// was set up, for stop.
func start(ctx context.Context, cfg config, key string, log *riverLog) (*env, error) {
	db, err := cfg.srv.CreateDB(ctx, key)
	if err != nil {
		return nil, err
	}
	e := &env{srv: cfg.srv, db: db, waits: newWaiters(), subs: newSubscription(), log: log}
	pc, err := cfg.srv.poolConfig(db, int32(cfg.maxConns))
	if err != nil {
		return e, err
	}
	if e.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return e, fmt.Errorf("pool: %w", err)
	}
	driver := riverpgxv5.New(e.pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: log.logger()})
	if err != nil {
		return e, fmt.Errorf("rivermigrate: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return e, fmt.Errorf("rivermigrate up: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &stepWorker{pool: e.pool, waits: e.waits})
	e.client, err = river.NewClient(driver, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.maxWorkers}},
		Workers:           workers,
		Logger:            log.logger(),
		FetchCooldown:     cfg.fetchCooldown,
		FetchPollInterval: cfg.fetchPollInterval,
	})
	if err != nil {
		return e, fmt.Errorf("river client: %w", err)
	}
	events, cancel := e.client.Subscribe(river.EventKindJobCompleted)
	e.subs.consume(events, cancel)
	if err := e.client.Start(ctx); err != nil {
		return e, fmt.Errorf("river client start: %w", err)
	}
	return e, nil
}

// stop stops the client (letting running jobs finish), closes the pool and
// drops the database.
func (e *env) stop() error {
	var errs []error
	if e.client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := e.client.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("river client stop: %w", err))
		}
		cancel()
	}
	e.subs.stop()
	if e.pool != nil {
		e.pool.Close()
	}
	if err := e.srv.DropDB(e.db); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// timed inserts width jobs of steps steps each (a chain when steps > 1, a
// fan when width > 1) and waits until the last completion is committed.
// It returns that time from just before the insert, and the dispatch
// latency of every step. track records the job for the subscription
// figure (1-step, width 1 only).
func (e *env) timed(ctx context.Context, steps, width int, track bool) (time.Duration, []time.Duration, error) {
	w := e.waits.add(width)
	defer e.waits.remove(w.id)
	t0 := time.Now()
	e.waits.runnable(w.id, t0)
	if width == 1 {
		res, err := e.client.Insert(ctx, stepArgs{Waiter: w.id, Left: steps - 1}, nil)
		if err != nil {
			return 0, nil, fmt.Errorf("insert: %w", err)
		}
		if track && steps == 1 {
			e.subs.track(res.Job.ID, t0)
		}
	} else {
		params := make([]river.InsertManyParams, width)
		for i := range params {
			params[i] = river.InsertManyParams{Args: stepArgs{Waiter: w.id, Left: steps - 1}}
		}
		if _, err := e.client.InsertMany(ctx, params); err != nil {
			return 0, nil, fmt.Errorf("insert many: %w", err)
		}
	}
	timeout := time.NewTimer(jobTimeout)
	defer timeout.Stop()
	select {
	case o := <-w.done:
		if o.err != nil {
			return 0, nil, o.err
		}
		return o.at.Sub(t0), e.waits.dispatches(w.id), nil
	case <-timeout.C:
		return 0, nil, fmt.Errorf("no completion %s after the insert (waiter %d)", jobTimeout, w.id)
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	}
}

// latency runs one shape cfg.n times, one after another.
func (e *env) latency(ctx context.Context, cfg config, res *Result, steps, width int) error {
	ds := make([]time.Duration, 0, cfg.n)
	var dispatch []time.Duration
	tick := cfg.log.Ticker(res.Key, cfg.n)
	for i := range cfg.n {
		d, disp, err := e.timed(ctx, steps, width, true)
		if err != nil {
			return err
		}
		ds = append(ds, d)
		dispatch = append(dispatch, disp...)
		tick(i + 1)
	}
	res.Runs = len(ds)
	res.P50Ms, res.P99Ms = peerkit.Percentiles(ds)
	res.MaxMs = peerkit.Ms(slices.Max(ds))
	p50, p99 := peerkit.Percentiles(dispatch)
	res.Extra = map[string]float64{"dispatch_p50_ms": p50, "dispatch_p99_ms": p99, "steps": float64(len(dispatch))}
	e.subs.report(res)
	return nil
}

// dispatch: cfg.n 1-step jobs one after another; each figure runs from just
// before the client's Insert (whose commit makes the job runnable) to the
// first line of the worker's Work. The client waits for the job's
// completion before inserting the next, as Tollgate's runs do.
func (e *env) dispatch(ctx context.Context, cfg config, res *Result) error {
	ds := make([]time.Duration, 0, cfg.n)
	var total []time.Duration
	tick := cfg.log.Ticker(res.Key, cfg.n)
	for i := range cfg.n {
		d, disp, err := e.timed(ctx, 1, 1, false)
		if err != nil {
			return err
		}
		if len(disp) != 1 {
			return fmt.Errorf("a 1-step job was worked %d times", len(disp))
		}
		ds = append(ds, disp[0])
		total = append(total, d)
		tick(i + 1)
	}
	res.Runs = len(ds)
	res.P50Ms, res.P99Ms = peerkit.Percentiles(ds)
	res.MaxMs = peerkit.Ms(slices.Max(ds))
	p50, p99 := peerkit.Percentiles(total)
	res.Extra = map[string]float64{"complete_p50_ms": p50, "complete_p99_ms": p99}
	return nil
}

// sustained: cfg.clients goroutines, each inserting 1-step jobs back to
// back and waiting for each to complete, until cfg.duration has passed (or
// cfg.runs jobs have started); jobs/s over the whole phase and the p99 of
// one job, insert → completion committed.
func (e *env) sustained(ctx context.Context, cfg config, res *Result) error {
	phase := peerkit.Sustained{Key: res.Key, Noun: "job", Clients: cfg.clients, Duration: cfg.duration, Cap: cfg.runs}
	lat, elapsed, err := phase.Run(ctx, cfg.log, func(ctx context.Context) (time.Duration, error) {
		d, _, err := e.timed(ctx, 1, 1, true)
		return d, err
	})
	if err != nil {
		return err
	}
	res.Runs = len(lat)
	res.Clients = cfg.clients
	res.Figure = fmt.Sprintf("sustained, %d clients, 1-step jobs", cfg.clients)
	res.StepsPerSec = float64(len(lat)) / elapsed.Seconds()
	res.P50Ms, res.P99Ms = peerkit.Percentiles(lat)
	res.MaxMs = peerkit.Ms(slices.Max(lat))
	res.Extra = map[string]float64{}
	e.subs.report(res)
	return nil
}
