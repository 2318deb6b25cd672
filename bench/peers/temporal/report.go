package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Result is one workload's figures.
type Result struct {
	Key           string             `json:"key"`
	Figure        string             `json:"figure"`
	Goal          string             `json:"tollgate_goal"`
	Runs          int                `json:"runs"`
	Clients       int                `json:"clients,omitempty"`
	P50Ms         float64            `json:"p50_ms"`
	P99Ms         float64            `json:"p99_ms"`
	MaxMs         float64            `json:"max_ms"`
	StepsPerSec   float64            `json:"steps_per_sec,omitempty"`
	Extra         map[string]float64 `json:"extra,omitempty"`
	Seconds       float64            `json:"seconds"`
	ServerStartMs float64            `json:"server_start_ms"`
	SDKWarnings   int                `json:"sdk_warnings"`
	SDKErrors     int                `json:"sdk_errors"`
	SDKLog        []string           `json:"sdk_log,omitempty"`
}

func (r Result) summary() string {
	s := fmt.Sprintf("p50 %s, p99 %s", fmtMs(r.P50Ms), fmtMs(r.P99Ms))
	if r.StepsPerSec > 0 {
		s = fmt.Sprintf("**%s steps/s**, p99 %s", fmtRate(r.StepsPerSec), fmtMs(r.P99Ms))
	}
	if p50, ok := r.Extra["signal_to_complete_p50_ms"]; ok {
		s += fmt.Sprintf(" (→ complete: p50 %s, p99 %s)", fmtMs(p50), fmtMs(r.Extra["signal_to_complete_p99_ms"]))
	}
	return s
}

// Report is the JSON document.
type Report struct {
	Peer        string            `json:"peer"`
	Versions    map[string]string `json:"versions"`
	Machine     map[string]any    `json:"machine"`
	Setup       []string          `json:"setup"`
	Params      map[string]any    `json:"params"`
	Date        string            `json:"date"`
	WallSeconds float64           `json:"wall_seconds"`
	LoadBefore  string            `json:"loadavg_before"`
	LoadAfter   string            `json:"loadavg_after"`
	Results     []Result          `json:"results"`
}

// Persistence is what temporaltest runs on (v1.32.0
// temporaltest/internal/lite_server.go: Ephemeral, mode=memory, cache=shared,
// NumHistoryShards 1).
const persistence = "SQLite in memory (shared cache), 1 history shard"

func newReport(cfg config) *Report {
	dc := "temporaltest's dynamic config: defaults (history queues read at most 20 times a second per shard)"
	if cfg.tuned {
		dc = "-tuned: history.transferProcessorMaxPollRPS and history.visibilityProcessorMaxPollRPS raised from 20 to 10000"
	}
	return &Report{
		Peer:     "temporal",
		Versions: versions(),
		Machine: map[string]any{
			"goos": runtime.GOOS, "goarch": runtime.GOARCH,
			"num_cpu": runtime.NumCPU(), "gomaxprocs": runtime.GOMAXPROCS(0),
			"cpu": cpuModel(),
		},
		Setup: []string{
			"temporaltest.NewServer: frontend, history, matching and worker services in this process, frontend gRPC on 127.0.0.1",
			"persistence and visibility: " + persistence + "; nothing is fsynced",
			dc,
			"one SDK worker (default options) and one shared SDK client in the same process, over loopback gRPC",
			"a fresh server for each workload; " + fmt.Sprint(cfg.warmup) + " uncounted 1-step runs on each first",
			"activities are handed to the worker eagerly with the workflow task that schedules them (server default system.enableActivityEagerExecution); workflow starts are not eager (SDK default)",
			"every activity is a no-op; the client waits for completion with WorkflowRun.Get (long poll on history)",
			"percentiles: element int(q·(n−1)) of the sorted sample, as in test/e2e/bench_test.go",
		},
		Params: map[string]any{
			"n": cfg.n, "clients": cfg.clients, "duration": cfg.duration.String(), "runs_cap": cfg.runs, "warmup": cfg.warmup, "tuned": cfg.tuned,
		},
		Date:       time.Now().UTC().Format(time.RFC3339),
		LoadBefore: loadavg(),
	}
}

