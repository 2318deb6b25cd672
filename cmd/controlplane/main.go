// Command controlplane serves the Tollgate API.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tollgate-dev/tollgate/internal/controlplane"
	"github.com/tollgate-dev/tollgate/internal/devstack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := controlplane.Run(ctx, os.Args[1:], controlplane.MainConfig{Stdout: os.Stdout, Stderr: os.Stderr, OpenRedis: openRedis, DevExecutor: devstack.Executor})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "controlplane:", err)
		os.Exit(1)
	}
}
