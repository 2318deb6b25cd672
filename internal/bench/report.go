package bench

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Kinds of result: what Measured shows and which numbers a goal reads.
const (
	kindLatency    = "latency"    // P50Ms, P99Ms
	kindThroughput = "throughput" // StepsPerSec, P99Ms
	kindRatio      = "ratio"      // Value (p50), MaxValue
	kindBytes      = "bytes"      // Value
	kindPercent    = "percent"    // Value
	kindMicros     = "micros"     // Value, µs
	kindScaling    = "scaling"    // Value: time ratio, MaxValue: allocations ratio (Extra: each side)
)

// Result is one figure as measured.
type Result struct {
	Key         string             `json:"key"`
	Figure      string             `json:"figure"`
	Kind        string             `json:"kind"`
	Goal        string             `json:"goal"`          // DESIGN.md §12; "—" for none
	Met         *bool              `json:"met,omitempty"` // nil: no goal
	Measured    string             `json:"measured"`      // as the table shows it
	Runs        int                `json:"runs"`
	Clients     int                `json:"clients,omitempty"`
	P50Ms       float64            `json:"p50_ms,omitempty"`
	P99Ms       float64            `json:"p99_ms,omitempty"`
	MaxMs       float64            `json:"max_ms,omitempty"`
	StepsPerSec float64            `json:"steps_per_sec,omitempty"`
	Value       float64            `json:"value,omitempty"`     // ratio (p50), bytes, percent
	MaxValue    float64            `json:"max_value,omitempty"` // ratio: the worst run
	Extra       map[string]float64 `json:"extra,omitempty"`
	Seconds     float64            `json:"seconds"`
	Note        string             `json:"note,omitempty"`
}

// latencyResult is a latency figure from a sample of durations.
func latencyResult(key string, ds []time.Duration, took time.Duration) Result {
	return Result{Key: key, Kind: kindLatency, Runs: len(ds), P50Ms: msQuantile(ds, 0.5), P99Ms: msQuantile(ds, 0.99),
		MaxMs: msQuantile(ds, 1), Seconds: took.Seconds()}
}

// bound is one limit of a goal: the metric is at most (or at least) limit.
type bound struct {
	metric string // p50_ms, p99_ms, steps_per_sec, value, max_value
	atMost bool
	limit  float64
}

// figure is one row of DESIGN.md §12 (or a row the peers table needs).
type figure struct {
	key, name string
	goal      string
	bounds    []bound
}

// figures are the rows in DESIGN.md §12's order; one-step has no goal
// (it lines up with the peers), trace-cost is the -trace mode's.
var figures = []figure{
	// The latency goals are issue 22's, raised toward the floor (a gRPC
	// stream round trip ~30 µs, a Redis commit ~120 µs) from §12's first
	// ones (dispatch p50 ≤ 1 ms, p99 ≤ 5 ms; 3-step p50 ≤ 5 ms; 100-way
	// fan p50 ≤ 50 ms; approve p50 ≤ 2 ms, p99 ≤ 10 ms); the 10-way fan's
	// (≤ 3 ms) and the sleeping fan's (≤ 1.02) are DESIGN.md §12's now.
	{"dispatch", "dispatch: step runnable → lease received by the executor", "p50 ≤ 0.3 ms, p99 ≤ 1 ms",
		[]bound{{"p50_ms", true, 0.3}, {"p99_ms", true, 1}}},
	{"one-step", "1-step run, start → complete", "—", nil},
	{"three-step", "3-step sequential run, start → complete", "p50 ≤ 1.2 ms", []bound{{"p50_ms", true, 1.2}}},
	{"fan-10", "10-way fan of no-op steps, start → complete", "p50 ≤ 3 ms", []bound{{"p50_ms", true, 3}}},
	{"fan-100", "100-way fan of no-op steps, start → complete", "p50 ≤ 10 ms", []bound{{"p50_ms", true, 10}}},
	{"fan-sleep", "fan of sleeping branches (400, 270, 80 ms): wall ÷ slowest branch", "≤ 1.02", []bound{{"value", true, 1.02}}},
	{"sustained", "sustained throughput, 64 concurrent clients, 1-step runs", "≥ 5,000 steps/s, p99 ≤ 100 ms",
		[]bound{{"steps_per_sec", false, 5000}, {"p99_ms", true, 100}}},
	{"cpu-per-run", "CPU per 1-step run under sustained load: control plane + executor + Redis (the clients' share left out)", "≤ 300 µs",
		[]bound{{"value", true, 300}}},
	{"approve", "approve → governed step leased", "p50 ≤ 0.8 ms, p99 ≤ 2 ms", []bound{{"p50_ms", true, 0.8}, {"p99_ms", true, 2}}},
	{"routing", "routing an ask: cost with 10,000 people in the domain ÷ with 10 (the same 2 may decide)", "does not grow: time ≤ 2×, allocations 1×",
		[]bound{{"value", true, 2}, {"max_value", true, 1}}},
	{"parked-memory", "Redis memory per parked run with its ask", "≤ 1 KiB", []bound{{"value", true, 1024}}},
	{"inbox", "inbox query (one person's pending asks, 50 a page) with N parked runs", "p99 ≤ 10 ms with 1,000,000", []bound{{"p99_ms", true, 10}}},
	// Its goal depends on the sample (finish): ≤ 10 % at 1, ≤ 2 % at 0.1.
	{"trace-cost", "tracing cost: sustained throughput with tracing on vs off", "≤ 10 % at a sample of 1, ≤ 2 % at 0.1", nil},
}

