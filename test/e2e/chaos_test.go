package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/chaoscheck"
	"github.com/tollgate-dev/tollgate/internal/faultproxy"
	"github.com/tollgate-dev/tollgate/internal/faults"
	"github.com/tollgate-dev/tollgate/internal/redistest"
)

// The fault suite (issue 21): three replicas of one control plane on one
// redis-server (appendfsync always), two executors, four clients running a
// mixed workload through fault proxies, and a nemesis that, from a seed,
// kills, pauses and partitions them and arms crash points. When the time
// is up the faults heal, the runs settle, and chaoscheck judges the
// history and the state: a violation fails the test with its seed and the
// command that replays it.
//
// CHAOS_SEED (default: from the clock) and CHAOS_DURATION (default 45s)
// choose the schedule; `make chaos SEED=… DURATION=…` sets them.
// CHAOS_REPORT names a file the run's figures are appended to (one JSON
// line), for RELIABILITY.md.
func TestChaos(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	duration := 45 * time.Second
	if s := os.Getenv("CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("CHAOS_DURATION=%q: want a positive duration", s)
		}
		duration = d
	}
	replay := fmt.Sprintf("make chaos SEED=%d DURATION=%s", seed, duration)
	t.Logf("chaos: seed %d, %s of faults; replay with: %s", seed, duration, replay)

	s := newChaosSuite(t, seed)
	fig := s.run(duration)
	fig.Seed, fig.Duration = seed, duration.String()
	if f := os.Getenv("CHAOS_REPORT"); f != "" {
		b, _ := json.Marshal(fig)
		if out, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			out.Write(append(b, '\n'))
			out.Close()
		}
	}
	t.Logf("chaos: %s", fig)
	if len(fig.violations) > 0 {
		path := filepath.Join(os.TempDir(), fmt.Sprintf("tollgate-chaos-%d.history.jsonl", seed))
		s.writeHistory(path)
		var b strings.Builder
		for _, v := range fig.violations {
			b.WriteString("  " + v.String() + "\n")
		}
		t.Fatalf("chaos: %d violations (seed %d; replay: %s; history: %s; process logs: %s):\n%s",
			len(fig.violations), seed, replay, path, s.logs, b.String())
	}
}

// chaosFigures is what a run did, for the report.
type chaosFigures struct {
	Seed       uint64         `json:"seed"`
	Duration   string         `json:"duration"`
	Ops        map[string]int `json:"ops"`      // kind/outcome → count
	Refusals   map[string]int `json:"refusals"` // a refusal's code and first words → count
	Faults     map[string]int `json:"faults"`   // fault kind → count
	Fired      map[string]int `json:"fired"`    // crash point and action → times it fired
	Runs       map[string]int `json:"runs"`     // final state → count
	Effects    int            `json:"effects"`
	Violations int            `json:"violations"`
	violations []chaoscheck.Violation
}

func (f chaosFigures) String() string {
	b, _ := json.Marshal(f)
	return string(b)
}

type chaosSuite struct {
	t        *testing.T
	rng      *rand.Rand
	c        *cluster
	redis    *redistest.Server
	replicas []*chaosProc
	execs    []*chaosProc
	// proxies: each replica's way to Redis, executors' way to each
	// replica, clients' way to each replica.
	toRedis, toExec, toAPI []*faultproxy.Proxy
	api                    *chaosAPI
	h                      *history
	logs                   string
	execIDs                []string

	mu     sync.Mutex
	faults map[string]int // fault kind → count, from both nemeses
}

