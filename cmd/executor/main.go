// Command executor runs Tollgate steps on this machine.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tollgate-dev/tollgate/internal/executor"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := executor.Main(ctx, os.Args[1:], executor.Options{Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "executor:", err)
		os.Exit(1)
	}
}
