package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestQuantile(t *testing.T) {
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[len(ds)-1-i] = time.Duration(i+1) * time.Millisecond
	}
	if p50, p99, top := msQuantile(ds, 0.5), msQuantile(ds, 0.99), msQuantile(ds, 1); p50 != 50 || p99 != 99 || top != 100 {
		t.Fatalf("p50 %v p99 %v max %v, want 50 99 100", p50, p99, top)
	}
	if ds[0] != 100*time.Millisecond {
		t.Fatal("quantile sorted its caller's sample")
	}
	if quantile(nil, 0.5) != 0 {
		t.Fatal("an empty sample")
	}
	if got := quantile([]float64{3}, 0.99); got != 3 {
		t.Fatalf("one element: %v", got)
	}
}

func TestFormats(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", -4321: "-4,321"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%v) = %q, want %q", v, got, want)
		}
	}
	for v, want := range map[float64]string{0.485: "0.48 ms", 12.34: "12.3 ms", 156.2: "156 ms", 10170: "10.17 s"} {
		if got := fmtMs(v); got != want {
			t.Errorf("fmtMs(%v) = %q, want %q", v, got, want)
		}
	}
}

// finish judges every bound of a goal, and a figure without one is
// neither met nor missed.
func TestFinishJudgesGoals(t *testing.T) {
	cases := []struct {
		r    Result
		met  string // yes, no or —
		want string // in Measured
	}{
		{Result{Key: "dispatch", Kind: kindLatency, P50Ms: 0.29, P99Ms: 0.99}, "yes", "p50 0.29 ms, p99 0.99 ms"},
		{Result{Key: "dispatch", Kind: kindLatency, P50Ms: 0.29, P99Ms: 1.01}, "no", ""},
		{Result{Key: "dispatch", Kind: kindLatency, P50Ms: 0.31, P99Ms: 0.9}, "no", ""},
		{Result{Key: "cpu-per-run", Kind: kindMicros, Value: 300}, "yes", "300 µs"},
		{Result{Key: "trace-cost", Kind: kindPercent, Value: 9.5, Extra: map[string]float64{"sample": 1}}, "yes", "9.5 %"},
		{Result{Key: "trace-cost", Kind: kindPercent, Value: 10.5, Extra: map[string]float64{"sample": 1}}, "no", ""},
		{Result{Key: "trace-cost", Kind: kindPercent, Value: 2.5, Extra: map[string]float64{"sample": 0.1}}, "no", ""},
		{Result{Key: "trace-cost", Kind: kindPercent, Value: 2.5, Extra: map[string]float64{"sample": 0.5}}, "—", ""},
		{Result{Key: "routing", Kind: kindScaling, Value: 1.4, MaxValue: 1, Extra: map[string]float64{"us_10": 20, "us_10000": 28, "allocs_10": 130, "allocs_10000": 130}}, "yes", "time 1.40× (20.0 → 28.0 µs), allocations 1.00× (130 → 130)"},
		{Result{Key: "routing", Kind: kindScaling, Value: 1.4, MaxValue: 1.01}, "no", ""},
		{Result{Key: "routing", Kind: kindScaling, Value: 2.1, MaxValue: 1}, "no", ""},
		{Result{Key: "cpu-per-run", Kind: kindMicros, Value: 301}, "no", "301 µs"},
		{Result{Key: "sustained", Kind: kindThroughput, Clients: 64, StepsPerSec: 5000, P99Ms: 100}, "yes", "5,000 steps/s"},
		{Result{Key: "sustained", Kind: kindThroughput, Clients: 64, StepsPerSec: 4999, P99Ms: 40}, "no", ""},
		{Result{Key: "fan-sleep", Kind: kindRatio, Value: 1.004, MaxValue: 1.2, Runs: 10, P50Ms: 402}, "yes", "1.004 (worst of 10: 1.200"},
		{Result{Key: "parked-memory", Kind: kindBytes, Value: 1025}, "no", "1,025 B"},
		{Result{Key: "parked-memory", Kind: kindBytes, Value: 1024}, "yes", ""},
		{Result{Key: "one-step", Kind: kindLatency, P50Ms: 1}, "—", ""},
		{Result{Key: "inbox", Kind: kindLatency, P99Ms: 9, Extra: map[string]float64{"parked_runs": 100000}}, "yes", ""},
	}
	for _, c := range cases {
		r := c.r
		r.finish()
		met := "—"
		if r.Met != nil {
			met = map[bool]string{true: "yes", false: "no"}[*r.Met]
		}
		if met != c.met || !strings.Contains(r.Measured, c.want) || r.Figure == "" || r.Goal == "" {
			t.Errorf("%s %+v: met %s (want %s), measured %q (want %q), figure %q, goal %q", r.Key, c.r, met, c.met, r.Measured, c.want, r.Figure, r.Goal)
		}
	}
	r := Result{Key: "inbox", Kind: kindLatency, Extra: map[string]float64{"parked_runs": 250000}}
	r.finish()
	if !strings.Contains(r.Figure, "250,000 parked runs") {
		t.Errorf("the inbox figure names N: %q", r.Figure)
	}
}

