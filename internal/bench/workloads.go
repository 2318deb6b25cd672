package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// The recipes. Every tool is a stubtools no-op (test.sleep sleeps), so
// the figures are Tollgate's overhead.
const (
	oneStepRecipe   = "a: notes.search {\"q\": \"x\"}\n"
	threeStepRecipe = "a: notes.search {\"q\": \"1\"}\nb: notes.search {\"q\": \"{a}\"}\nc: notes.search {\"q\": \"{b}\"}\n"
	sleepFanRecipe  = "together naps:\n  a: test.sleep {\"ms\": 400}\n  b: test.sleep {\"ms\": 270}\n  c: test.sleep {\"ms\": 80}\n"
	// approveRecipe parks on an `ask me` gate (the requester, a member,
	// approves it under the policy) before a side-effecting step.
	approveRecipe = "ask me:\n  go ahead?\nsave: notes.store {\"text\": \"bench\"}\n"
	// sleepFanSlowest is the slowest branch of sleepFanRecipe.
	sleepFanSlowest = 400 * time.Millisecond
)

func fanRecipe(n int) string {
	var b strings.Builder
	b.WriteString("together f:\n")
	for i := range n {
		fmt.Fprintf(&b, "  s%d: notes.search {\"q\": \"%d\"}\n", i, i)
	}
	return b.String()
}

// workload is one group of figures measured on a fresh world.
type workload struct {
	key  string
	what string // for -help
	run  func(b *bench, ctx context.Context) ([]Result, error)
}

var workloads = []workload{
	{"one-step", "1-step runs one after another (and their dispatch latency)", (*bench).oneStep},
	{"three-step", "3-step sequential runs (and their dispatch latency)", (*bench).threeStep},
	{"fan-10", "10-way fans of no-op steps", func(b *bench, ctx context.Context) ([]Result, error) { return b.fan(ctx, 10) }},
	{"fan-100", "100-way fans of no-op steps", func(b *bench, ctx context.Context) ([]Result, error) { return b.fan(ctx, 100) }},
	{"fan-sleep", "fans of branches sleeping 400, 270 and 80 ms", (*bench).sleepFan},
	{"approve", "approve → governed step leased", (*bench).approve},
	{"sustained", "-clients clients running 1-step runs back to back for -duration", (*bench).sustainedWorkload},
	{"inbox", "load -parked parked runs: Redis memory per run, then an inbox query", (*bench).inbox},
	{"routing", "routing an ask with 10 and with 10,000 people in the policy's domain", (*bench).routing},
}

// start starts a run as user through replica p.
func (w *world) start(ctx context.Context, p *plane, user, recipe string) (string, error) {
	resp, err := p.runs.StartRun(ctx, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: recipe}}, w.as(user))
	if err != nil {
		return "", fmt.Errorf("start: %w", err)
	}
	return resp.GetRun().GetId(), nil
}

// runToEnd starts recipe as user through replica p and watches the run
// there until it completes (its steps may run on any replica's executors).
func (w *world) runToEnd(ctx context.Context, p *plane, user, recipe string) (*tollgatev1.Run, error) {
	id, err := w.start(ctx, p, user, recipe)
	if err != nil {
		return nil, err
	}
	stream, err := p.runs.WatchRun(ctx, &tollgatev1.WatchRunRequest{RunId: id}, w.as(user))
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	return until(stream, tollgatev1.RunState_RUN_STATE_COMPLETE)
}

// until reads a run's watch stream until the run is in state.
func until(stream tollgatev1.RunService_WatchRunClient, state tollgatev1.RunState) (*tollgatev1.Run, error) {
	for {
		ev, err := stream.Recv()
		if err != nil {
			return nil, fmt.Errorf("watch: %w", err)
		}
		r := ev.GetEvent().GetRun()
		switch {
		case r == nil:
		case r.GetState() == state:
			return r, nil
		case r.GetState() >= tollgatev1.RunState_RUN_STATE_COMPLETE:
			return nil, fmt.Errorf("run %s ended %v: %s", r.GetId(), r.GetState(), r.GetStateReason())
		}
	}
}

