package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/bench/peers/peerkit"
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
		s = fmt.Sprintf("**%s steps/s**, p99 %s", peerkit.FmtRate(r.StepsPerSec), fmtMs(r.P99Ms))
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
	Postgres    map[string]string `json:"postgres,omitempty"` // the server's settings, with -store postgres
	Date        string            `json:"date"`
	WallSeconds float64           `json:"wall_seconds"`
	LoadBefore  string            `json:"loadavg_before"`
	LoadAfter   string            `json:"loadavg_after"`
	Results     []Result          `json:"results"`
}

// sqlitePersistence is what temporaltest runs on (v1.32.0
// temporaltest/internal/lite_server.go: Ephemeral, mode=memory,
// cache=shared, NumHistoryShards 1).
const sqlitePersistence = "SQLite in memory (shared cache), 1 history shard"

// persistence is the report's one-line account of where the server keeps
// its state.
func (r *Report) persistence() string {
	if r.Params["store"] != storePostgres {
		return sqlitePersistence
	}
	return fmt.Sprintf("PostgreSQL %s (fsync %s, synchronous_commit %s), %v history shards",
		strings.Fields(r.Postgres["server_version"] + " ?")[0], r.Postgres["fsync"], r.Postgres["synchronous_commit"], r.Params["shards"])
}

func newReport(cfg config, pg map[string]string) *Report {
	dc := "dynamic config: the server's defaults (history queues read at most 20 times a second per shard; matching: 4 task-queue partitions, default poller and forwarder settings)"
	if cfg.tuned {
		dc = "-tuned: history.transferProcessorMaxPollRPS and history.visibilityProcessorMaxPollRPS raised from 20 to 10000 per shard; otherwise the server's defaults"
	}
	var server, persist []string
	if cfg.store == storePostgres {
		server = []string{"temporal.NewServer (the server module's own, as the temporal binary runs it): frontend, history, matching and worker services in this process, gRPC on 127.0.0.1"}
		persist = []string{
			fmt.Sprintf("persistence: PostgreSQL %s on this machine over loopback TCP, Temporal's postgres12_pgx plugin; a fresh database for the default store and one for visibility per workload, schema by the server module's schema tool (tools/sql: setup-schema 0.0, then update-schema over the embedded schema/postgresql/v12), dropped after", pg["server_version"]),
			fmt.Sprintf("PostgreSQL settings as found: fsync %s, synchronous_commit %s, wal_sync_method %s, full_page_writes %s, commit_delay %s, max_connections %s: every commit waits for its WAL to reach the disk",
				pg["fsync"], pg["synchronous_commit"], pg["wal_sync_method"], pg["full_page_writes"], pg["commit_delay"], pg["max_connections"]),
			fmt.Sprintf("%d history shards (Temporal's own docker and development-postgres12 configs; each shard has its own owner, range lock and queue readers, so concurrent workflows spread over them; more shards on 2 cores only add idle readers); connection pools per service as Temporal's docker config: %d per service to the default store, %d to visibility", cfg.shards, defaultMaxConns, visibilityMaxConns),
		}
	} else {
		server = []string{"temporaltest.NewServer: frontend, history, matching and worker services in this process, frontend gRPC on 127.0.0.1"}
		persist = []string{"persistence and visibility: " + sqlitePersistence + "; nothing is fsynced"}
	}
	setup := append(server, persist...)
	setup = append(setup,
		dc,
		"one SDK worker (default options) and one shared SDK client in the same process, over loopback gRPC",
		"a fresh server for each workload; "+fmt.Sprint(cfg.warmup)+" uncounted 1-step runs on each first",
		"activities are handed to the worker eagerly with the workflow task that schedules them (server default system.enableActivityEagerExecution); workflow starts are not eager (SDK default)",
		"every activity is a no-op; the client waits for completion with WorkflowRun.Get (long poll on history)",
		"percentiles: element int(q·(n−1)) of the sorted sample, as in test/e2e/bench_test.go",
	)
	params := map[string]any{
		"n": cfg.n, "clients": cfg.clients, "duration": cfg.duration.String(), "runs_cap": cfg.runs, "warmup": cfg.warmup, "tuned": cfg.tuned,
		"store": cfg.store,
	}
	if cfg.store == storePostgres {
		params["shards"] = cfg.shards
	} else {
		params["shards"] = 1
	}
	v := peerkit.Versions(map[string]string{
		"go.temporal.io/server": "server",
		"go.temporal.io/sdk":    "sdk",
		"go.temporal.io/api":    "api",
	})
	return &Report{
		Peer:       "temporal",
		Versions:   v,
		Machine:    peerkit.Machine(),
		Setup:      setup,
		Params:     params,
		Postgres:   pg,
		Date:       time.Now().UTC().Format(time.RFC3339),
		LoadBefore: peerkit.LoadAvg(),
	}
}

// markdown has the columns of BENCHMARKS.md's run tables (figure, result,
// goal) and the same figure names, so its rows line up with Tollgate's.
func (r *Report) markdown() string {
	var b strings.Builder
	server := r.Versions["server"]
	if server == "" {
		server = "(version unknown)"
	}
	how := "`temporaltest`"
	if r.Params["store"] == storePostgres {
		how = "`temporal.NewServer` on PostgreSQL"
	}
	fmt.Fprintf(&b, "## Peer: Temporal %s (%s)\n\n", server, how)
	fmt.Fprintf(&b, "Machine: %s, %v CPUs, `GOMAXPROCS=%v`, %s. Temporal server %s (%s), Go SDK %s, API %s.\n",
		r.Machine["cpu"], r.Machine["num_cpu"], r.Machine["gomaxprocs"], r.Versions["go"], server, how, r.Versions["sdk"], r.Versions["api"])
	disk := "nothing reaches a disk, unlike Tollgate's Redis AOF"
	if r.Params["store"] == storePostgres {
		disk = "every commit waits for PostgreSQL's WAL fsync"
	}
	fmt.Fprintf(&b, "Persistence: **%s** — %s. "+
		"Server, one worker and one client in one process over loopback gRPC; a fresh server per workload; "+
		"activities dispatched eagerly (server default), workflow tasks through matching; "+
		"n = %v per latency figure, sustained for %v with %v clients. %s, %.0f s in all; load average %s before, %s after.\n\n",
		r.persistence(), disk, r.Params["n"], r.Params["duration"], r.Params["clients"], r.Date, r.WallSeconds, r.LoadBefore, r.LoadAfter)
	for _, s := range r.Setup {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	b.WriteString("\n")
	column := "Temporal " + server + ", SQLite in memory"
	if r.Params["store"] == storePostgres {
		column = fmt.Sprintf("Temporal %s, PostgreSQL, %v shards", server, r.Params["shards"])
	}
	if r.Params["tuned"] == true {
		column += ", poll limits raised (`-tuned`)"
		b.WriteString("Tuned: `history.transferProcessorMaxPollRPS` and `history.visibilityProcessorMaxPollRPS` raised from 20 to 10000 " +
			"(by default each history shard's queues read at most 20 times a second, so a workflow task can wait up to 50 ms for the next read).\n\n")
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
	var peaks []string
	for _, res := range r.Results {
		if p, ok := res.Extra["pg_connections_peak"]; ok {
			peaks = append(peaks, fmt.Sprintf("%s %.0f", res.Key, p))
		}
	}
	if len(peaks) > 0 {
		fmt.Fprintf(&b, "\nPeak PostgreSQL connections to the workload's databases (sampled every 250 ms; max_connections %s): %s.\n",
			r.Postgres["max_connections"], strings.Join(peaks, ", "))
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
