// Command tollgate-bench measures the figures of DESIGN.md §12 on a real
// redis-server, control plane and executors, and prints them against
// their goals (`tollgate-bench --help`; `make bench`).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tollgate-dev/tollgate/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := bench.Run(ctx, os.Args[1:], bench.Options{Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tollgate-bench:", err)
		os.Exit(1)
	}
}
