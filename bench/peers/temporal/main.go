// Command temporal measures Temporal in process on the workloads of
// Tollgate's own benchmarks (test/e2e/bench_test.go in the main module) and
// prints JSON and a Markdown table: by default Temporal's own server
// (temporal.NewServer) on this machine's PostgreSQL with 4 history shards,
// or with -store sqlite temporaltest's SQLite in memory (one shard).
//
//	go run -C bench/peers/temporal . -json out.json -md out.md [-n N] [-duration D] [-store sqlite]
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := Run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "temporal bench:", err)
		os.Exit(1)
	}
}
