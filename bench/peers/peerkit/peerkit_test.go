package peerkit_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/bench/peers/peerkit"
	"github.com/tollgate-dev/tollgate/bench/peers/peerkit/pgtest"
)

// prefix is this test's own, apart from the peers'.
const prefix = "tollgate_bench_peerkit_"

func TestPercentiles(t *testing.T) {
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[len(ds)-1-i] = time.Duration(i+1) * time.Millisecond
	}
	p50, p99 := peerkit.Percentiles(ds)
	if p50 != 50 || p99 != 99 {
		t.Fatalf("p50 %v p99 %v, want 50 99", p50, p99)
	}
	if ds[0] != 100*time.Millisecond {
		t.Fatalf("the sample was sorted in place")
	}
	if p50, p99 := peerkit.Percentiles(nil); p50 != 0 || p99 != 0 {
		t.Fatalf("empty: %v %v", p50, p99)
	}
}

func TestFmtRate(t *testing.T) {
	for v, want := range map[float64]string{873.4: "873", 5012.9: "5,012", 12005: "12,005"} {
		if got := peerkit.FmtRate(v); got != want {
			t.Errorf("FmtRate(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestProgress(t *testing.T) {
	var b bytes.Buffer
	p := peerkit.NewProgress(&b, "peer")
	tick := p.Ticker("k", 3)
	for i := range 3 {
		tick(i + 1)
	}
	tally := peerkit.NewTally(p, "k", "sys")
	for i := range 7 {
		tally.Add(i == 0, "line")
	}
	if w, e, first := tally.Counts(); w != 6 || e != 1 || len(first) != 5 {
		t.Errorf("tally: %d warnings, %d errors, %d lines kept", w, e, len(first))
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3+5 || !strings.HasPrefix(lines[0], "peer    0.0s: k: 1/3") || !strings.HasSuffix(lines[3], ": k: sys: line") {
		t.Errorf("progress:\n%s", b.String())
	}
	var none *peerkit.Progress
	none.Printf("nothing") // a nil Progress writes nothing
}

func TestSustained(t *testing.T) {
	s := peerkit.Sustained{Key: "k", Noun: "job", Clients: 4, Duration: time.Minute, Cap: 10}
	lat, elapsed, err := s.Run(context.Background(), nil, func(context.Context) (time.Duration, error) { return time.Millisecond, nil })
	if err != nil || len(lat) != 10 || elapsed <= 0 {
		t.Fatalf("capped at 10: %d latencies in %v, %v", len(lat), elapsed, err)
	}
	var calls atomic.Int64
	boom := errors.New("boom")
	_, _, err = s.Run(context.Background(), nil, func(ctx context.Context) (time.Duration, error) {
		if calls.Add(1) == 3 {
			return 0, boom
		}
		return time.Millisecond, nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	s.Duration = time.Nanosecond
	if _, _, err := s.Run(context.Background(), nil, nil); err == nil || err.Error() != "no job completed" {
		t.Fatalf("err %v, want no job completed", err)
	}
}

// Databases of a process that is gone are dropped; those of a live one
// are not.
func TestDropStale(t *testing.T) {
	s := pgtest.OrSkip(t, prefix, "the peers")
	ctx := context.Background()
	c, err := s.Connect(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	// Pid 1 is alive; 2^22+1 is above Linux's pid_max limit, so never alive.
	dead, live := prefix+"4194305_test", prefix+"1_test"
	for _, name := range []string{dead, live} {
		if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.DropDB(name) })
	}
	dropped, err := s.DropStale(ctx)
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

// CreateDB makes DBName(key) afresh, DropDB drops it, and Ours sees both.
func TestCreateDropDB(t *testing.T) {
	s := pgtest.OrSkip(t, prefix, "the peers")
	ctx := context.Background()
	for range 2 { // the second finds the first's database and replaces it
		name, err := s.CreateDB(ctx, "a-key")
		if err != nil {
			t.Fatal(err)
		}
		if name != s.DBName("a-key") || !strings.HasSuffix(name, "_a_key") {
			t.Fatalf("created %q, DBName %q", name, s.DBName("a-key"))
		}
	}
	if ours := pgtest.Ours(t, s); len(ours) != 1 {
		t.Fatalf("ours: %v", ours)
	}
	if err := s.DropDB(s.DBName("a-key")); err != nil {
		t.Fatal(err)
	}
	if ours := pgtest.Ours(t, s); len(ours) != 0 {
		t.Fatalf("left: %v", ours)
	}
	set, err := s.Settings(ctx)
	if err != nil || set["server_version"] == "" || set["fsync"] == "" {
		t.Fatalf("settings %v, %v", set, err)
	}
}