func newChaosSuite(t *testing.T, seed uint64) *chaosSuite {
	t.Helper()
	fbin := buildFaultBinaries(t)
	logs, err := os.MkdirTemp("", "tollgate-chaos-logs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(logs)
		}
	})
	ports, err := freePorts(7)
	if err != nil {
		t.Fatal(err)
	}
	redis := redistest.Start(t, redistest.Args("--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1"))
	execIDs := []string{"edge-1", "edge-2"}
	c := prepareCluster(t, clusterSpec{later: execIDs}, redis)
	s := &chaosSuite{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), c: c, redis: redis, logs: logs,
		faults: map[string]int{}, execIDs: execIDs, h: newHistory()}
	proxy := func(target string) *faultproxy.Proxy {
		p, err := faultproxy.New(target)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	var apiAddrs, execAddrs []string
	for i := range 3 {
		apiPort, execPort := ports[1+2*i], ports[2+2*i]
		toRedis, toExec, toAPI := proxy(loopback(ports[0])), proxy(loopback(execPort)), proxy(loopback(apiPort))
		s.toRedis, s.toExec, s.toAPI = append(s.toRedis, toRedis), append(s.toExec, toExec), append(s.toAPI, toAPI)
		apiAddrs, execAddrs = append(apiAddrs, toAPI.Addr()), append(execAddrs, toExec.Addr())
		args := slices.Clone(c.planeArgs)
		setFlag(args, "--redis", "redis://"+toRedis.Addr())
		setFlag(args, "--listen", loopback(apiPort))
		setFlag(args, "--executor-listen", loopback(execPort))
		s.replicas = append(s.replicas, s.proc(fmt.Sprintf("replica-%d", i+1), "msg=serving", func() *exec.Cmd {
			cmd := exec.Command(filepath.Join(fbin, "controlplane"), args...)
			cmd.Env = append(os.Environ(), "TOLLGATE_HOME="+c.home)
			return cmd
		}))
	}
	for i, id := range execIDs {
		// Each executor's test server counts its own effects (one file
		// per process: the tool serialises only its own calls).
		servers := strings.Replace(c.servers, c.marks, s.markFile(id), 1)
		order := append(slices.Clone(execAddrs[i%3:]), execAddrs[:i%3]...)
		cfg := c.executorConfig(id, order, servers)
		s.execs = append(s.execs, s.proc(id, "", func() *exec.Cmd {
			cmd := exec.Command(filepath.Join(fbin, "executor"), "--config", cfg)
			cmd.Env = os.Environ()
			return cmd
		}))
	}
	// The first replica makes the grant key the others and the executors
	// read: it starts alone.
	for _, p := range append(slices.Clone(s.replicas), s.execs...) {
		if err := p.start(""); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, p := range append(slices.Clone(s.execs), s.replicas...) {
			p.kill()
		}
	})
	tokens := map[string]string{}
	for _, u := range chaosUsers {
		b, err := os.ReadFile(filepath.Join(c.home, "dev", "tokens", u+".jwt"))
		if err != nil {
			t.Fatal(err)
		}
		tokens[u] = strings.TrimSpace(string(b))
	}
	if s.api, err = dialChaos(apiAddrs, tokens); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.api.close)
	return s
}

func (s *chaosSuite) proc(name, ready string, command func() *exec.Cmd) *chaosProc {
	f, err := os.Create(filepath.Join(s.logs, name+".log"))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { f.Close() })
	return &chaosProc{name: name, ready: ready, command: command, log: f}
}

func (s *chaosSuite) markFile(id string) string { return filepath.Join(s.c.home, "marks-"+id+".json") }

// setFlag sets the value following flag in args.
func setFlag(args []string, flag, value string) {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		args[i+1] = value
	}
}

// buildFaultBinaries builds the control plane and the executor with the
// crash points compiled in (and the race detector when this test has it).
func buildFaultBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"controlplane", "executor"} {
		args := []string{"build", "-tags", "faults", "-o", filepath.Join(dir, name)}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "../../cmd/"+name)...).CombinedOutput()
		if err != nil {
			t.Fatalf("build %s with crash points: %v\n%s", name, err, out)
		}
	}
	return dir
}

// run runs the workload under the nemesis for d, heals, settles and
// checks.
func (s *chaosSuite) run(d time.Duration) chaosFigures {
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 4 {
		cl := &chaosClient{id: i, rng: rand.New(rand.NewPCG(s.rng.Uint64(), uint64(i))), api: s.api, h: s.h, replicas: 3}
		wg.Go(func() {
			for ctx.Err() == nil {
				cl.step(ctx)
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(cl.rng.IntN(40)) * time.Millisecond):
				}
			}
		})
	}
	s.nemesis(d)
	stop()
	wg.Wait()
	s.heal()
	s.settle()
	return s.check()
}

// nemesis runs, until d has passed, two nemeses at once, each with its
// own generator drawn from the seed, over disjoint targets (so faults
// overlap, as a network fault and a crash do): one over the processes
// (kills, pauses, crash points; it also starts again, unarmed, a process a
// crash point killed), one over the links and Redis (partitions through
// the proxies, kill -9 of redis-server).
func (s *chaosSuite) nemesis(d time.Duration) {
	end := time.Now().Add(d)
	procs := rand.New(rand.NewPCG(s.rng.Uint64(), 1))
	links := rand.New(rand.NewPCG(s.rng.Uint64(), 2))
	var wg sync.WaitGroup
	wg.Go(func() {
		for time.Now().Before(end) {
			pace(procs)
			s.revive()
			s.procFault(procs)
		}
	})
	wg.Go(func() {
		for time.Now().Before(end) {
			pace(links)
			if !s.linkFault(links) {
				return
			}
		}
	})
	wg.Wait()
}

// pace waits between faults: the schedule's own pacing, not a wait on
// state.
func pace(rng *rand.Rand) { time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond) }

// span is how long a fault lasts.
func span(rng *rand.Rand) time.Duration { return time.Duration(300+rng.IntN(2500)) * time.Millisecond }