func figureOf(key string) (figure, bool) {
	i := slices.IndexFunc(figures, func(f figure) bool { return f.key == key })
	if i < 0 {
		return figure{}, false
	}
	return figures[i], true
}

func (r Result) metric(name string) float64 {
	switch name {
	case "p50_ms":
		return r.P50Ms
	case "p99_ms":
		return r.P99Ms
	case "steps_per_sec":
		return r.StepsPerSec
	case "value":
		return r.Value
	case "max_value":
		return r.MaxValue
	}
	return math.NaN()
}

// finish names the result's figure and goal, judges it, and writes what
// the table shows.
func (r *Result) finish() {
	f, ok := figureOf(r.Key)
	if !ok {
		f = figure{key: r.Key, name: r.Key, goal: "—"}
	}
	if r.Figure == "" {
		r.Figure = f.name
	}
	if r.Key == "sustained" && r.Clients > 0 {
		r.Figure = fmt.Sprintf("sustained throughput, %d concurrent clients, 1-step runs", r.Clients)
	}
	if r.Key == "inbox" {
		r.Figure = strings.Replace(f.name, "N parked", fmt.Sprintf("%s parked", thousands(r.Extra["parked_runs"])), 1)
	}
	r.Goal = f.goal
	if r.Key == "trace-cost" {
		switch sample := r.Extra["sample"]; {
		case sample >= 1:
			f.goal, f.bounds = "≤ 10 % (sample 1)", []bound{{"value", true, 10}}
		case sample > 0 && sample <= 0.1:
			f.goal, f.bounds = "≤ 2 % (sample ≤ 0.1)", []bound{{"value", true, 2}}
		}
		r.Goal = f.goal
	}
	r.Met = nil
	if len(f.bounds) > 0 {
		met := true
		for _, b := range f.bounds {
			v := r.metric(b.metric)
			if math.IsNaN(v) || (b.atMost && v > b.limit) || (!b.atMost && v < b.limit) {
				met = false
			}
		}
		r.Met = &met
	}
	r.Measured = r.summary()
}

func (r Result) summary() string {
	switch r.Kind {
	case kindThroughput:
		return fmt.Sprintf("%s steps/s, p50 %s, p99 %s", thousands(r.StepsPerSec), fmtMs(r.P50Ms), fmtMs(r.P99Ms))
	case kindRatio:
		return fmt.Sprintf("%.3f (worst of %d: %.3f; wall p50 %s)", r.Value, r.Runs, r.MaxValue, fmtMs(r.P50Ms))
	case kindBytes:
		return fmt.Sprintf("%s B", thousands(r.Value))
	case kindPercent:
		return fmt.Sprintf("%.1f %%", r.Value)
	case kindScaling:
		return fmt.Sprintf("time %.2f× (%.1f → %.1f µs), allocations %.2f× (%.0f → %.0f)", r.Value, r.Extra["us_10"], r.Extra["us_10000"],
			r.MaxValue, r.Extra["allocs_10"], r.Extra["allocs_10000"])
	case kindMicros:
		return fmt.Sprintf("%s µs", thousands(r.Value))
	default:
		return fmt.Sprintf("p50 %s, p99 %s", fmtMs(r.P50Ms), fmtMs(r.P99Ms))
	}
}

