package main

import (
	"bytes"
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
func pgOrSkip(t *testing.T) server {
	t.Helper()
	return server{pgtest.OrSkip(t, dbPrefix, "River")}
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
	if err := Run(ctx, []string{"-pg", s.Admin, "-json", jsonPath, "-md", mdPath, "-n", "3", "-duration", "1s", "-runs", "128", "-warmup", "1",
		"-fetch-cooldown", "5ms"}, &progress); err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if left := pgtest.Ours(t, s.PG); len(left) > 0 {
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

func TestRunFlags(t *testing.T) {
	for _, args := range [][]string{{"-n", "0"}, {"-only", "nope"}, {"stray"}, {"-clients", "0"}, {"-max-conns", "1"}} {
		if err := Run(context.Background(), args, &bytes.Buffer{}); err == nil {
			t.Errorf("Run(%q) = nil, want an error", args)
		}
	}
}