// procFault kills, pauses or arms a crash point in a replica or an
// executor.
func (s *chaosSuite) procFault(rng *rand.Rand) {
	switch k := rng.IntN(100); {
	case k < 20:
		i := rng.IntN(len(s.replicas))
		s.killSlow(rng, "replica", s.replicas[i], s.toRedis[i])
	case k < 38:
		j := rng.IntN(len(s.execs))
		// Its first replica's link to Redis is the one its Starts wait on.
		s.killSlow(rng, "executor", s.execs[j], s.toRedis[j%3])
	case k < 53:
		p := s.replicas[rng.IntN(len(s.replicas))]
		s.note("pause replica")
		p.pause(true)
		time.Sleep(time.Second + span(rng)) // past the lease TTL: the others take its leases over
		p.pause(false)
	case k < 65:
		p := s.execs[rng.IntN(len(s.execs))]
		s.note("pause executor")
		p.pause(true)
		time.Sleep(span(rng))
		p.pause(false)
	default:
		points := faults.All()
		pt := points[rng.IntN(len(points))]
		action := []string{"kill", "kill", "kill", "pause:2s", "fail"}[rng.IntN(5)]
		spec := fmt.Sprintf("%s=%s@%d", pt, action, 1+rng.IntN(3))
		var p *chaosProc
		if strings.HasPrefix(string(pt), "executor.") {
			p = s.execs[rng.IntN(len(s.execs))]
		} else {
			p = s.replicas[rng.IntN(len(s.replicas))]
		}
		s.note("crash point " + string(pt) + " " + strings.Split(action, ":")[0])
		p.kill()
		s.restart(p, spec)
	}
}

