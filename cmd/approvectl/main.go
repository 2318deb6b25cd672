// Command approvectl plans, runs, answers and audits Tollgate workflows.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/tollgate-dev/tollgate/internal/approvectl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := approvectl.Run(ctx, os.Args[1:], approvectl.Config{Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin})
	stop()
	os.Exit(approvectl.ExitCode(err))
}
