package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunTiny runs every workload three times (the sustained phase briefly)
// so the peer benchmark cannot rot.
func TestRunTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six Temporal servers")
	}
	dir := t.TempDir()
	jsonPath, mdPath := filepath.Join(dir, "out.json"), filepath.Join(dir, "out.md")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := Run(ctx, []string{"-json", jsonPath, "-md", mdPath, "-n", "3", "-duration", "1s", "-runs", "128", "-warmup", "1"}); err != nil {
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
	if !strings.Contains(string(md), "SQLite in memory") {
		t.Errorf("markdown does not name the persistence:\n%s", md)
	}
}

func TestRunFlags(t *testing.T) {
	for _, args := range [][]string{{"-n", "0"}, {"-only", "nope"}, {"stray"}, {"-clients", "0"}} {
		if err := Run(context.Background(), args); err == nil {
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
}

func TestRunTuned(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	md := filepath.Join(t.TempDir(), "out.md")
	if err := Run(context.Background(), []string{"-tuned", "-only", "one-step", "-n", "3", "-warmup", "0", "-md", md}); err != nil {
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