func sampleReport() *Report {
	rep := &Report{Program: "tollgate-bench", Machine: Machine{CPU: "Test CPU", Cores: 2, GOMAXPROCS: 2, Go: "go1.26.8", RedisVersion: "7.0.15"},
		Params: map[string]any{"fsync": "everysec"}, LoadBefore: "0.10 0.20 0.30", LoadAfter: "0.40 0.50 0.60", Setup: []string{"a setup line"}}
	rep.Results = []Result{
		{Key: "sustained", Kind: kindThroughput, Clients: 64, StepsPerSec: 3000, P50Ms: 20, P99Ms: 50, Extra: map[string]float64{"go_cpu_us_per_run": 500}},
		{Key: "approve", Kind: kindLatency, P50Ms: 1.5, P99Ms: 3, Extra: map[string]float64{"decide_to_tool_call_p50_ms": 2, "decide_to_tool_call_p99_ms": 4}},
		{Key: "one-step", Kind: kindLatency, P50Ms: 1.25, P99Ms: 2.5},
		{Key: "dispatch", Kind: kindLatency, P50Ms: 0.5, P99Ms: 1.5},
	}
	for i := range rep.Results {
		rep.Results[i].finish()
	}
	rep.sort()
	return rep
}

func TestMarkdownTable(t *testing.T) {
	md := sampleReport().Markdown()
	for _, want := range []string{
		"Machine: Test CPU, 2 cores (`GOMAXPROCS=2`)", "redis-server 7.0.15", "Load average 0.10 0.20 0.30 before",
		"| figure | goal | measured | met |",
		"| dispatch: step runnable → lease received by the executor | p50 ≤ 0.3 ms, p99 ≤ 1 ms | p50 0.50 ms, p99 1.50 ms | **no** |",
		"| sustained throughput, 64 concurrent clients, 1-step runs | ≥ 5,000 steps/s, p99 ≤ 100 ms | 3,000 steps/s, p50 20.0 ms, p99 50.0 ms | **no** |",
		"| 1-step run, start → complete | — | p50 1.25 ms, p99 2.50 ms | — |",
		"- approve: Decide sent → the tool call began on the executor p50 2.00 ms",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the table lacks %q:\n%s", want, md)
		}
	}
	// DESIGN.md §12's order: dispatch first, sustained before approve.
	if d, o, s, a := strings.Index(md, "| dispatch"), strings.Index(md, "| 1-step"), strings.Index(md, "| sustained"), strings.Index(md, "| approve"); !(d < o && o < s && s < a) {
		t.Errorf("rows out of order:\n%s", md)
	}
}

