package bench

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options are what the binary passes from its process.
type Options struct {
	Stdout, Stderr io.Writer
}

// config is what the flags set.
type config struct {
	jsonPath, mdPath string
	fsync            string
	n, nSleep        int
	warmup           int
	duration         time.Duration
	clients          int
	parked           int
	inboxQueries     int
	people           int
	replicas         int
	executors        int
	capacity         int
	only             []string
	cpuprofile       string
	dir              string

	peers bool
	peer  peerConfig // the peers' flags (peers.go)

	trace        bool
	traceSamples []float64 // one "on" run each, against one "off" run
}

const usage = `tollgate-bench measures the figures of DESIGN.md §12 (performance targets)
on a real redis-server (AOF on), a real control plane (as the binary runs it,
on the Redis store) and in-process executors over loopback gRPC with no-op
tools, and prints a Markdown table: figure, goal, measured, met.

Usage:
  tollgate-bench [flags]                    every workload (a few minutes)
  tollgate-bench -only sustained -cpuprofile cpu.out
  tollgate-bench -peers -md peers.md -json peers.json
                                            also the peers on the same workloads
                                            (Temporal's server and River, both on
                                            PostgreSQL), side by side with the ratios
  tollgate-bench -trace -only none          sustained with tracing off and on,
                                            exporting to a real Jaeger (make jaeger)
  tollgate-bench -replicas 3                three control planes on the one Redis,
                                            an executor on each, clients spread
                                            over them (make bench-replicas)

Take figures on a quiet machine: the report records the load average.

Workloads (-only):
%s
Flags:
`

