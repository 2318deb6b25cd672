// Command river measures River (a Go job queue on PostgreSQL) on the
// workloads of Tollgate's own benchmarks that make sense for a job queue
// (dispatch, 1-step, 3-step chain, fans, sustained), on the PostgreSQL
// server this machine runs, and prints JSON and a Markdown table in the
// shape the Temporal peer writes, so cmd/tollgate-bench -peers can read it.
//
//	go run -C bench/peers/river . -json out.json -md out.md [-n N] [-duration D]
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
	if err := Run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "river bench:", err)
		os.Exit(1)
	}
}