func TestCompareWithPeers(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	temporal := write("temporal.json", `{"peer":"temporal","versions":{"server":"v1.32.0","sdk":"v1.50.0"},
	  "params":{"n":200,"duration":"1m0s","clients":64,"store":"postgres","shards":4},
	  "postgres":{"server_version":"15.20 (Debian)","fsync":"on","synchronous_commit":"on"},
	  "results":[
	    {"key":"one-step","figure":"1-step run, start → complete","runs":200,"p50_ms":100,"p99_ms":150,"max_ms":200},
	    {"key":"approve","runs":200,"p50_ms":40,"p99_ms":80,"max_ms":90},
	    {"key":"sustained","runs":1000,"clients":64,"p50_ms":900,"p99_ms":10000,"max_ms":12000,"steps_per_sec":20},
	    {"key":"fan-100","runs":200,"p50_ms":680,"p99_ms":20010,"max_ms":20010}]}`)
	river := write("river.json", `{"peer":"river","versions":{"river":"v0.51.2","pgx":"v5.13.0"},
	  "params":{"n":200,"duration":"1m0s","clients":64,"fetch_cooldown":"100ms","max_workers":100,"max_conns":20},
	  "postgres":{"server_version":"15.20","fsync":"on","synchronous_commit":"on"},
	  "results":[
	    {"key":"dispatch","figure":"dispatch: job committed → Work called","runs":200,"p50_ms":5,"p99_ms":15,"max_ms":20},
	    {"key":"one-step","figure":"1-step job, insert → completion committed","runs":200,"p50_ms":10,"p99_ms":25,"max_ms":30},
	    {"key":"sustained","runs":30000,"clients":64,"p50_ms":30,"p99_ms":100,"max_ms":120,"steps_per_sec":1500}]}`)
	b := &bench{cfg: config{peers: true, peer: peerConfig{temporalJSON: temporal, riverJSON: river}}}
	runs, err := b.savedPeers()
	if err != nil {
		t.Fatal(err)
	}
	c := compare(sampleReport(), runs)
	if len(c.Peers) != 2 || c.Peers[0].Title != "Temporal (PostgreSQL)" || c.Peers[1].Title != "River (PostgreSQL)" {
		t.Fatalf("columns: %+v", c.Peers)
	}
	rows := map[string]PeerRow{}
	for _, r := range c.Rows {
		rows[r.Key] = r
		if len(r.Peers) != 2 {
			t.Fatalf("%s: %d peer cells, want 2", r.Key, len(r.Peers))
		}
	}
	if r := rows["one-step"]; r.Peers[0].RatioP50 != 80 || r.Peers[0].RatioP99 != 60 || r.Peers[1].RatioP50 != 8 || r.Peers[1].RatioP99 != 10 {
		t.Errorf("one-step ratios: %+v", r)
	}
	if r := rows["sustained"]; r.Peers[0].RatioThroughput != 150 || r.Peers[0].RatioP99 != 200 || r.Peers[1].RatioThroughput != 2 || r.Peers[1].RatioP99 != 2 {
		t.Errorf("sustained: Tollgate ÷ peer for throughput, peer ÷ Tollgate for p99: %+v", r)
	}
	if f, _ := figureOf("dispatch"); rows["dispatch"].Goal != f.goal || f.goal == "—" {
		t.Errorf("dispatch: goal %q, want §12's %q", rows["dispatch"].Goal, f.goal)
	}
	if r := rows["dispatch"]; r.Peers[1].RatioP50 != 10 || r.Peers[0].Measured != "—" {
		t.Errorf("dispatch: River's against Tollgate's, Temporal has none: %+v", r)
	}
	if r := rows["approve"]; r.TollgateP50Ms != 2 || r.Peers[0].RatioP50 != 20 || r.TollgateFigureSource == "" || r.Peers[1].Measured != "—" {
		t.Errorf("approve compares the tool call's start with the activity's: %+v", r)
	}
	if r := rows["fan-100"]; r.TollgateMeasured != "not run" || r.Peers[0].RatioP50 != 0 {
		t.Errorf("a workload only Temporal ran: %+v", r)
	}
	if _, ok := rows["three-step"]; ok {
		t.Error("a workload nobody ran has a row")
	}
	// Rows in §12's order, dispatch first.
	if c.Rows[0].Key != "dispatch" || c.Rows[1].Key != "one-step" {
		t.Errorf("rows out of order: %s, %s", c.Rows[0].Key, c.Rows[1].Key)
	}
	md := c.Markdown()
	for _, want := range []string{
		"| figure | goal | Tollgate | Temporal (PostgreSQL) | River (PostgreSQL) | Temporal ÷ Tollgate | River ÷ Tollgate |",
		"| 1-step run, start → complete | — | p50 1.25 ms, p99 2.50 ms | p50 100 ms, p99 150 ms | p50 10.0 ms, p99 25.0 ms | p50 80×, p99 60× | p50 8.0×, p99 10× |",
		"| 3,000 steps/s, p99 50.0 ms | 20 steps/s, p99 10.00 s | 1,500 steps/s, p99 100 ms | 150× steps/s; p99 200× | 2.0× steps/s; p99 2.0× |",
		"fsync on, synchronous_commit on", "4 history shards", "River v0.51.2", "FetchCooldown 100ms",
		"- River (PostgreSQL) timed dispatch: dispatch: job committed → Work called; one-step: 1-step job, insert → completion committed.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the side-by-side lacks %q:\n%s", want, md)
		}
	}
	js, err := c.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Peers []struct {
			Name   string
			Report struct{ Peer string }
		}
		Rows []PeerRow
	}
	if err := json.Unmarshal(js, &back); err != nil || len(back.Peers) != 2 || back.Peers[1].Report.Peer != "river" || len(back.Rows) != len(c.Rows) {
		t.Errorf("JSON: %v %+v", err, back)
	}

	// A saved report of the wrong peer is refused before any measuring.
	b.cfg.peer.riverJSON = temporal
	if _, err := b.savedPeers(); err == nil || !strings.Contains(err.Error(), "not a report of the river peer") {
		t.Errorf("Temporal's report read as River's: %v", err)
	}
}