// killSlow kills p (kill -9) and starts it again after a while; half the
// time while the store link its commits wait on is slow, so the kill lands
// between a write and its commit (a Start sent and not yet durable, a
// result received and not yet recorded).
func (s *chaosSuite) killSlow(rng *rand.Rand, kind string, p *chaosProc, link *faultproxy.Proxy) {
	if rng.IntN(2) == 0 {
		s.note("kill -9 " + kind + " with its store link slow")
		link.Delay(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		time.Sleep(time.Duration(200+rng.IntN(500)) * time.Millisecond)
		p.kill()
		link.Heal()
	} else {
		s.note("kill -9 " + kind)
		p.kill()
	}
	time.Sleep(span(rng) / 2)
	s.restart(p, "")
}

// linkFault partitions a link through its proxy or kills redis-server;
// false when Redis did not come back (the test has failed).
func (s *chaosSuite) linkFault(rng *rand.Rand) bool {
	if rng.IntN(100) < 20 {
		s.note("kill -9 redis-server")
		s.redis.Kill9()
		time.Sleep(span(rng) / 3)
		if err := s.redis.Server.Restart(); err != nil {
			s.t.Errorf("redis-server did not come back: %v", err)
			return false
		}
		return true
	}
	i := rng.IntN(3)
	link, px := "replica→redis", s.toRedis[i]
	switch rng.IntN(3) {
	case 1:
		link, px = "executor→replica", s.toExec[i]
	case 2:
		link, px = "client→replica", s.toAPI[i]
	}
	switch rng.IntN(6) {
	case 0:
		px.Delay(time.Duration(20+rng.IntN(300)) * time.Millisecond)
	case 1:
		px.BlackHole()
	case 2:
		px.Reset()
	case 3:
		px.Drop()
	case 4:
		px.OneWay(faultproxy.Upstream)
	default:
		px.OneWay(faultproxy.Downstream)
	}
	mode := strings.Fields(px.Mode())[0]
	s.note("partition " + link + " " + mode)
	time.Sleep(span(rng))
	if mode == "blackhole" || mode == "oneway" {
		// The bytes it swallowed are gone, which TCP never does to a
		// connection it keeps: the connections that lived through it end
		// (as their keepalives would), new ones are clean.
		px.Reset()
	}
	px.Heal()
	return true
}

func (s *chaosSuite) note(kind string) {
	s.mu.Lock()
	s.faults[kind]++
	s.mu.Unlock()
	for _, p := range append(slices.Clone(s.replicas), s.execs...) {
		fmt.Fprintf(p.log, "=== chaos: fault %q at %s\n", kind, time.Now().Format(time.RFC3339Nano))
	}
}

// restart starts p's next life; a replica that does not come back is
// reported (and tried again at the next revive).
func (s *chaosSuite) restart(p *chaosProc, faults string) {
	if err := p.start(faults); err != nil {
		// Expected when a point armed at start fires during the replica's
		// recovery; revive starts it again, unarmed.
		s.t.Logf("chaos: %v (armed: %q)", err, faults)
	}
}

// revive starts again, unarmed, every process that is not running (a
// crash point fired, or a restart failed).
func (s *chaosSuite) revive() {
	for _, p := range append(slices.Clone(s.replicas), s.execs...) {
		if !p.alive() {
			s.restart(p, "")
		}
	}
}

// heal ends every fault: proxies forward, paused processes continue, dead
// ones start again with no crash point armed, Redis runs.
func (s *chaosSuite) heal() {
	for _, px := range slices.Concat(s.toRedis, s.toExec, s.toAPI) {
		px.Heal()
	}
	for _, p := range append(slices.Clone(s.replicas), s.execs...) {
		p.pause(false)
		if p.alive() && p.armed != "" {
			p.kill() // an armed point must not fire while the runs settle
		}
	}
	s.revive()
}

// settle waits (up to two minutes) until every run is terminal or parked,
// starting again any process that dies meanwhile, after asking once more,
// with the same key, every start that had no answer.
func (s *chaosSuite) settle() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := &chaosClient{id: 99, rng: rand.New(rand.NewPCG(1, 2)), api: s.api, h: s.h, replicas: 3}
	for {
		_, _, unknown := s.h.snapshot()
		if len(unknown) == 0 || ctx.Err() != nil {
			break
		}
		for _, key := range unknown {
			cl.start(ctx, key, cl.recipeOf(key))
		}
	}
	for ctx.Err() == nil {
		s.revive()
		_, runs, _ := s.h.snapshot()
		s.h.mu.Lock()
		gates := slices.Collect(maps.Keys(s.h.gates))
		s.h.mu.Unlock()
		for _, run := range gates {
			cl.finish(ctx, run) // as the scripts would, once approved
		}
		quiet := true
		for id := range runs {
			r := cl.read(ctx, id, 0)
			st := enumName(r.GetState(), "RUN_STATE_")
			if r == nil || (st != "parked" && !chaoscheck.Terminal(st)) {
				quiet = false
				break
			}
		}
		if quiet {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// check reads the final state and judges it.
func (s *chaosSuite) check() chaosFigures {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ops, known, _ := s.h.snapshot()
	fig := chaosFigures{Ops: map[string]int{}, Faults: s.faults, Runs: map[string]int{}, Fired: s.fired()}
	fig.Refusals = map[string]int{}
	for _, o := range ops {
		fig.Ops[string(o.Kind)+"/"+string(o.Outcome)]++
		if o.Outcome == chaoscheck.Refused {
			// The code and the words before any name or quote.
			code, msg, _ := strings.Cut(o.Err, ": ")
			if i := strings.IndexAny(msg, "\":/"); i >= 0 {
				msg = msg[:i]
			}
			fig.Refusals[string(o.Kind)+" "+code+": "+strings.TrimSpace(msg)]++
		}
	}
	runs, err := readFinal(ctx, s.api, 0, known)
	if err != nil {
		fig.violations = append(fig.violations, chaoscheck.Violation{Check: "final", Detail: "the final state could not be read: " + err.Error()})
		fig.Violations = len(fig.violations)
		return fig
	}
	marks := map[string]int{}
	for _, id := range s.execIDs {
		b, err := os.ReadFile(s.markFile(id))
		if os.IsNotExist(err) {
			continue
		}
		var m map[string]int
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err != nil {
			s.t.Fatalf("the test server's counts %s: %v", s.markFile(id), err)
		}
		for k, v := range m {
			marks[k] += v
			fig.Effects += v
		}
	}
	audit := ""
	p := &plane{addr: s.toAPI[0].Addr(), home: s.c.home}
	if res := p.ctl(s.t, "", "--as", "audrey", "audit"); res.code != 0 {
		audit = fmt.Sprintf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	for _, r := range runs {
		fig.Runs[r.State]++
	}
	fig.violations = chaoscheck.Check(ops, chaoscheck.Final{Runs: runs, Marks: marks, Audit: audit})
	fig.Violations = len(fig.violations)
	return fig
}

// fired counts the crash points that fired, from the lines the processes
// wrote as they did (tollgate-faults: POINT ACTION).
func (s *chaosSuite) fired() map[string]int {
	out := map[string]int{}
	for _, p := range append(slices.Clone(s.replicas), s.execs...) {
		b, err := os.ReadFile(p.log.Name())
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(line, "tollgate-faults: "); ok {
				if f := strings.Fields(rest); len(f) >= 2 {
					out[f[0]+" "+f[1]]++
				}
			}
		}
	}
	return out
}

func (s *chaosSuite) writeHistory(path string) {
	ops, _, _ := s.h.snapshot()
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	f, err := os.Create(path)
	if err != nil {
		s.t.Logf("history: %v", err)
		return
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, o := range ops {
		enc.Encode(o)
	}
}
