package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/bench/peers/peerkit/pgtest"
)

// pgOrSkip is the machine's PostgreSQL (TOLLGATE_BENCH_PG, or
// peerkit.DefaultPG), or a skip that says it is unreachable.
func pgOrSkip(t *testing.T) pgServer {
	t.Helper()
	return pgServer{pgtest.OrSkip(t, dbPrefix, "Temporal")}
}

// TestRunTiny runs every workload three times (the sustained phase briefly)
// on each store so the peer benchmark cannot rot: Temporal's own server on
// the machine's PostgreSQL, and temporaltest's SQLite in memory.
func TestRunTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six Temporal servers per store")
	}
	t.Run("postgres", func(t *testing.T) {
		s := pgOrSkip(t)
		rep, md := runTiny(t, "-store", "postgres", "-pg", s.Admin, "-shards", "2")
		if left := pgtest.Ours(t, s.PG); len(left) > 0 {
			t.Errorf("databases left behind: %v", left)
		}
		if rep.Params["store"] != "postgres" || rep.Params["shards"] != float64(2) || rep.Postgres["fsync"] == "" || rep.Postgres["synchronous_commit"] == "" {
			t.Errorf("params %v, postgres %v", rep.Params, rep.Postgres)
		}
		for _, r := range rep.Results {
			if p := r.Extra["pg_connections_peak"]; p < 2 {
				t.Errorf("%s: peak connections %v: the sampler saw no server", r.Key, p)
			}
		}
		for _, want := range []string{"PostgreSQL", "2 history shards", "fsync " + rep.Postgres["fsync"], "postgres12_pgx"} {
			if !strings.Contains(md, want) {
				t.Errorf("markdown lacks %q:\n%s", want, md)
			}
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		rep, md := runTiny(t, "-store", "sqlite")
		if rep.Params["store"] != "sqlite" || rep.Postgres != nil {
			t.Errorf("params %v, postgres %v", rep.Params, rep.Postgres)
		}
		if !strings.Contains(md, "SQLite in memory") {
			t.Errorf("markdown does not name the persistence:\n%s", md)
		}
	})
}

// runTiny runs every workload with N = 3 and the store args, checks the
// figures hang together, and returns the report and its Markdown.
func runTiny(t *testing.T, store ...string) (*Report, string) {
	t.Helper()
	dir := t.TempDir()
	jsonPath, mdPath := filepath.Join(dir, "out.json"), filepath.Join(dir, "out.md")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append([]string{"-json", jsonPath, "-md", mdPath, "-n", "3", "-duration", "1s", "-runs", "128", "-warmup", "1"}, store...)
	if err := Run(ctx, args); err != nil {
		t.Fatal(err)
	}

	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(workloads) {
		t.Fatalf("%d results, want %d", len(rep.Results), len(workloads))
	}
	for i, r := range rep.Results {
		if r.Key != workloads[i].key {
			t.Errorf("result %d is %q, want %q", i, r.Key, workloads[i].key)
		}
		if r.Runs < 1 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms {
			t.Errorf("%s: runs %d, p50 %v, p99 %v", r.Key, r.Runs, r.P50Ms, r.P99Ms)
		}
		switch r.Key {
		case "sustained":
			if r.StepsPerSec <= 0 || r.Clients != 64 {
				t.Errorf("sustained: %v steps/s with %d clients", r.StepsPerSec, r.Clients)
			}
		case "approve":
			if r.Extra["signal_to_complete_p50_ms"] < r.P50Ms {
				t.Errorf("approve: signal → complete %v before signal → started %v", r.Extra["signal_to_complete_p50_ms"], r.P50Ms)
			}
		default:
			if r.Runs != 3 {
				t.Errorf("%s: %d runs, want 3", r.Key, r.Runs)
			}
			// Each run closes on the server before the client's Get returns.
			if c := r.Extra["server_close_p50_ms"]; c <= 0 || c > r.P50Ms {
				t.Errorf("%s: start → recorded close p50 %v, client p50 %v", r.Key, c, r.P50Ms)
			}
		}
	}
	if rep.Versions["server"] == "" || rep.Versions["sdk"] == "" {
		t.Errorf("versions: %v", rep.Versions)
	}

	md, err := os.ReadFile(mdPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range workloads {
		if !strings.Contains(string(md), "| "+w.figure+" | ") {
			t.Errorf("markdown lacks the row %q:\n%s", w.figure, md)
		}
	}
	return &rep, string(md)
}

func TestRunFlags(t *testing.T) {
	for _, args := range [][]string{{"-n", "0"}, {"-only", "nope"}, {"stray"}, {"-clients", "0"}, {"-store", "mysql"}, {"-shards", "0"}} {
		if err := Run(context.Background(), args); err == nil {
			t.Errorf("Run(%q) = nil, want an error", args)
		}
	}
}

func TestRunTuned(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	md := filepath.Join(t.TempDir(), "out.md")
	if err := Run(context.Background(), []string{"-store", "sqlite", "-tuned", "-only", "one-step", "-n", "3", "-warmup", "0", "-md", md}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "poll limits raised") || !strings.Contains(string(b), "| 1-step run, start → complete | p50 ") {
		t.Fatalf("markdown:\n%s", b)
	}
}