// A peer that failed or was not run keeps its column, and says why.
func TestCompareMissingPeer(t *testing.T) {
	runs := []*peerRun{
		{spec: peerSpec{name: peerTemporal, title: "Temporal (PostgreSQL)", keys: []string{"one-step"}}, err: errors.New("exit status 1")},
		{spec: peerSpec{name: peerRiver, title: "River (PostgreSQL)", keys: []string{"dispatch"}}, skipped: "-only names none of its workloads"},
	}
	c := compare(sampleReport(), runs)
	md := c.Markdown()
	for _, want := range []string{"| Tollgate | Temporal (PostgreSQL) | River (PostgreSQL) | Temporal ÷ Tollgate | River ÷ Tollgate |",
		"Temporal (PostgreSQL): failed: exit status 1", "River (PostgreSQL): not run: -only names none",
		"| p50 1.25 ms, p99 2.50 ms | failed | — |"} {
		if !strings.Contains(md, want) {
			t.Errorf("lacks %q:\n%s", want, md)
		}
	}
	if c.Peers[0].Error == "" || c.Peers[1].Skipped == "" {
		t.Errorf("columns: %+v", c.Peers)
	}
}

func TestPeerOnly(t *testing.T) {
	river := []string{"dispatch", "one-step", "sustained"}
	for _, tc := range []struct {
		only []string
		want string
		run  bool
	}{
		{nil, "", true},
		{[]string{"sustained"}, "sustained", true},
		{[]string{"inbox"}, "", false},
		{[]string{"inbox", "sustained"}, "sustained", true},
		{[]string{"one-step", "sustained"}, "", true}, // more than one: all of them
		{[]string{"three-step"}, "dispatch", true},    // Tollgate's dispatch comes from it
	} {
		got, run := peerOnly(tc.only, river)
		if got != tc.want || run != tc.run {
			t.Errorf("peerOnly(%q) = %q, %v; want %q, %v", tc.only, got, run, tc.want, tc.run)
		}
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{{"-n", "0"}, {"-fsync", "no"}, {"-only", "nope"}, {"stray"}, {"-trace-sample", "0"}, {"-trace-sample", "1,1.5"}, {"-trace-sample", "1,"},
		{"-temporal-json", "x.json"}, {"-river-json", "x.json"}, {"-river-flags", "-fetch-cooldown 1ms"}, {"-executors", "0"}, {"-duration", "0s"}, {"-replicas", "0"}} {
		if _, err := parseFlags(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	cfg, err := parseFlags([]string{"-only", "sustained, inbox", "-fsync", "always"}, &bytes.Buffer{})
	if err != nil || len(cfg.only) != 2 || cfg.only[1] != "inbox" || cfg.fsync != "always" || cfg.n != 200 || cfg.parked != 100_000 {
		t.Errorf("%+v %v", cfg, err)
	}
	if cfg.traceSamples == nil || len(cfg.traceSamples) != 1 || cfg.traceSamples[0] != 1 {
		t.Errorf("the default trace samples are %v, want [1]", cfg.traceSamples)
	}
	if cfg, err := parseFlags([]string{"-trace", "-trace-sample", "1, 0.1"}, &bytes.Buffer{}); err != nil || !slices.Equal(cfg.traceSamples, []float64{1, 0.1}) {
		t.Errorf("-trace-sample '1, 0.1': %v, %v", cfg.traceSamples, err)
	}
	// Each sample is judged against its own goal.
	off := Result{StepsPerSec: 1000, Extra: map[string]float64{"tollgate_cpu_us_per_run": 500}}
	on := Result{StepsPerSec: 950, Extra: map[string]float64{"tollgate_cpu_us_per_run": 520}}
	for sample, want := range map[float64]string{1: "yes", 0.1: "no"} {
		r := traceResult(off, on, sample, nil)
		r.finish()
		if r.Met == nil || map[bool]string{true: "yes", false: "no"}[*r.Met] != want || r.Value != 5 {
			t.Errorf("a 5 %% cost at sample %g: goal %q met %v, want %s", sample, r.Goal, r.Met, want)
		}
	}
	// With -replicas, one executor per replica unless -executors says.
	for args, want := range map[string][2]int{"": {1, 1}, "-replicas 3": {3, 3}, "-replicas 3 -executors 1": {3, 1}, "-executors 2": {1, 2}} {
		cfg, err := parseFlags(strings.Fields(args), &bytes.Buffer{})
		if err != nil || cfg.replicas != want[0] || cfg.executors != want[1] {
			t.Errorf("%q: %d replicas, %d executors, %v; want %v", args, cfg.replicas, cfg.executors, err, want)
		}
	}
	var help bytes.Buffer
	if err := Run(context.Background(), []string{"-help"}, Options{Stdout: &bytes.Buffer{}, Stderr: &help}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DESIGN.md §12", "-peers", "-cpuprofile", "fan-sleep", "-parked", "-replicas"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

// TestRunTiny runs every workload a few times on real worlds, so the
// bench program cannot rot. It checks what the report holds, not how
// fast anything was.
func TestRunTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server and a control plane per workload")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	jsonPath, mdPath := filepath.Join(dir, "out.json"), filepath.Join(dir, "out.md")
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := Run(ctx, []string{"-json", jsonPath, "-md", mdPath, "-dir", dir, "-n", "3", "-n-sleep", "1", "-warmup", "1",
		"-duration", "300ms", "-clients", "4", "-parked", "150", "-people", "10", "-inbox-queries", "3", "-cpuprofile", filepath.Join(dir, "cpu")}, Options{Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	got := map[string]Result{}
	for _, r := range rep.Results {
		got[r.Key] = r
	}
	for _, f := range figures {
		r, ok := got[f.key]
		if f.key == "trace-cost" {
			if ok {
				t.Error("a trace-cost row without -trace")
			}
			continue
		}
		if !ok {
			t.Errorf("no %s result", f.key)
			continue
		}
		if r.Runs < 1 || r.Measured == "" || (f.bounds != nil) != (r.Met != nil) {
			t.Errorf("%s: %+v", f.key, r)
		}
	}
	if r := got["dispatch"]; r.Runs != 3*1+3*3 {
		t.Errorf("dispatch samples every step of 3 one-step and 3 three-step runs: %d", r.Runs)
	}
	if r := got["sustained"]; r.StepsPerSec <= 0 || r.Clients != 4 || r.Extra["go_cpu_us_per_run"] <= 0 || r.Extra["go_cpu_us_per_op"] != 0 {
		t.Errorf("sustained: %+v", r)
	}
	// The clients' goroutines and connections are labelled, so some of
	// the process's CPU is theirs and some is not; Tollgate's own per run
	// is the rest plus Redis's.
	// (A phase this short may catch no client sample: cpusplit_test.go
	// checks the split itself.)
	if r, s := got["cpu-per-run"], got["sustained"]; s.Extra["client_cpu_share"] < 0 || s.Extra["client_cpu_share"] >= 1 ||
		r.Value <= s.Extra["redis_cpu_us_per_run"] || r.Value > s.Extra["go_cpu_us_per_run"]+s.Extra["redis_cpu_us_per_run"] {
		t.Errorf("cpu-per-run %+v from sustained %+v", r, s)
	}
	for _, k := range []string{"one-step", "three-step", "fan-100", "approve", "inbox", "parked-memory"} {
		if r := got[k]; r.Extra["go_cpu_us_per_op"] <= 0 || r.Extra["redis_calls_per_op"] <= 0 || !strings.Contains(stdout.String(), "EVALSHA)") {
			t.Errorf("%s: no CPU per run: %+v", k, r)
		}
	}
	if r := got["fan-sleep"]; r.Value < 1 || r.P50Ms < 400 {
		t.Errorf("fan-sleep: the wall of a fan is at least its slowest branch: %+v", r)
	}
	if r := got["approve"]; r.Extra["decide_to_complete_p50_ms"] < r.P50Ms {
		t.Errorf("approve: complete before leased: %+v", r)
	}
	if r := got["parked-memory"]; r.Value <= 0 || r.Runs != 150 {
		t.Errorf("parked-memory: %+v", r)
	}
	if rep.Machine.Go == "" || rep.Machine.Cores < 1 || rep.Machine.RedisVersion == "" || rep.LoadBefore == "" {
		t.Errorf("machine: %+v, load %q", rep.Machine, rep.LoadBefore)
	}
	md, err := os.ReadFile(mdPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(md) != stdout.String() || !strings.Contains(string(md), "| 3-step sequential run, start → complete | p50 ≤ 1.2 ms | p50 ") {
		t.Errorf("markdown (file and stdout):\n%s\n---\n%s", md, stdout.String())
	}
	if !strings.Contains(stderr.String(), "tollgate-bench") {
		t.Errorf("no progress on stderr")
	}
	for _, phase := range []string{"one-step", "fan-100", "approve", "sustained", "parked-load", "inbox"} {
		if fi, err := os.Stat(filepath.Join(dir, "cpu."+phase+".pprof")); err != nil || fi.Size() == 0 {
			t.Errorf("no CPU profile of %s: %v", phase, err)
		}
	}
	// Every world cleaned up after itself.
	if left, _ := filepath.Glob(filepath.Join(dir, "tollgate-bench-*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestRunTinyReplicas runs the tiny bench with two control planes on the
// one Redis, so the -replicas mode cannot rot: both replicas serve runs,
// each has its executor and hears the store's hints, the report names the
// replica count, and every world stops both planes (goleak, TestMain).
func TestRunTinyReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server and two control planes per workload")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := Run(ctx, []string{"-replicas", "2", "-json", jsonPath, "-dir", dir, "-n", "4", "-n-sleep", "1", "-warmup", "2",
		"-duration", "300ms", "-clients", "4", "-parked", "40", "-people", "10", "-inbox-queries", "4"}, Options{Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Replicas != 2 || rep.Params["replicas"] != 2.0 || rep.Params["executors"] != 2.0 {
		t.Errorf("replicas %d, params %v: want 2 replicas with an executor each", rep.Replicas, rep.Params)
	}
	got := map[string]Result{}
	for _, r := range rep.Results {
		got[r.Key] = r
	}
	for _, f := range figures {
		if _, ok := got[f.key]; !ok && f.key != "trace-cost" {
			t.Errorf("no %s result", f.key)
		}
	}
	s := got["sustained"]
	if s.StepsPerSec <= 0 || s.Extra["replicas"] != 2 || s.Extra["hint_subscribers"] != 2 ||
		s.Extra["replica_0_runs"] < 1 || s.Extra["replica_1_runs"] < 1 || s.Extra["redis_publish_per_run"] <= 0 {
		t.Errorf("sustained: both replicas serve clients and hear hints: %+v", s)
	}
	if d := got["dispatch"]; d.Runs != 4*1+4*3 {
		t.Errorf("dispatch: %d samples, want every step of 4 one-step and 4 three-step runs", d.Runs)
	} else if _, ok := d.Extra["cross_replica_steps"]; !ok {
		t.Errorf("dispatch does not say how many steps ran on another replica: %+v", d)
	}
	if f := got["fan-100"]; f.Extra["steps"] != 4*100 {
		t.Errorf("fan-100: every branch of 4 fans counted: %+v", f)
	}
	if a := got["approve"]; a.Runs != 4 || a.Extra["decide_to_complete_p50_ms"] < a.P50Ms {
		t.Errorf("approve: %+v", a)
	}
	if r := got["inbox"]; r.Runs != 4 {
		t.Errorf("inbox: %+v", r)
	}
	for _, want := range []string{"DESIGN.md §12 figures, 2 replicas on one Redis", "**2 control plane replicas**", "executor i to replica i mod 2", "hint subscribers"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, stdout.String())
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "tollgate-bench-*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestWorldOfTwoReplicas: a world of two control planes on one Redis,
// each under its own name, has an executor on each; a run started through one is approved through the
// other; once close returns, neither plane's controlplane.Run is left
// (goleak, at the end of the package, would not say which world leaked).
func TestWorldOfTwoReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server and two control planes")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	calls := &callTimes{at: map[string]time.Time{}}
	w, err := startWorld(ctx, worldConfig{Dir: t.TempDir(), Fsync: "everysec", Replicas: 2, Executors: 2, Capacity: 4, OnCall: calls.record})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			w.close()
		}
	}()
	if len(w.planes) != 2 || w.plane(0) == w.plane(1) || w.plane(2) != w.plane(0) || w.planes[0].addr == w.planes[1].addr {
		t.Fatalf("want two replicas, each with its own listener, taken in turn: %+v", w.planes)
	}
	if w.execPlane["bench-1"] != w.planes[0] || w.execPlane["bench-2"] != w.planes[1] {
		t.Fatalf("executor i connects to replica i mod 2: %v", w.execPlane)
	}
	// Each is alive in the store under its own --replica name.
	if live, err := w.redis.Do("KEYS", "tg:replica:*"); err != nil || !strings.Contains(live, "tg:replica:bench-cp-0") || !strings.Contains(live, "tg:replica:bench-cp-1") {
		t.Fatalf("replicas alive in the store: %q %v", live, err)
	}
	for i := range 4 {
		r, err := w.runToEnd(ctx, w.plane(i), "alice", oneStepRecipe)
		if err != nil {
			t.Fatal(err)
		}
		if n := w.crossSteps(w.plane(i), r); n != 0 {
			t.Errorf("run %d through replica %d ran on another replica's executor: %v", i, i%2, r.GetSteps())
		}
	}
	if _, _, _, _, err := approveOnce(ctx, w, w.plane(0), w.plane(1), calls); err != nil {
		t.Fatalf("started through one replica, approved through the other: %v", err)
	}
	if n := strings.Count(allStacks(), "internal/controlplane.Run("); n != 2 {
		t.Fatalf("%d goroutines in controlplane.Run before close, want 2", n)
	}
	w.close()
	closed = true
	if stacks := allStacks(); strings.Contains(stacks, "internal/controlplane.Run(") {
		t.Errorf("a control plane still runs after close:\n%s", stacks)
	}
}

func allStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// The peers run on -pg, Temporal on PostgreSQL, each with its extra flags.
func TestPeerSpecs(t *testing.T) {
	cfg, err := parseFlags([]string{"-peers", "-pg", "postgres://u@h:1/db", "-river-flags", "-fetch-cooldown 1ms", "-temporal-flags", "-tuned"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	specs := (&bench{cfg: cfg}).peerSpecs()
	got := map[string]string{}
	for _, s := range specs {
		got[s.name] = strings.Join(s.args, " ")
	}
	if got[peerTemporal] != "-store postgres -pg postgres://u@h:1/db -tuned" || got[peerRiver] != "-pg postgres://u@h:1/db -fetch-cooldown 1ms" {
		t.Errorf("peer args: %q", got)
	}
	if specs[0].dir != "bench/peers/temporal" || specs[1].dir != "bench/peers/river" {
		t.Errorf("modules: %s, %s", specs[0].dir, specs[1].dir)
	}
}
