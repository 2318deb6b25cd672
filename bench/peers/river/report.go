package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/tollgate-dev/tollgate/bench/peers/peerkit"
)

// Result is one workload's figures, in the Temporal peer's shape (the
// fields cmd/tollgate-bench -peers reads: key, figure, runs, clients,
// p50/p99/max ms, steps_per_sec, extra).
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
	ServerStartMs float64            `json:"server_start_ms"` // database, migrations and client
	Warnings      int                `json:"river_warnings"`
	Errors        int                `json:"river_errors"`
	Log           []string           `json:"river_log,omitempty"`
}

func (r Result) summary() string {
	s := fmt.Sprintf("p50 %s, p99 %s", fmtMs(r.P50Ms), fmtMs(r.P99Ms))
	if r.StepsPerSec > 0 {
		s = fmt.Sprintf("**%s steps/s**, p50 %s, p99 %s", peerkit.FmtRate(r.StepsPerSec), fmtMs(r.P50Ms), fmtMs(r.P99Ms))
	}
	return s
}

// note is what the extra figures add, in words.
func (r Result) note() string {
	e := r.Extra
	var parts []string
	if _, ok := e["complete_p50_ms"]; ok {
		parts = append(parts, fmt.Sprintf("insert → completion committed p50 %s, p99 %s", fmtMs(e["complete_p50_ms"]), fmtMs(e["complete_p99_ms"])))
	}
	if n := e["steps"]; n > 0 && (r.Key == "three-step" || strings.HasPrefix(r.Key, "fan-")) {
		parts = append(parts, fmt.Sprintf("dispatch of its %.0f steps p50 %s, p99 %s", n, fmtMs(e["dispatch_p50_ms"]), fmtMs(e["dispatch_p99_ms"])))
	}
	if _, ok := e["event_p50_ms"]; ok {
		s := fmt.Sprintf("insert → River's EventKindJobCompleted (its batch completer) p50 %s, p99 %s", fmtMs(e["event_p50_ms"]), fmtMs(e["event_p99_ms"]))
		if m := e["event_missing"]; m > 0 {
			s += fmt.Sprintf(" (%.0f events not received within 2 s)", m)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// Report is the JSON document.
type Report struct {
	Peer        string            `json:"peer"`
	Versions    map[string]string `json:"versions"`
	Machine     map[string]any    `json:"machine"`
	Setup       []string          `json:"setup"`
	Params      map[string]any    `json:"params"`
	Postgres    map[string]string `json:"postgres"`
	Date        string            `json:"date"`
	WallSeconds float64           `json:"wall_seconds"`
	LoadBefore  string            `json:"loadavg_before"`
	LoadAfter   string            `json:"loadavg_after"`
	Results     []Result          `json:"results"`
}

func newReport(cfg config, pg map[string]string) *Report {
	cooldown, poll := cfg.fetchCooldown, cfg.fetchPollInterval
	fetch := "FetchCooldown and FetchPollInterval: River's defaults (" + river.FetchCooldownDefault.String() + ", " + river.FetchPollIntervalDefault.String() + ")"
	if cooldown != 0 || poll != 0 {
		fetch = fmt.Sprintf("FetchCooldown %s, FetchPollInterval %s (set by -fetch-cooldown / -fetch-poll-interval; River's defaults are %s and %s)",
			orDefault(cooldown, river.FetchCooldownDefault), orDefault(poll, river.FetchPollIntervalDefault), river.FetchCooldownDefault, river.FetchPollIntervalDefault)
	}
	v := peerkit.Versions(map[string]string{
		"github.com/riverqueue/river":                        "river",
		"github.com/riverqueue/river/riverdriver/riverpgxv5": "riverpgxv5",
		"github.com/jackc/pgx/v5":                            "pgx",
	})
	// "15.20 (Debian 15.20-0+deb12u1)": the number; the whole is in Postgres.
	v["postgresql"] = strings.Fields(pg["server_version"] + " ?")[0]
	return &Report{
		Peer:     "river",
		Versions: v,
		Machine:  peerkit.Machine(),
		Setup: []string{
			fmt.Sprintf("PostgreSQL %s on this machine, over loopback TCP; its settings as found: fsync %s, synchronous_commit %s, wal_sync_method %s, full_page_writes %s, commit_delay %s: every commit waits for its WAL to reach the disk",
				pg["server_version"], pg["fsync"], pg["synchronous_commit"], pg["wal_sync_method"], pg["full_page_writes"], pg["commit_delay"]),
			"a fresh database for each workload, River's schema by rivermigrate (all migrations up), dropped after",
			fmt.Sprintf("one River client (riverpgxv5) that inserts and works, in this process; the default queue with MaxWorkers %d (River has no default: at least the sustained clients, so no job waits for a slot); one pgx pool of %d connections shared by client and workers", cfg.maxWorkers, cfg.maxConns),
			fetch + ": an insert sends a NOTIFY at most once per cooldown per queue, and the producer fetches at most once per cooldown; an insert that sent none waits for the next fetch",
			"the worker completes its job in its own transaction (JobCompleteTx); in a chain that transaction also inserts the next step (InsertTx), so the next step exists if and only if this one completed",
			"a timed job ends when the worker's transaction completing the last step has committed (the worker tells the waiting client in process as Commit returns); River's own completion path, the batch completer and its EventKindJobCompleted, is timed beside it in the notes",
			"dispatch: from just before the commit that made the step runnable (the client's Insert, or the previous step's transaction) to the first line of Work",
			"a fresh client for each workload; " + fmt.Sprint(cfg.warmup) + " uncounted 1-step jobs on each first; every job is a no-op",
			"percentiles: element int(q·(n−1)) of the sorted sample, as in test/e2e/bench_test.go",
		},
		Params: map[string]any{
			"n": cfg.n, "clients": cfg.clients, "duration": cfg.duration.String(), "runs_cap": cfg.runs, "warmup": cfg.warmup,
			"max_workers": cfg.maxWorkers, "max_conns": cfg.maxConns,
			"fetch_cooldown": orDefault(cooldown, river.FetchCooldownDefault).String(), "fetch_poll_interval": orDefault(poll, river.FetchPollIntervalDefault).String(),
		},
		Postgres:   pg,
		Date:       time.Now().UTC().Format(time.RFC3339),
		LoadBefore: peerkit.LoadAvg(),
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// markdown has the columns of the Temporal peer's table (figure, result,
// goal), with the setup above it and the notes below.
func (r *Report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Peer: River %s on PostgreSQL %s\n\n", r.Versions["river"], r.Versions["postgresql"])
	fmt.Fprintf(&b, "Machine: %s, %v CPUs, `GOMAXPROCS=%v`, %s. River %s (riverpgxv5 %s, pgx %s). n = %v per latency figure, sustained for %v with %v clients. %s, %.0f s in all; load average %s before, %s after.\n\n",
		r.Machine["cpu"], r.Machine["num_cpu"], r.Machine["gomaxprocs"], r.Versions["go"], r.Versions["river"], r.Versions["riverpgxv5"], r.Versions["pgx"],
		r.Params["n"], r.Params["duration"], r.Params["clients"], r.Date, r.WallSeconds, r.LoadBefore, r.LoadAfter)
	for _, s := range r.Setup {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	fmt.Fprintf(&b, "\n| figure | River %s, PostgreSQL %s | goal |\n| --- | --- | --- |\n", r.Versions["river"], r.Versions["postgresql"])
	for _, res := range r.Results {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", res.Figure, res.summary(), res.Goal)
	}
	b.WriteString("\n")
	for _, res := range r.Results {
		if n := res.note(); n != "" {
			fmt.Fprintf(&b, "- %s: %s\n", res.Key, n)
		}
		if res.Warnings+res.Errors > 0 {
			fmt.Fprintf(&b, "- %s: River logged %d warnings and %d errors; the first: `%s`\n",
				res.Key, res.Warnings, res.Errors, strings.ReplaceAll(res.Log[0], "`", "'"))
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
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}
