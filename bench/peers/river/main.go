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
	"os"

	"github.com/tollgate-dev/tollgate/bench/peers/peerkit"
)

func main() {
	peerkit.Main("river", func(ctx context.Context, args []string) error {
		return Run(ctx, args, os.Stderr)
	})
}