// dispatchTimes are, for a run of steps one after another, each step's
// time from runnable to leased: a step becomes runnable in the commit
// that finishes the one before it (the first when the run is created),
// and LeasedAt is when the executor's ack reached the control plane.
// cross holds those of the steps whose executor is on another replica
// than p, the one the run was started through.
func (w *world) dispatchTimes(p *plane, r *tollgatev1.Run) (all, cross []time.Duration) {
	queued := r.GetCreatedAt().AsTime()
	for _, s := range r.GetSteps() {
		as := s.GetAttempts()
		if len(as) == 0 {
			continue
		}
		if a := as[0]; a.GetLeasedAt() != nil {
			d := a.GetLeasedAt().AsTime().Sub(queued)
			all = append(all, d)
			if w.elsewhere(p, a.GetExecutor()) {
				cross = append(cross, d)
			}
		}
		if f := as[len(as)-1].GetFinishedAt(); f != nil {
			queued = f.AsTime()
		}
	}
	return all, cross
}

// crossSteps counts r's steps whose first attempt ran on an executor of
// another replica than p.
func (w *world) crossSteps(p *plane, r *tollgatev1.Run) int {
	n := 0
	for _, s := range r.GetSteps() {
		if as := s.GetAttempts(); len(as) > 0 && w.elsewhere(p, as[0].GetExecutor()) {
			n++
		}
	}
	return n
}

// sequential runs recipe n times one after another, run i through
// replica i mod Replicas; start → complete times and the dispatch times
// of every step.
func (b *bench) sequential(ctx context.Context, w *world, key, recipe string, n int) (lat, dispatch, cross []time.Duration, err error) {
	tick := b.ticker(key, n)
	for i := range n {
		t0 := time.Now()
		r, err := w.runToEnd(ctx, w.plane(i), "alice", recipe)
		if err != nil {
			return nil, nil, nil, err
		}
		lat = append(lat, time.Since(t0))
		all, c := w.dispatchTimes(w.plane(i), r)
		dispatch, cross = append(dispatch, all...), append(cross, c...)
		tick(i + 1)
	}
	return lat, dispatch, cross, nil
}

func (b *bench) oneStep(ctx context.Context) ([]Result, error) {
	return b.sequentialWorkload(ctx, "one-step", oneStepRecipe)
}

func (b *bench) threeStep(ctx context.Context) ([]Result, error) {
	return b.sequentialWorkload(ctx, "three-step", threeStepRecipe)
}

func (b *bench) sequentialWorkload(ctx context.Context, key, recipe string) ([]Result, error) {
	w, err := b.world(ctx, worldConfig{})
	if err != nil {
		return nil, err
	}
	defer w.close()
	t0 := time.Now()
	var lat, dispatch, cross []time.Duration
	err = b.profiled(key, w, func() (err error) {
		lat, dispatch, cross, err = b.sequential(ctx, w, key, recipe, b.cfg.n)
		return err
	})
	if err != nil {
		return nil, err
	}
	b.dispatch = append(b.dispatch, dispatch...)
	b.dispatchCross = append(b.dispatchCross, cross...)
	return []Result{latencyResult(key, lat, time.Since(t0))}, nil
}

func (b *bench) fan(ctx context.Context, n int) ([]Result, error) {
	key := fmt.Sprintf("fan-%d", n)
	w, err := b.world(ctx, worldConfig{})
	if err != nil {
		return nil, err
	}
	defer w.close()
	t0 := time.Now()
	var lat, steps, cross []time.Duration
	err = b.profiled(key, w, func() (err error) {
		lat, steps, cross, err = b.sequential(ctx, w, key, fanRecipe(n), b.cfg.n)
		return err
	})
	if err != nil {
		return nil, err
	}
	res := latencyResult(key, lat, time.Since(t0))
	if len(w.planes) > 1 {
		// Only the counts: a fan's steps are not one after another, so
		// dispatchTimes' durations mean nothing here.
		res.Extra = map[string]float64{"cross_replica_steps": float64(len(cross)), "steps": float64(len(steps))}
	}
	return []Result{res}, nil
}