// loadavg is /proc/loadavg's 1-, 5- and 15-minute figures: the machine is
// shared, so the report says how busy it was.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func versions() map[string]string {
	v := map[string]string{"go": runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "go.temporal.io/server", "go.temporal.io/sdk", "go.temporal.io/api":
				if d.Replace != nil {
					d = d.Replace
				}
				v[strings.TrimPrefix(d.Path, "go.temporal.io/")] = d.Version
			}
		}
	}
	return v
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func (r *Report) write(cfg config) error {
	if cfg.jsonPath != "" {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		if err := output(cfg.jsonPath, append(b, '\n')); err != nil {
			return err
		}
	}
	if cfg.mdPath != "" {
		if err := output(cfg.mdPath, []byte(r.markdown())); err != nil {
			return err
		}
	}
	return nil
}

func output(path string, b []byte) error {
	if path == "-" {
		_, err := os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// markdown has the columns of BENCHMARKS.md's run tables (figure, result,
// goal) and the same figure names, so its rows line up with Tollgate's.
func (r *Report) markdown() string {
	var b strings.Builder
	server := r.Versions["server"]
	if server == "" {
		server = "(version unknown)"
	}
	fmt.Fprintf(&b, "## Peer: Temporal %s (`temporaltest`)\n\n", server)
	fmt.Fprintf(&b, "Machine: %s, %v CPUs, `GOMAXPROCS=%v`, %s. Temporal server %s (`temporaltest`), Go SDK %s, API %s.\n",
		r.Machine["cpu"], r.Machine["num_cpu"], r.Machine["gomaxprocs"], r.Versions["go"], server, r.Versions["sdk"], r.Versions["api"])
	fmt.Fprintf(&b, "Persistence: **%s** — nothing reaches a disk, unlike Tollgate's Redis AOF. "+
		"Server, one worker and one client in one process over loopback gRPC; a fresh server per workload; "+
		"activities dispatched eagerly (server default), workflow tasks through matching; "+
		"n = %v per latency figure, sustained for %v with %v clients. %s, %.0f s in all; load average %s before, %s after.\n\n",
		persistence, r.Params["n"], r.Params["duration"], r.Params["clients"], r.Date, r.WallSeconds, r.LoadBefore, r.LoadAfter)
	column := "Temporal " + server + ", SQLite in memory"
	if r.Params["tuned"] == true {
		column += ", poll limits raised (`-tuned`)"
		b.WriteString("Tuned: `history.transferProcessorMaxPollRPS` and `history.visibilityProcessorMaxPollRPS` raised from 20 to 10000 " +
			"(temporaltest runs one history shard, so by default every workflow task waits for the next of 20 reads a second).\n\n")
	}
	fmt.Fprintf(&b, "| figure | %s | goal |\n| --- | --- | --- |\n", column)
	for _, res := range r.Results {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", res.Figure, res.summary(), res.Goal)
	}
	for _, res := range r.Results {
		if late := res.Extra["late_wakeups"]; late > 0 {
			fmt.Fprintf(&b, "\n%s: in %.0f of %d runs `WorkflowRun.Get` returned over 1 s after the close the server recorded "+
				"(a missed wake-up; the history long poll expires after 20 s). Start → recorded close: p50 %s, p99 %s.\n",
				res.Key, late, res.Runs, fmtMs(res.Extra["server_close_p50_ms"]), fmtMs(res.Extra["server_close_p99_ms"]))
		}
		if res.SDKWarnings+res.SDKErrors > 0 {
			fmt.Fprintf(&b, "\n%s: the SDK logged %d warnings and %d errors; the first: `%s`\n",
				res.Key, res.SDKWarnings, res.SDKErrors, strings.ReplaceAll(res.SDKLog[0], "`", "'"))
		}
	}
	b.WriteString("\nThe goals are Tollgate's (DESIGN.md §12); its own figures are in BENCHMARKS.md.\n")
	return b.String()
}

func fmtMs(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	default:
		return fmt.Sprintf("%.1f ms", v)
	}
}

func fmtRate(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%d,%03d", int(v)/1000, int(v)%1000)
	}
	return fmt.Sprintf("%.0f", v)
}
