// Command temporal measures Temporal in process on the workloads of
// Tollgate's own benchmarks (test/e2e/bench_test.go in the main module) and
// prints JSON and a Markdown table: by default Temporal's own server
// (temporal.NewServer) on this machine's PostgreSQL with 4 history shards,
// or with -store sqlite temporaltest's SQLite in memory (one shard).
//
//	go run -C bench/peers/temporal . -json out.json -md out.md [-n N] [-duration D] [-store sqlite]
package main

import "github.com/tollgate-dev/tollgate/bench/peers/peerkit"

func main() {
	peerkit.Main("temporal", Run)
}