// Report is the JSON document.
type Report struct {
	Program     string         `json:"program"`
	Replicas    int            `json:"replicas"` // control planes on the one Redis
	Machine     Machine        `json:"machine"`
	Setup       []string       `json:"setup"`
	Params      map[string]any `json:"params"`
	Date        string         `json:"date"`
	WallSeconds float64        `json:"wall_seconds"`
	LoadBefore  string         `json:"loadavg_before"`
	LoadAfter   string         `json:"loadavg_after"`
	Results     []Result       `json:"results"`
}

// Machine is what the figures were measured on.
type Machine struct {
	CPU          string `json:"cpu"`
	Cores        int    `json:"cores"`
	GOMAXPROCS   int    `json:"gomaxprocs"`
	OS           string `json:"os"`
	Go           string `json:"go"`
	RedisVersion string `json:"redis_server"`
}

func thisMachine() Machine {
	return Machine{CPU: cpuModel(), Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version(), RedisVersion: redisVersion()}
}

func (m Machine) String() string {
	return fmt.Sprintf("%s, %d cores (`GOMAXPROCS=%d`), %s, %s, redis-server %s", m.CPU, m.Cores, m.GOMAXPROCS, m.OS, m.Go, m.RedisVersion)
}

// sort puts the results in DESIGN.md §12's order.
func (r *Report) sort() {
	order := func(key string) int {
		i := slices.IndexFunc(figures, func(f figure) bool { return f.key == key })
		if i < 0 {
			return len(figures)
		}
		return i
	}
	slices.SortStableFunc(r.Results, func(a, b Result) int { return order(a.Key) - order(b.Key) })
}

