package redisstore

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/store/storetest"
)

// Benchmarks run against a private redis-server with appendfsync always,
// as production does:
//
//	go test -run '^$' -bench 'Commit' -benchtime 3000x ./internal/store/redisstore
//	go test -run '^$' -bench 'Inbox' -benchtime 3000x ./internal/store/redisstore
//	go test -run '^$' -bench 'Memory' -benchtime 1x ./internal/store/redisstore
//
// TOLLGATE_BENCH_ASKS sets how many parked runs the last two load
// (default 100,000); TOLLGATE_BENCH_REDIS_ARGS adds redis-server flags.

// runData is an opaque engine state blob (~300 bytes), the same since
// issue 3 so figures compare across versions. (The runner now stores a
// run compactly, engine.EncodeStored: the bench's real parked run is
// ~250 bytes of it; see cmd/tollgate-bench -only inbox.)
var runData = []byte(`{"plan":"sha256:9f2c1e7a4b","cursor":{"phase":"approve","step":"pay_invoice","attempt":1},` +
	`"steps":{"fetch_invoice":{"state":"done","executor":"edge-1","lease":"l-0192","ms":41},` +
	`"check_vendor":{"state":"done","executor":"edge-2","lease":"l-0193","ms":87}},` +
	`"inputs":{"invoice":"INV-2026-00417","amount":"1250.00","currency":"EUR"}}`)

// parkedRun is a run as the engine parks it on an approval: created with
// one pending ask and two journal records.
func parkedRun(i int, expires time.Time) store.Commit {
	id := fmt.Sprintf("01J%023d", i) // a ULID-sized id
	r := store.Run{ID: id, Version: 1, State: "parked", Requester: fmt.Sprintf("user:u%03d", i%97), Skill: "pay-invoice",
		PlanDigest: "sha256:9f2c1e7a4b5d6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f9012a3b4c5d6e7f80",
		CreatedAt:  base.Add(time.Duration(i) * time.Millisecond), Data: runData}
	r.UpdatedAt = r.CreatedAt
	recs := []store.JournalRecord{
		{Time: r.CreatedAt, Actor: r.Requester, Kind: "run.started", Payload: json.RawMessage(`{"skill":"pay-invoice","via":"approvectl"}`)},
		{Time: r.CreatedAt, Actor: "tollgate", Kind: "ask.opened", Payload: json.RawMessage(`{"ask":"approve_payment","audience":"role:finance"}`)},
	}
	r.JournalSeq, r.JournalHead = store.Chain(id, 0, "", recs)
	a := store.Ask{ID: store.AskID(id, "approve_payment"), RunID: id, Title: "Approve payment of 1,250.00 EUR to ACME GmbH?",
		State: "pending", Audience: fmt.Sprintf("user:u%03d", i%100), Requester: r.Requester, CreatedAt: r.CreatedAt,
		DueAt: expires.Add(time.Duration(i) * time.Millisecond)}
	return store.Commit{Run: r, Asks: []store.Ask{a}, Journal: recs}
}

// load creates n parked runs with pipelined commit scripts (the same
// script and arguments as Commit; a create has nothing to read first).
func load(tb testing.TB, s *Store, n int) {
	tb.Helper()
	expires := time.Now().Add(24 * time.Hour)
	const batch = 1000
	for start := 0; start < n; start += batch {
		pipe := s.rdb.Pipeline()
		for i := start; i < min(start+batch, n); i++ {
			p, err := s.prepare(parkedRun(i, expires))
			if err != nil {
				tb.Fatal(err)
			}
			keys, args, _, err := s.scriptArgs(p, prior{})
			if err != nil {
				tb.Fatal(err)
			}
			commitScript.EvalSha(ctx, pipe, keys, args...)
		}
		cmds, err := pipe.Exec(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		for _, c := range cmds {
			if v, _ := c.(interface{ Val() any }).Val().(int64); v != 0 {
				tb.Fatalf("bulk create answered %d", v)
			}
		}
	}
}

// settle waits until Redis has no background child (the append-only file
// rewrite that a bulk load sets off), so queries are timed in steady state.
func settle(tb testing.TB, s *Store) {
	tb.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Minute)
	for {
		info, err := s.rdb.Info(ctx, "persistence").Result()
		if err != nil {
			tb.Fatal(err)
		}
		if !strings.Contains(info, "aof_rewrite_in_progress:1") && !strings.Contains(info, "aof_rewrite_scheduled:1") &&
			!strings.Contains(info, "rdb_bgsave_in_progress:1") {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			tb.Fatal("Redis is still rewriting its append-only file after 5 minutes")
		}
	}
}

var usedMemoryRE = regexp.MustCompile(`(?m)^used_memory:(\d+)`)