// Run parses args, runs the workloads and writes the report.
func Run(ctx context.Context, args []string, o Options) error {
	cfg, err := parseFlags(args, o.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if cfg.trace {
		// Before minutes of measuring: can tracing be switched on at all?
		if err := tracingReady(ctx); err != nil {
			return fmt.Errorf("trace: %w", err)
		}
	}
	b := &bench{cfg: cfg, out: o.Stderr, began: time.Now(), others: map[string]float64{}, cpu: map[string][2]time.Duration{}, stats: map[string][2]redisStats{}}
	var peers []*peerRun
	if cfg.peers {
		// Saved reports first: a bad file fails before minutes of measuring.
		if peers, err = b.savedPeers(); err != nil {
			return err
		}
	}
	rep, err := b.run(ctx)
	if err != nil {
		return err
	}
	// A peer that fails is shown as failed, and its error returned once
	// Tollgate's figures are written.
	var peersErr error
	if cfg.peers {
		peersErr = b.runPeers(ctx, peers)
	}
	var md string
	var js []byte
	if cfg.peers {
		cmp := compare(rep, peers)
		md = rep.Markdown() + "\n" + cmp.Markdown()
		js, err = cmp.JSON()
	} else {
		md = rep.Markdown()
		js, err = rep.JSON()
	}
	if err != nil {
		return err
	}
	fmt.Fprint(o.Stdout, md)
	if cfg.mdPath != "" {
		if err := os.WriteFile(cfg.mdPath, []byte(md), 0o644); err != nil {
			return err
		}
	}
	if cfg.jsonPath != "" {
		if err := os.WriteFile(cfg.jsonPath, js, 0o644); err != nil {
			return err
		}
	}
	return peersErr
}

func workloadKeys() []string {
	keys := make([]string, len(workloads))
	for i, w := range workloads {
		keys[i] = w.key
	}
	return keys
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	var only string
	fs := flag.NewFlagSet("tollgate-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		var ws strings.Builder
		for _, w := range workloads {
			fmt.Fprintf(&ws, "  %-11s %s\n", w.key, w.what)
		}
		fmt.Fprintf(&ws, "  %-11s %s\n", "none", "none of them (with -trace: only the tracing runs)")
		fmt.Fprintf(stderr, usage, ws.String())
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.jsonPath, "json", "", "also write the report as JSON to `file`")
	fs.StringVar(&cfg.mdPath, "md", "", "also write the Markdown table (always printed on stdout) to `file`")
	fs.StringVar(&cfg.fsync, "fsync", "everysec", "redis-server --appendfsync: everysec or always (AOF is on either way)")
	fs.IntVar(&cfg.n, "n", 200, "runs of each latency workload (one-step, three-step, fans, approve)")
	fs.IntVar(&cfg.nSleep, "n-sleep", 10, "runs of the sleeping fan (each takes ~400 ms)")
	fs.IntVar(&cfg.warmup, "warmup", 3, "uncounted 1-step runs on each fresh world")
	fs.DurationVar(&cfg.duration, "duration", 20*time.Second, "length of the sustained phase")
	fs.IntVar(&cfg.clients, "clients", 64, "concurrent clients in the sustained phase (and loaders of parked runs)")
	fs.IntVar(&cfg.parked, "parked", 100_000, "parked runs loaded for the memory and inbox figures (DESIGN.md's goal is stated at 1,000,000)")
	fs.IntVar(&cfg.inboxQueries, "inbox-queries", 1000, "inbox queries timed")
	fs.IntVar(&cfg.people, "people", 100, "people the parked runs belong to, each a member in the policy (an inbox holds -parked ÷ -people asks)")
	fs.IntVar(&cfg.replicas, "replicas", 1, "control plane replicas sharing the one Redis, each with its own listeners; clients are spread over them round-robin (a run approved through the next replica after the one it started on), executor i connects to replica i mod N")
	fs.IntVar(&cfg.executors, "executors", 1, "executors connected to the control planes (with -replicas and no -executors: one per replica)")
	fs.IntVar(&cfg.capacity, "capacity", 16, "leases each executor holds at once")
	fs.StringVar(&only, "only", "", "run only these workloads (comma-separated; see above)")
	fs.StringVar(&cfg.cpuprofile, "cpuprofile", "", "write a CPU profile of this process (clients, control plane, executors) during each timed phase to `prefix`.PHASE.pprof (PHASE: a workload, or parked-load); read several at once with go tool pprof -top FILES")
	fs.StringVar(&cfg.dir, "dir", "", "scratch directory for Redis's files and the keys (default: the system's temporary directory)")
	fs.BoolVar(&cfg.peers, "peers", false, "also run the peers, Temporal on PostgreSQL (go run -C -temporal-dir .) and River (go run -C -river-dir .), with the same -n, -duration, -clients and -warmup, and print them side by side")
	peerFlags(fs, &cfg.peer)
	fs.BoolVar(&cfg.trace, "trace", false, "also run the sustained workload with tracing off and on, exporting to a real Jaeger (bin/jaeger, make jaeger), and report the cost")
	cfg.traceSamples = []float64{1}
	fs.Func("trace-sample", "with -trace: the control plane's --trace-sample, or several separated by commas (one run with tracing on each, against the one with it off; default 1)", func(v string) error {
		var xs []float64
		for f := range strings.SplitSeq(v, ",") {
			x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || !(x > 0 && x <= 1) {
				return fmt.Errorf("%q is not a sample in (0, 1]", f)
			}
			xs = append(xs, x)
		}
		cfg.traceSamples = xs
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	executorsSet := false
	fs.Visit(func(f *flag.Flag) { executorsSet = executorsSet || f.Name == "executors" })
	if !executorsSet && cfg.replicas > 1 {
		cfg.executors = cfg.replicas
	}
	switch {
	case cfg.fsync != "everysec" && cfg.fsync != "always":
		return cfg, fmt.Errorf("-fsync %q: want everysec or always", cfg.fsync)
	case cfg.n < 1 || cfg.nSleep < 1 || cfg.clients < 1 || cfg.parked < 1 || cfg.inboxQueries < 1 || cfg.people < 8:
		return cfg, errors.New("-n, -n-sleep, -clients, -parked and -inbox-queries must be at least 1, -people at least 8")
	case cfg.duration <= 0 || cfg.warmup < 0:
		return cfg, errors.New("-duration must be positive and -warmup not negative")
	case cfg.executors < 1 || cfg.capacity < 1 || cfg.replicas < 1:
		return cfg, errors.New("-replicas, -executors and -capacity must be at least 1")
	}
	if err := cfg.peer.check(cfg.peers); err != nil {
		return cfg, err
	}
	if only != "" {
		for _, k := range strings.Split(only, ",") {
			k = strings.TrimSpace(k)
			if k != "none" && !slices.Contains(workloadKeys(), k) {
				return cfg, fmt.Errorf("-only %q: no such workload (%s, none)", k, strings.Join(workloadKeys(), ", "))
			}
			cfg.only = append(cfg.only, k)
		}
	}
	return cfg, nil
}

// bench is one invocation's state.
type bench struct {
	cfg      config
	out      io.Writer // progress
	began    time.Time
	dispatch []time.Duration // from the one-step and three-step runs
	// dispatchCross are those of dispatch whose executor is on another
	// replica than the one the run was started through.
	dispatchCross []time.Duration

	mu     sync.Mutex         // out, others, cpu
	others map[string]float64 // phase → cores other processes used
	// cpu is each phase's CPU time: this process's, and redis-server's.
	cpu map[string][2]time.Duration
	// stats are what Redis had done before and after each phase.
	stats map[string][2]redisStats
}

func (b *bench) selected(key string) bool {
	return len(b.cfg.only) == 0 || slices.Contains(b.cfg.only, key)
}

// run measures the selected workloads, each on a fresh world.
func (b *bench) run(ctx context.Context) (*Report, error) {
	rep := &Report{Program: "tollgate-bench", Replicas: b.cfg.replicas, Machine: thisMachine(), Date: time.Now().UTC().Format(time.RFC3339), LoadBefore: loadavg(),
		Params: map[string]any{"fsync": b.cfg.fsync, "n": b.cfg.n, "n_sleep": b.cfg.nSleep, "warmup": b.cfg.warmup,
			"duration": b.cfg.duration.String(), "clients": b.cfg.clients, "parked": b.cfg.parked, "inbox_queries": b.cfg.inboxQueries, "people": b.cfg.people,
			"replicas": b.cfg.replicas, "executors": b.cfg.executors, "capacity": b.cfg.capacity, "only": b.cfg.only, "trace": b.cfg.trace}}
	rep.Setup = b.setup()
	b.progress("machine: %s; load average %s", rep.Machine, rep.LoadBefore)
	for _, w := range workloads {
		if !b.selected(w.key) {
			continue
		}
		t0 := time.Now()
		res, err := w.run(b, ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w.key, err)
		}
		for i := range res {
			b.noteOthers(&res[i])
			b.noteCPU(&res[i])
			res[i].finish()
			b.progress("%s: %s (%.1f s)", res[i].Key, res[i].Measured, time.Since(t0).Seconds())
		}
		rep.Results = append(rep.Results, res...)
	}
	if len(b.dispatch) > 0 {
		d := latencyResult("dispatch", b.dispatch, 0)
		d.Note = "every step of the 1-step and 3-step runs"
		if b.cfg.replicas > 1 {
			d.Extra = map[string]float64{"cross_replica_steps": float64(len(b.dispatchCross))}
			if len(b.dispatchCross) > 0 {
				d.Extra["cross_replica_p50_ms"] = msQuantile(b.dispatchCross, 0.5)
				d.Extra["cross_replica_p99_ms"] = msQuantile(b.dispatchCross, 0.99)
			}
		}
		b.noteOthers(&d, "one-step", "three-step")
		d.finish()
		rep.Results = append(rep.Results, d)
	}
	if b.cfg.trace {
		res, err := b.traceCost(ctx)
		if err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		for i := range res {
			res[i].finish()
		}
		rep.Results = append(rep.Results, res...)
	}
	rep.sort()
	rep.WallSeconds = time.Since(b.began).Seconds()
	rep.LoadAfter = loadavg()
	return rep, nil
}

func (b *bench) setup() []string {
	c := b.cfg
	return []string{
		fmt.Sprintf("redis-server started by the bench for each workload: unix socket, `appendonly yes`, `appendfsync %s`", c.fsync),
		replicasLine(c.replicas),
		fmt.Sprintf("%d executor(s) of capacity %d in this process, connected over loopback gRPC with mTLS%s; tools are in-process no-ops (`internal/stubtools`), so the figures are Tollgate's overhead", c.executors, c.capacity,
			map[bool]string{true: ", executor i to replica i mod " + strconv.Itoa(c.replicas)}[c.replicas > 1]),
		clientsLine(c.replicas),
		fmt.Sprintf("n = %d per latency figure (%d for the sleeping fan), %d uncounted 1-step runs on each fresh world; sustained for %v with %d clients; %s parked runs of %d people for memory and inbox, %d inbox queries",
			c.n, c.nSleep, c.warmup, c.duration, c.clients, thousands(float64(c.parked)), c.people, c.inboxQueries),
		"percentiles: element int(q·(n−1)) of the sorted sample; timestamps of leases and finishes are the control plane's (the store's clock), others this process's",
	}
}

func replicasLine(n int) string {
	if n == 1 {
		return "the control plane as the binary runs it (`controlplane.Run` with `--redis`, the example policy, mTLS executor listener), in this process"
	}
	return fmt.Sprintf("**%d control plane replicas** on the one Redis, each as the binary runs it (`controlplane.Run` with the same flags: `--redis`, the example policy, its own API and mTLS executor listeners), all in this process (one Go runtime, one GC)", n)
}

func clientsLine(n int) string {
	if n == 1 {
		return "clients over loopback gRPC with bearer tokens: StartRun, then WatchRun until complete; one shared connection"
	}
	return fmt.Sprintf("clients over loopback gRPC with bearer tokens: StartRun, then WatchRun until complete, on one connection per replica; run i of a latency workload (and sustained client i, and loader and inbox query i) goes through replica i mod %d, and the approve workload approves (GetAsk, Decide) through the next replica after the one the run started and is watched on", n)
}

// world starts a fresh world with the bench's settings and warms it up.
func (b *bench) world(ctx context.Context, wc worldConfig) (*world, error) {
	dir, err := os.MkdirTemp(b.cfg.dir, "tollgate-bench-")
	if err != nil {
		return nil, err
	}
	wc.Dir, wc.Fsync, wc.Replicas, wc.Executors, wc.Capacity = dir, b.cfg.fsync, b.cfg.replicas, b.cfg.executors, b.cfg.capacity
	w, err := startWorld(ctx, wc)
	if err != nil {
		return nil, err
	}
	for i := range b.cfg.warmup {
		if _, err := w.runToEnd(ctx, w.plane(i), "alice", oneStepRecipe); err != nil {
			w.close()
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	return w, nil
}

// profiled runs a timed phase on w, under the CPU profiler with
// -cpuprofile, and records how many cores other processes kept busy
// meanwhile (the machine's busy time less this process's and Redis's).
func (b *bench) profiled(phase string, w *world, f func() error) error {
	_, err := b.profiledSplit(phase, w, false, f)
	return err
}

// profiledSplit is profiled that, with split, also says how the phase's
// CPU divides between the bench's clients and the rest (cpusplit.go).
func (b *bench) profiledSplit(phase string, w *world, split bool, f func() error) (cpuSplit, error) {
	stats0, statsErr := w.redisStats()
	busy0, self0, redis0 := machineBusy(), processCPU(), w.redisCPU()
	t0 := time.Now()
	defer func() {
		wall := time.Since(t0)
		self, redis := processCPU()-self0, w.redisCPU()-redis0
		others := (machineBusy() - busy0) - self - redis
		stats1, err := w.redisStats()
		b.mu.Lock()
		b.others[phase] = max(0, others.Seconds()/wall.Seconds())
		b.cpu[phase] = [2]time.Duration{self, redis}
		if statsErr == nil && err == nil {
			b.stats[phase] = [2]redisStats{stats0, stats1}
		}
		b.mu.Unlock()
	}()
	return b.profile(phase, split, f)
}

// profile runs f under a CPU profile when -cpuprofile asks for one (to
// PREFIX.PHASE.pprof) or split does, and with split returns how the
// profile's samples divide between the bench's clients and the rest
// (cpusplit.go).
func (b *bench) profile(phase string, split bool, f func() error) (cpuSplit, error) {
	if b.cfg.cpuprofile == "" && !split {
		return cpuSplit{}, f()
	}
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return cpuSplit{}, fmt.Errorf("cpu profile: %w", err)
	}
	ferr := f()
	pprof.StopCPUProfile()
	if ferr != nil {
		return cpuSplit{}, ferr
	}
	if b.cfg.cpuprofile != "" {
		path := b.cfg.cpuprofile + "." + phase + ".pprof"
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return cpuSplit{}, fmt.Errorf("cpu profile: %w", err)
		}
		b.progress("%s: CPU profile in %s", phase, path)
	}
	if !split {
		return cpuSplit{}, nil
	}
	return splitProfile(buf.Bytes())
}

// noteCPU records in r what its phase cost per sample (a run; a query
// for the inbox): this process's CPU and redis-server's, and the script
// calls (EVALSHA) and commands Redis ran, unless r says already
// (sustained counts only its timed runs).
func (b *bench) noteCPU(r *Result) {
	phase := r.Key
	if phase == "parked-memory" {
		phase = "parked-load"
	}
	b.mu.Lock()
	c, ok := b.cpu[phase]
	st, haveStats := b.stats[phase]
	b.mu.Unlock()
	if _, done := r.Extra["go_cpu_us_per_run"]; !ok || done || r.Runs < 1 {
		return
	}
	if r.Extra == nil {
		r.Extra = map[string]float64{}
	}
	r.Extra["go_cpu_us_per_op"] = float64(c[0].Microseconds()) / float64(r.Runs)
	r.Extra["redis_cpu_us_per_op"] = float64(c[1].Microseconds()) / float64(r.Runs)
	if haveStats {
		per := map[string]float64{}
		redisPerRun(st[0], st[1], r.Runs, per)
		r.Extra["redis_evalsha_per_op"] = per["redis_evalsha_per_run"]
		r.Extra["redis_calls_per_op"] = per["redis_calls_per_run"]
	}
}

// noteOthers records in r the most cores other processes used during the
// timed phases behind it (its own key's by default).
func (b *bench) noteOthers(r *Result, phases ...string) {
	if len(phases) == 0 {
		phases = []string{r.Key}
		if r.Key == "parked-memory" {
			phases = []string{"parked-load"}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range phases {
		if v, ok := b.others[p]; ok {
			if r.Extra == nil {
				r.Extra = map[string]float64{}
			}
			r.Extra["others_cores"] = max(r.Extra["others_cores"], v)
		}
	}
}

// machineBusy is the time every CPU of the machine spent on anything but
// idling or waiting for I/O, from /proc/stat; 0 where there is none.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0
		}
		if i != 3 && i != 4 && i < 8 { // not idle, iowait, guest, guest_nice
			busy += n
		}
	}
	return time.Duration(busy) * time.Second / 100 // USER_HZ
}

// progress writes a timed line on stderr.
func (b *bench) progress(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprintf(b.out, "tollgate-bench %6.1fs: "+format+"\n", append([]any{time.Since(b.began).Seconds()}, args...)...)
}

// ticker reports progress every tenth of n (and at least every 25).
func (b *bench) ticker(key string, n int) func(int) {
	step := max(1, min(25, n/10))
	return func(i int) {
		if i%step == 0 || i == n {
			b.progress("%s: %d/%d", key, i, n)
		}
	}
}

// every calls f every d until the returned stop is called.
func (b *bench) every(d time.Duration, f func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				f()
			case <-done:
				return
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}