// Markdown is the §12 table with the machine and the setup above it.
func (r *Report) Markdown() string {
	var b strings.Builder
	b.WriteString("## Tollgate: DESIGN.md §12 figures")
	if r.Replicas > 1 {
		fmt.Fprintf(&b, ", %d replicas on one Redis", r.Replicas)
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "Machine: %s. Load average %s before, %s after. %s, %.0f s in all.\n\n", r.Machine, r.LoadBefore, r.LoadAfter, r.Date, r.WallSeconds)
	for _, s := range r.Setup {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	b.WriteString("\n| figure | goal | measured | met |\n| --- | --- | --- | --- |\n")
	for _, res := range r.Results {
		met := "—"
		if res.Met != nil {
			met = map[bool]string{true: "yes", false: "**no**"}[*res.Met]
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", res.Figure, res.Goal, res.Measured, met)
	}
	notes := false
	for _, res := range r.Results {
		if n := res.note(); n != "" {
			if !notes {
				b.WriteString("\n")
				notes = true
			}
			fmt.Fprintf(&b, "- %s: %s\n", res.Key, n)
		}
	}
	return b.String()
}

// note is what a row's extra figures add, in words.
func (r Result) note() string {
	var parts []string
	if r.Note != "" {
		parts = append(parts, r.Note)
	}
	e := r.Extra
	switch r.Key {
	case "approve":
		parts = append(parts, fmt.Sprintf("Decide sent → the tool call began on the executor p50 %s, p99 %s; → run complete p50 %s, p99 %s",
			fmtMs(e["decide_to_tool_call_p50_ms"]), fmtMs(e["decide_to_tool_call_p99_ms"]), fmtMs(e["decide_to_complete_p50_ms"]), fmtMs(e["decide_to_complete_p99_ms"])))
		if n, ok := e["cross_replica_steps"]; ok {
			parts = append(parts, fmt.Sprintf("each run approved through the next replica after the one it was started and watched on; governed steps an executor of another replica than the approver's ran: %s", thousands(n)))
		}
	case "sustained":
		parts = append(parts, fmt.Sprintf("%s runs; CPU per run: this process (clients, control plane%s, executors) %.0f µs, redis-server %.0f µs; cores busy: this process %.2f, redis-server %.2f",
			thousands(float64(r.Runs)), map[bool]string{true: "s"}[e["replicas"] > 1], e["go_cpu_us_per_run"], e["redis_cpu_us_per_run"], e["go_cores"], e["redis_cores"]))
		if e["replicas"] > 1 {
			var by []string
			for i := range int(e["replicas"]) {
				by = append(by, thousands(e[fmt.Sprintf("replica_%d_runs", i)]))
			}
			parts = append(parts, fmt.Sprintf("%.0f replicas; runs through each: %s; runs whose step ran on another replica's executor than the client's: %s (%.1f %%); %.0f hint subscribers, %.2f PUBLISHes per run",
				e["replicas"], strings.Join(by, " / "), thousands(e["cross_replica_runs"]), 100*e["cross_replica_runs"]/float64(max(1, r.Runs)), e["hint_subscribers"], e["redis_publish_per_run"]))
		}
	case "dispatch":
		if n, ok := e["cross_replica_steps"]; ok {
			s := fmt.Sprintf("steps whose executor is on another replica than the run's: %s", thousands(n))
			if n > 0 {
				s += fmt.Sprintf(", p50 %s, p99 %s", fmtMs(e["cross_replica_p50_ms"]), fmtMs(e["cross_replica_p99_ms"]))
			}
			parts = append(parts, s)
		}
	case "fan-10", "fan-100":
		if n, ok := e["cross_replica_steps"]; ok {
			parts = append(parts, fmt.Sprintf("branches an executor of another replica than the run's ran: %s of %s", thousands(n), thousands(e["steps"])))
		}
	case "parked-memory":
		parts = append(parts, fmt.Sprintf("used_memory growth over %s runs parked through the API (StartRun), loaded at %s runs/s",
			thousands(e["parked_runs"]), thousands(e["loaded_runs_per_sec"])))
		var own []string
		for _, k := range slices.Sorted(maps.Keys(e)) {
			if kind, ok := strings.CutPrefix(k, "own_"); ok {
				own = append(own, fmt.Sprintf("%s %s B", strings.TrimSuffix(kind, "_bytes"), thousands(e[k])))
			}
		}
		if len(own) > 0 {
			parts = append(parts, fmt.Sprintf("one run's own keys (MEMORY USAGE): %s; index entries and keyspace ≈ %s B",
				strings.Join(own, ", "), thousands(e["indexes_and_keyspace_bytes"])))
		}
	case "inbox":
		if e["parked_runs"] < 1_000_000 {
			parts = append(parts, fmt.Sprintf("measured with %s parked runs (-parked), not the goal's 1,000,000; %s asks per person",
				thousands(e["parked_runs"]), thousands(e["asks_per_person"])))
		}
	case "trace-cost":
		parts = append(parts, fmt.Sprintf("off %s steps/s, on %s steps/s", thousands(e["off_steps_per_sec"]), thousands(e["on_steps_per_sec"])))
	}
	if v, ok := e["go_cpu_us_per_op"]; ok {
		per := "run"
		if r.Key == "inbox" {
			per = "query"
		}
		parts = append(parts, fmt.Sprintf("CPU per %s: this process %s µs, redis-server %s µs (%.1f Redis commands, %.1f of them EVALSHA)",
			per, thousands(v), thousands(e["redis_cpu_us_per_op"]), e["redis_calls_per_op"], e["redis_evalsha_per_op"]))
	}
	if v, ok := e["others_cores"]; ok {
		parts = append(parts, fmt.Sprintf("other processes kept %.1f of the machine's cores busy meanwhile", v))
	}
	return strings.Join(parts, "; ")
}

// JSON is the report as indented JSON.
func (r *Report) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	return append(b, '\n'), err
}

// quantile is the element at int(q·(n−1)) of the sorted sample, as the
// go test benchmarks and the Temporal peer pick it; 0 for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// msQuantile is quantile of durations, in milliseconds.
func msQuantile(ds []time.Duration, q float64) float64 {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = ms(d)
	}
	return quantile(xs, q)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// fmtMs writes milliseconds with about three significant digits.
func fmtMs(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

// thousands writes a rounded number with thousands separators.
func thousands(v float64) string {
	n := int64(math.Round(v))
	neg := n < 0
	if neg {
		n = -n
	}
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// loadavg is /proc/loadavg's 1-, 5- and 15-minute figures.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// redisVersion is redis-server --version's v=…, or why it is unknown.
func redisVersion() string {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v
		}
	}
	return strings.TrimSpace(string(out))
}