func usedMemory(tb testing.TB, s *Store) int64 {
	tb.Helper()
	info, err := s.rdb.Info(ctx, "memory").Result()
	if err != nil {
		tb.Fatal(err)
	}
	m := usedMemoryRE.FindStringSubmatch(info)
	if m == nil {
		tb.Fatalf("no used_memory in %q", info)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// redisOpts passes TOLLGATE_BENCH_REDIS_ARGS (space-separated) to
// redis-server, e.g. "--appendfsync everysec" to see what fsync costs, or
// "--hash-max-listpack-value 1024" to see what a compact run hash saves.
func redisOpts() []redistest.Option {
	if v := strings.Fields(os.Getenv("TOLLGATE_BENCH_REDIS_ARGS")); len(v) > 0 {
		return []redistest.Option{redistest.Args(v...)}
	}
	return nil
}

func benchAsks() int {
	if v, err := strconv.Atoi(os.Getenv("TOLLGATE_BENCH_ASKS")); err == nil && v > 0 {
		return v
	}
	return 100_000
}

func percentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// BenchmarkCommit is one transition: a parked run decided (run state,
// one ask moved between index sets, two journal records), and back.
func BenchmarkCommit(b *testing.B) {
	s, _ := newStore(b, Config{}, redisOpts()...)
	exp := time.Now().Add(24 * time.Hour)
	c := parkedRun(1, exp)
	if err := s.Commit(ctx, c); err != nil {
		b.Fatal(err)
	}
	prev, ask := c.Run, c.Asks[0]
	var lat []time.Duration
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		st, ast := "running", "approved"
		if i%2 == 0 {
			st, ast = "parked", "pending"
		}
		ask.State = ast
		c := storetest.Commit(prev, prev.Version, st, []store.Ask{ask}, "ask.decided", "run.resumed")
		c.Run.Data = runData
		c.Deadline = ask.DueAt
		b.StartTimer()
		t0 := time.Now()
		if err := s.Commit(ctx, c); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		prev = c.Run
	}
	percentiles(b, lat)
	reportScriptCPU(b, s)
}

// BenchmarkCommitParallel commits transitions of many runs at once (one
// run per goroutine, 2× GOMAXPROCS goroutines).
func BenchmarkCommitParallel(b *testing.B) {
	s, _ := newStore(b, Config{}, redisOpts()...)
	exp := time.Now().Add(24 * time.Hour)
	var next atomic.Int64
	b.SetParallelism(2)
	b.RunParallel(func(pb *testing.PB) {
		c := parkedRun(int(next.Add(1)), exp)
		if err := s.Commit(ctx, c); err != nil {
			b.Error(err)
			return
		}
		prev, ask := c.Run, c.Asks[0]
		i := 0
		for pb.Next() {
			i++
			st, ast := "running", "approved"
			if i%2 == 0 {
				st, ast = "parked", "pending"
			}
			ask.State = ast
			c := storetest.Commit(prev, prev.Version, st, []store.Ask{ask}, "ask.decided", "run.resumed")
			c.Run.Data = runData
			if err := s.Commit(ctx, c); err != nil {
				b.Error(err)
				return
			}
			prev = c.Run
		}
	})
}

// BenchmarkListAsksInbox loads TOLLGATE_BENCH_ASKS parked runs (default
// 100,000), each with one pending ask for one of 100 users, and times one
// user's inbox: ListAsks{pending, that user, limit 50}. It also reports
// Redis's used_memory growth per parked run (with its ask, two journal
// records and every index entry).
func BenchmarkListAsksInbox(b *testing.B) {
	s, _ := newStore(b, Config{}, redisOpts()...)
	n := benchAsks()
	before := usedMemory(b, s)
	t0 := time.Now()
	load(b, s, n)
	loaded := time.Since(t0)
	perRun := float64(usedMemory(b, s)-before) / float64(n)
	settle(b, s)
	q := store.AskQuery{States: []string{"pending"}, Audiences: []string{"user:u007"}, Limit: 50}
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		page, next, err := s.ListAsks(ctx, q)
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		if len(page) != min(50, n/100) || (n/100 > 50 && next == "") {
			b.Fatalf("%d asks, next %q", len(page), next)
		}
	}
	percentiles(b, lat)
	// After the loop: b.Loop's first call resets reported metrics.
	b.ReportMetric(perRun, "bytes/parked-run")
	b.ReportMetric(float64(n)/loaded.Seconds(), "loaded-runs/s")
}

// BenchmarkParkedRunMemory loads TOLLGATE_BENCH_ASKS parked runs per
// iteration into an empty Redis and reports used_memory growth per run;
// ns/op is the bulk load of all of them.
func BenchmarkParkedRunMemory(b *testing.B) {
	s, srv := newStore(b, Config{}, redisOpts()...)
	n := benchAsks()
	var total int64
	iters := 0
	for b.Loop() {
		b.StopTimer()
		if _, err := srv.Do("FLUSHALL"); err != nil {
			b.Fatal(err)
		}
		before := usedMemory(b, s)
		b.StartTimer()
		load(b, s, n)
		b.StopTimer()
		total += usedMemory(b, s) - before
		iters++
		b.StartTimer()
	}
	b.ReportMetric(float64(total)/float64(iters*n), "bytes/parked-run")
	// Where it goes: MEMORY USAGE of one run's own key (its asks and its
	// journal's tail inside); the rest is index entries and the keyspace's
	// own tables.
	c := parkedRun(n/2, time.Now())
	tag := s.runTag(c.Run.ID)
	for _, k := range []struct{ key, unit string }{{runKey(tag, c.Run.ID), "run-key-B"}} {
		u, err := s.rdb.MemoryUsage(ctx, k.key, 0).Result() // 0: every field, not a sample
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(u), k.unit)
	}
}