// sleepFan: wall ÷ slowest branch, as the engine figures a fan (the fan
// span's wall_ms ÷ branch_max_ms): from the first branch runnable (the
// run's creation) to the last finished, over the longest lease → finish.
func (b *bench) sleepFan(ctx context.Context) ([]Result, error) {
	w, err := b.world(ctx, worldConfig{})
	if err != nil {
		return nil, err
	}
	defer w.close()
	t0 := time.Now()
	var ratios, walls []float64
	tick := b.ticker("fan-sleep", b.cfg.nSleep)
	err = b.profiled("fan-sleep", w, func() error {
		for i := range b.cfg.nSleep {
			r, err := w.runToEnd(ctx, w.plane(i), "alice", sleepFanRecipe)
			if err != nil {
				return err
			}
			wall, slowest, err := fanFigures(r)
			if err != nil {
				return err
			}
			ratios = append(ratios, float64(wall)/float64(slowest))
			walls = append(walls, ms(wall))
			tick(i + 1)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res := Result{Key: "fan-sleep", Kind: kindRatio, Runs: len(ratios), Value: quantile(ratios, 0.5), MaxValue: quantile(ratios, 1),
		P50Ms: quantile(walls, 0.5), P99Ms: quantile(walls, 0.99), MaxMs: quantile(walls, 1), Seconds: time.Since(t0).Seconds()}
	return []Result{res}, nil
}

// fanFigures is a finished fan's wall clock (run created → last branch
// finished) and its slowest branch (lease → finish).
func fanFigures(r *tollgatev1.Run) (wall, slowest time.Duration, err error) {
	start := r.GetCreatedAt().AsTime()
	var end time.Time
	for _, s := range r.GetSteps() {
		for _, a := range s.GetAttempts() {
			if a.GetLeasedAt() == nil || a.GetFinishedAt() == nil {
				continue
			}
			f := a.GetFinishedAt().AsTime()
			slowest = max(slowest, f.Sub(a.GetLeasedAt().AsTime()))
			if f.After(end) {
				end = f
			}
		}
	}
	// A branch's lease is stamped when its ack reaches the control plane,
	// its finish as the executor reports it: on one machine they can be a
	// little less apart than the sleep, never a lot.
	if slowest < sleepFanSlowest/2 {
		return 0, 0, fmt.Errorf("run %s: the slowest branch took %v for a %v sleep", r.GetId(), slowest, sleepFanSlowest)
	}
	return end.Sub(start), slowest, nil
}

// approve: a run parks on its gate; once the watch shows it parked, its
// requester approves; measured from just before Decide is sent to the
// governed step's lease reaching the control plane (its LeasedAt, the §12
// figure), and to the tool call beginning on the executor (what Temporal's
// "signal sent → activity started" measures) and to completion.
func (b *bench) approve(ctx context.Context) ([]Result, error) {
	calls := &callTimes{at: map[string]time.Time{}}
	w, err := b.world(ctx, worldConfig{OnCall: calls.record})
	if err != nil {
		return nil, err
	}
	defer w.close()
	t0 := time.Now()
	var leased, called, done []time.Duration
	cross := 0 // governed steps an executor of another replica than the approver's ran
	tick := b.ticker("approve", b.cfg.n)
	err = b.profiled("approve", w, func() error {
		for i := range b.cfg.n {
			l, c, d, elsewhere, err := approveOnce(ctx, w, w.plane(i), w.plane(i+1), calls)
			if err != nil {
				return err
			}
			if elsewhere {
				cross++
			}
			leased, called, done = append(leased, l), append(called, c), append(done, d)
			tick(i + 1)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res := latencyResult("approve", leased, time.Since(t0))
	res.Extra = map[string]float64{
		"decide_to_tool_call_p50_ms": msQuantile(called, 0.5), "decide_to_tool_call_p99_ms": msQuantile(called, 0.99),
		"decide_to_complete_p50_ms": msQuantile(done, 0.5), "decide_to_complete_p99_ms": msQuantile(done, 0.99),
	}
	if len(w.planes) > 1 {
		res.Extra["cross_replica_steps"] = float64(cross)
	}
	return []Result{res}, nil
}

// approveOnce starts a run of approveRecipe through replica on, waits on
// its watch stream there until it parks, approves its ask through replica
// by (another one, when there are several) and watches it complete. It
// returns the times from just before Decide was sent to the governed
// step's LeasedAt, to the tool call beginning, and to the run complete,
// and whether an executor of another replica than by ran that step.
func approveOnce(ctx context.Context, w *world, on, by *plane, calls *callTimes) (leased, called, done time.Duration, elsewhere bool, err error) {
	id, err := w.start(ctx, on, "alice", approveRecipe)
	if err != nil {
		return 0, 0, 0, false, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := on.runs.WatchRun(ctx, &tollgatev1.WatchRunRequest{RunId: id}, w.as("alice"))
	if err != nil {
		return 0, 0, 0, false, fmt.Errorf("watch: %w", err)
	}
	parked, err := until(stream, tollgatev1.RunState_RUN_STATE_PARKED)
	if err != nil {
		return 0, 0, 0, false, err
	}
	if len(parked.GetAsks()) == 0 {
		return 0, 0, 0, false, fmt.Errorf("run %s parked with no ask", id)
	}
	shown, err := by.asks.GetAsk(ctx, &tollgatev1.GetAskRequest{AskId: parked.GetAsks()[0].GetId()}, w.as("alice"))
	if err != nil {
		return 0, 0, 0, false, fmt.Errorf("read the ask: %w", err)
	}
	sent := time.Now()
	_, err = by.asks.Decide(ctx, &tollgatev1.DecideRequest{AskId: parked.GetAsks()[0].GetId(), ExpectedPayloadDigest: shown.GetAsk().GetPayloadDigest(), ExpectedEvidenceDigest: shown.GetAsk().GetEvidenceDigest(),
		Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}}, w.as("alice"))
	if err != nil {
		return 0, 0, 0, false, fmt.Errorf("approve: %w", err)
	}
	r, err := until(stream, tollgatev1.RunState_RUN_STATE_COMPLETE)
	if err != nil {
		return 0, 0, 0, false, err
	}
	done = time.Since(sent)
	var at *tollgatev1.Attempt
	for _, s := range r.GetSteps() {
		if s.GetStepId() == "save" && len(s.GetAttempts()) > 0 {
			at = s.GetAttempts()[0]
		}
	}
	c, ok := calls.take(id + "/save")
	if at.GetLeasedAt() == nil || !ok {
		return 0, 0, 0, false, fmt.Errorf("run %s: the governed step has no lease or no call", id)
	}
	return at.GetLeasedAt().AsTime().Sub(sent), c.Sub(sent), done, w.elsewhere(by, at.GetExecutor()), nil
}

// callTimes records when each tool call began, by idempotency key.
type callTimes struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (c *callTimes) record(_, _, key string) {
	now := time.Now()
	c.mu.Lock()
	if _, ok := c.at[key]; !ok { // a retry: the first call counts
		c.at[key] = now
	}
	c.mu.Unlock()
}

func (c *callTimes) take(key string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.at[key]
	delete(c.at, key)
	return t, ok
}

func (b *bench) sustainedWorkload(ctx context.Context) ([]Result, error) {
	res, err := b.sustained(ctx, "sustained", worldConfig{})
	if err != nil {
		return nil, err
	}
	return []Result{res, cpuPerRun(res)}, nil
}

// cpuPerRun is the figure that does not depend on the clients: what one
// 1-step run of the sustained phase cost the control plane, the executor
// and Redis, with the clients' share of the process's CPU left out.
func cpuPerRun(sustained Result) Result {
	x := sustained.Extra
	return Result{Key: "cpu-per-run", Kind: kindMicros, Runs: sustained.Runs, Clients: sustained.Clients, Seconds: sustained.Seconds,
		Value: x["tollgate_cpu_us_per_run"],
		Extra: map[string]float64{
			"control_plane_and_executor_us": x["go_cpu_us_per_run"] * (1 - x["client_cpu_share"]),
			"redis_us":                      x["redis_cpu_us_per_run"],
			"clients_us":                    x["go_cpu_us_per_run"] * x["client_cpu_share"],
		},
		Note: fmt.Sprintf("%.0f µs in the control plane and executor, %.0f µs in Redis; the clients took %.0f µs more (%.0f %% of the process, by profiler labels)",
			x["go_cpu_us_per_run"]*(1-x["client_cpu_share"]), x["redis_cpu_us_per_run"], x["go_cpu_us_per_run"]*x["client_cpu_share"], 100*x["client_cpu_share"]),
	}
}

// sustained: cfg.clients goroutines each run 1-step runs back to back for
// cfg.duration on one world; steps per second over the whole phase, the
// p50 and p99 of a run, and the CPU each run cost this process (clients,
// control plane and executors) and redis-server.
func (b *bench) sustained(ctx context.Context, phase string, wc worldConfig) (Result, error) {
	w, err := b.world(ctx, wc)
	if err != nil {
		return Result{}, err
	}
	defer w.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		lat      []time.Duration
		firstErr error
		done     atomic.Int64
		cross    atomic.Int64                          // runs whose step ran on another replica
		through  = make([]atomic.Int64, len(w.planes)) // runs by replica
	)
	var elapsed time.Duration
	var goCPU, redisCPU time.Duration
	var stats0, stats1 redisStats
	split, err := b.profiledSplit(phase, w, true, func() error {
		var err error
		if stats0, err = w.redisStats(); err != nil {
			return err
		}
		goCPU0, redisCPU0 := processCPU(), w.redisCPU()
		start := time.Now()
		end := start.Add(b.cfg.duration)
		stopProgress := b.every(5*time.Second, func() {
			b.progress("%s: %d runs in %.0f s", phase, done.Load(), time.Since(start).Seconds())
		})
		defer stopProgress()
		var wg sync.WaitGroup
		for c := range b.cfg.clients {
			p, count := w.plane(c), &through[c%len(w.planes)] // client c keeps to replica c mod Replicas
			wg.Go(func() {
				asClient(ctx, func(ctx context.Context) {
					for time.Now().Before(end) {
						t0 := time.Now()
						r, err := w.runToEnd(ctx, p, "alice", oneStepRecipe)
						if err != nil {
							mu.Lock()
							if firstErr == nil && ctx.Err() == nil {
								firstErr = err
							}
							mu.Unlock()
							cancel()
							return
						}
						d := time.Since(t0)
						done.Add(1)
						count.Add(1)
						if w.crossSteps(p, r) > 0 {
							cross.Add(1)
						}
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}
				})
			})
		}
		wg.Wait()
		elapsed = time.Since(start)
		goCPU, redisCPU = processCPU()-goCPU0, w.redisCPU()-redisCPU0
		if firstErr != nil {
			return firstErr
		}
		stats1, err = w.redisStats()
		return err
	})
	if err != nil {
		return Result{}, err
	}
	if len(lat) == 0 {
		return Result{}, errors.New("sustained: no run completed")
	}
	res := latencyResult("sustained", lat, elapsed)
	res.Kind = kindThroughput
	res.Clients = b.cfg.clients
	res.StepsPerSec = float64(len(lat)) / elapsed.Seconds()
	res.Extra = map[string]float64{
		"go_cpu_us_per_run":    float64(goCPU.Microseconds()) / float64(len(lat)),
		"redis_cpu_us_per_run": float64(redisCPU.Microseconds()) / float64(len(lat)),
		// Tollgate's own CPU per run: the process's less the clients'
		// share (cpusplit.go), plus Redis's.
		"client_cpu_share":        split.ClientShare(),
		"tollgate_cpu_us_per_run": (float64(goCPU.Microseconds())*(1-split.ClientShare()) + float64(redisCPU.Microseconds())) / float64(len(lat)),
		"go_cores":                goCPU.Seconds() / elapsed.Seconds(),
		"redis_cores":             redisCPU.Seconds() / elapsed.Seconds(),
		"replicas":                float64(len(w.planes)),
		"cross_replica_runs":      float64(cross.Load()),
	}
	if len(w.planes) > 1 {
		for i := range through {
			res.Extra[fmt.Sprintf("replica_%d_runs", i)] = float64(through[i].Load())
		}
	}
	res.Note = redisPerRun(stats0, stats1, len(lat), res.Extra)
	if subs, err := w.hintSubscribers(); err == nil {
		res.Extra["hint_subscribers"] = float64(subs)
	}
	return res, nil
}

// processCPU is this process's user + system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU is redis-server's CPU time, or 0 if it cannot be read.
func (w *world) redisCPU() time.Duration {
	d, _ := w.redis.CPU()
	return d
}

// inbox loads cfg.parked parked runs through the API (StartRun of a
// recipe that asks its requester first), spread over cfg.people people,
// with cfg.clients loaders; Redis's used_memory growth per run is the
// memory figure. Then, once Redis has finished any append-only-file
// rewrite the load set off, one person's inbox (ListAsks, pending, 50 a
// page) is queried cfg.inboxQueries times.
func (b *bench) inbox(ctx context.Context) ([]Result, error) {
	users := make([]string, b.cfg.people)
	for i := range users {
		users[i] = fmt.Sprintf("u%03d", i)
	}
	w, err := b.world(ctx, worldConfig{Users: users})
	if err != nil {
		return nil, err
	}
	defer w.close()
	before, err := w.usedMemory()
	if err != nil {
		return nil, err
	}
	n := b.cfg.parked
	t0 := time.Now()
	var sample string
	if err := b.profiled("parked-load", w, func() (err error) { sample, err = b.load(ctx, w, users, n); return err }); err != nil {
		return nil, err
	}
	loaded := time.Since(t0)
	after, err := w.usedMemory()
	if err != nil {
		return nil, err
	}
	perRun := float64(after-before) / float64(n)
	b.progress("inbox: %d parked runs in %.1f s (%.0f/s), %.0f B of Redis memory each", n, loaded.Seconds(), float64(n)/loaded.Seconds(), perRun)
	if err := w.settle(ctx); err != nil {
		return nil, err
	}
	mem := Result{Key: "parked-memory", Kind: kindBytes, Runs: n, Value: perRun, Seconds: loaded.Seconds(),
		Extra: map[string]float64{"parked_runs": float64(n), "loaded_runs_per_sec": float64(n) / loaded.Seconds()}}
	own, what, err := w.keysOf(sample)
	if err != nil {
		return nil, err
	}
	mem.Note = "one run's keys: " + strings.Join(what, "; ")
	var sum float64
	for kind, bytes := range own {
		mem.Extra["own_"+kind+"_bytes"] = float64(bytes)
		sum += float64(bytes)
	}
	mem.Extra["indexes_and_keyspace_bytes"] = perRun - sum

	who := users[7]
	people := len(users)
	want := min(50, n/people+boolInt(n%people > 7))
	var lat []time.Duration
	t1 := time.Now()
	tick := b.ticker("inbox", b.cfg.inboxQueries)
	err = b.profiled("inbox", w, func() error {
		for i := range b.cfg.inboxQueries {
			q0 := time.Now()
			resp, err := w.plane(i).asks.ListAsks(ctx, &tollgatev1.ListAsksRequest{PageSize: 50}, w.as(who))
			if err != nil {
				return err
			}
			lat = append(lat, time.Since(q0))
			if got := len(resp.GetItems()); got != want {
				return fmt.Errorf("%s sees %d asks, want %d", who, got, want)
			}
			tick(i + 1)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	inbox := latencyResult("inbox", lat, time.Since(t1))
	inbox.Extra = map[string]float64{"parked_runs": float64(n), "page_size": 50, "people": float64(people), "asks_per_person": float64(n / people)}
	return []Result{mem, inbox}, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// load starts n runs of approveRecipe, each as the next of users, with
// cfg.clients loaders, and checks that each has parked (StartRun answers
// once the create is durable; a run whose first phase is its ask is
// parked by then). It returns the id of one of them.
func (b *bench) load(ctx context.Context, w *world, users []string, n int) (string, error) {
	var sample atomic.Value
	var next, done atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var once sync.Once
	var firstErr error
	start := time.Now()
	stopProgress := b.every(5*time.Second, func() {
		b.progress("inbox: %d/%d parked runs in %.0f s", done.Load(), n, time.Since(start).Seconds())
	})
	defer stopProgress()
	var wg sync.WaitGroup
	for range b.cfg.clients {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				resp, err := w.plane(int(i)).runs.StartRun(ctx, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: approveRecipe}},
					w.as(users[i%int64(len(users))]))
				if err == nil && resp.GetRun().GetState() != tollgatev1.RunState_RUN_STATE_PARKED {
					err = fmt.Errorf("run %s is %v after StartRun, not parked", resp.GetRun().GetId(), resp.GetRun().GetState())
				}
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("load: %w", err); cancel() })
					return
				}
				if i == int64(n/2) {
					sample.Store(resp.GetRun().GetId())
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	id, _ := sample.Load().(string)
	return id, firstErr
}

// keysOf finds the keys whose names hold runID (SCAN) and sums their
// MEMORY USAGE by kind, the part of the name before the id (run, journal,
// ask): what one parked run holds of its own, apart from index entries.
// It also says what is in them: for a hash its largest fields, for a list
// its records, with their sizes.
func (w *world) keysOf(runID string) (map[string]int64, []string, error) {
	out := map[string]int64{}
	var what []string
	cursor := "0"
	for {
		reply, err := w.redis.Do("SCAN", cursor, "MATCH", "*"+runID+"*", "COUNT", "10000")
		if err != nil {
			return nil, nil, fmt.Errorf("scan: %w", err)
		}
		lines := strings.Split(reply, "\n")
		cursor = lines[0]
		for _, key := range lines[1:] {
			if key == "" {
				continue
			}
			n, err := w.redisInt("MEMORY", "USAGE", key, "SAMPLES", "0")
			if err != nil {
				return nil, nil, err
			}
			name, _, _ := strings.Cut(key, runID)
			parts := strings.Split(strings.TrimSuffix(name, ":"), ":")
			kind := parts[len(parts)-1]
			out[kind] += n
			desc, err := w.describe(key)
			if err != nil {
				return nil, nil, err
			}
			what = append(what, fmt.Sprintf("%s (%s B): %s", kind, thousands(float64(n)), desc))
		}
		if cursor == "0" {
			slices.Sort(what)
			return out, what, nil
		}
	}
}

// describe says what a hash or list key holds.
func (w *world) describe(key string) (string, error) {
	typ, err := w.redis.Do("TYPE", key)
	if err != nil {
		return "", err
	}
	switch typ {
	case "hash":
		fields, err := w.redis.Do("HKEYS", key)
		if err != nil {
			return "", err
		}
		type field struct {
			name string
			n    int64
		}
		var fs []field
		var total int64
		for _, f := range strings.Split(fields, "\n") {
			n, err := w.redisInt("HSTRLEN", key, f)
			if err != nil {
				return "", err
			}
			fs = append(fs, field{f, n})
			total += n + int64(len(f))
		}
		slices.SortFunc(fs, func(a, b field) int { return int(b.n - a.n) })
		var top []string
		for _, f := range fs[:min(3, len(fs))] {
			top = append(top, fmt.Sprintf("%s %d B", f.name, f.n))
		}
		return fmt.Sprintf("a hash of %d fields, %s B of names and values; largest %s", len(fs), thousands(float64(total)), strings.Join(top, ", ")), nil
	case "list":
		items, err := w.redis.Do("LRANGE", key, "0", "-1")
		if err != nil {
			return "", err
		}
		recs := strings.Split(items, "\n")
		return fmt.Sprintf("a list of %d records, %s B", len(recs), thousands(float64(len(items)-len(recs)+1))), nil
	}
	return "a " + typ, nil
}

func (w *world) redisInt(args ...string) (int64, error) {
	reply, err := w.redis.Do(args...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	var n int64
	if _, err := fmt.Sscan(reply, &n); err != nil {
		return 0, fmt.Errorf("%s: %q", strings.Join(args, " "), reply)
	}
	return n, nil
}

// usedMemory is Redis's used_memory.
func (w *world) usedMemory() (int64, error) {
	info, err := w.redis.Info("memory")
	if err != nil {
		return 0, err
	}
	var n int64
	if _, err := fmt.Sscan(info["used_memory"], &n); err != nil {
		return 0, fmt.Errorf("INFO memory used_memory=%q: %w", info["used_memory"], err)
	}
	return n, nil
}

// settle waits until Redis has no background child (the append-only file
// rewrite that a bulk load sets off), so queries are timed in steady state.
func (w *world) settle(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		info, err := w.redis.Info("persistence")
		if err != nil {
			return err
		}
		if info["aof_rewrite_in_progress"] != "1" && info["aof_rewrite_scheduled"] != "1" && info["rdb_bgsave_in_progress"] != "1" {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("redis is still rewriting its append-only file after 10 minutes")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
