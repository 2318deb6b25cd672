package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgOrSkip is the machine's PostgreSQL (TOLLGATE_BENCH_PG, or defaultPG),
// or a skip that says it is unreachable.
func pgOrSkip(t *testing.T) server {
	t.Helper()
	s := server{admin: defaultPG}
	if v := os.Getenv("TOLLGATE_BENCH_PG"); v != "" {
		s.admin = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := s.connect(ctx, "")
	if err != nil {
		t.Skipf("no PostgreSQL to run River on: %v", err)
	}
	c.Close(ctx)
	return s
}

// ourDatabases are the databases this process created and has not dropped.
func ourDatabases(t *testing.T, s server) []string {
	t.Helper()
	ctx := context.Background()
	c, err := s.connect(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, "SELECT datname FROM pg_database WHERE starts_with(datname, $1)", fmt.Sprintf("%s%d_", dbPrefix, os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestRunTiny runs every workload three times (the sustained phase
// briefly) on the real PostgreSQL, so the peer benchmark cannot rot.
func TestRunTiny(t *testing.T) {
	s := pgOrSkip(t)
	dir := t.TempDir()
	jsonPath, mdPath := filepath.Join(dir, "out.json"), filepath.Join(dir, "out.md")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	// A short cooldown keeps the test quick; the defaults are what the
	// benchmark runs by default.
	if err := Run(ctx, []string{"-pg", s.admin, "-json", jsonPath, "-md", mdPath, "-n", "3", "-duration", "1s", "-runs", "128", "-warmup", "1",
		"-fetch-cooldown", "5ms"}, &progress); err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if left := ourDatabases(t, s); len(left) > 0 {
		t.Errorf("databases left behind: %v", left)
	}

	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Peer != "river" || len(rep.Results) != len(workloads) {
		t.Fatalf("peer %q, %d results, want river and %d", rep.Peer, len(rep.Results), len(workloads))
	}
	for i, r := range rep.Results {
		if r.Key != workloads[i].key {
			t.Errorf("result %d is %q, want %q", i, r.Key, workloads[i].key)
		}
		if r.Runs < 1 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms || r.MaxMs < r.P99Ms {
			t.Errorf("%s: runs %d, p50 %v, p99 %v, max %v", r.Key, r.Runs, r.P50Ms, r.P99Ms, r.MaxMs)
		}
		switch r.Key {
		case "sustained":
			if r.StepsPerSec <= 0 || r.Clients != 64 || r.Runs > 128 {
				t.Errorf("sustained: %v steps/s with %d clients, %d runs", r.StepsPerSec, r.Clients, r.Runs)
			}
		case "dispatch":
			// A job is worked before its completion commits.
			if r.Runs != 3 || r.Extra["complete_p50_ms"] < r.P50Ms {
				t.Errorf("dispatch: %d runs, p50 %v, insert → complete p50 %v", r.Runs, r.P50Ms, r.Extra["complete_p50_ms"])
			}
		default:
			if r.Runs != 3 {
				t.Errorf("%s: %d runs, want 3", r.Key, r.Runs)
			}
		}
		// Every step was worked once: a chain's 3, a fan's width.
		want := map[string]float64{"one-step": 3, "three-step": 9, "fan-10": 30, "fan-100": 300}[r.Key]
		if want > 0 && r.Extra["steps"] != want {
			t.Errorf("%s: %v steps worked, want %v", r.Key, r.Extra["steps"], want)
		}
		// River's own completion event follows the committed completion.
		if r.Key == "one-step" && (r.Extra["event_missing"] != 0 || r.Extra["event_p50_ms"] < r.P50Ms) {
			t.Errorf("one-step: completion event p50 %v (missing %v), committed p50 %v", r.Extra["event_p50_ms"], r.Extra["event_missing"], r.P50Ms)
		}
	}
	if rep.Versions["river"] != "v0.51.2" || rep.Versions["pgx"] == "" || rep.Postgres["fsync"] == "" || rep.Params["fetch_cooldown"] != "5ms" {
		t.Errorf("versions %v, postgres %v, params %v", rep.Versions, rep.Postgres, rep.Params)
	}

	md, err := os.ReadFile(mdPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range workloads {
		figure := w.figure
		if w.key == "sustained" {
			figure = "sustained, 64 clients, 1-step jobs"
		}
		if !strings.Contains(string(md), "| "+figure+" | ") {
			t.Errorf("markdown lacks the row %q:\n%s", figure, md)
		}
	}
	for _, want := range []string{"fsync " + rep.Postgres["fsync"], "JobCompleteTx", "FetchCooldown 5ms"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// Databases of a process that is gone are dropped; those of a live one
// are not.
func TestDropStale(t *testing.T) {
	s := pgOrSkip(t)
	ctx := context.Background()
	c, err := s.connect(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	// Pid 1 is alive; 2^22+1 is above Linux's pid_max limit, so never alive.
	dead, live := dbPrefix+"4194305_test", dbPrefix+"1_test"
	for _, name := range []string{dead, live} {
		if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.dropDB(name) })
	}
	dropped, err := s.dropStale(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 1 || dropped[0] != dead {
		t.Errorf("dropped %v, want [%s]", dropped, dead)
	}
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", live).Scan(&n); err != nil || n != 1 {
		t.Errorf("the live process's database: %d, %v", n, err)
	}
}

func TestRunFlags(t *testing.T) {
	for _, args := range [][]string{{"-n", "0"}, {"-only", "nope"}, {"stray"}, {"-clients", "0"}, {"-max-conns", "1"}} {
		if err := Run(context.Background(), args, &bytes.Buffer{}); err == nil {
			t.Errorf("Run(%q) = nil, want an error", args)
		}
	}
}

func TestPercentiles(t *testing.T) {
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[len(ds)-1-i] = time.Duration(i+1) * time.Millisecond
	}
	p50, p99 := percentiles(ds)
	if p50 != 50 || p99 != 99 {
		t.Fatalf("p50 %v p99 %v, want 50 99", p50, p99)
	}
	if p50, p99 := percentiles(nil); p50 != 0 || p99 != 0 {
		t.Fatalf("empty: %v %v", p50, p99)
	}
}
