package peerkit

import (
	"context"
	"fmt"
	"os"
	"os/signal"
)

// Main is a harness's main: it calls run with the command line's arguments
// and a context that an interrupt cancels (the run then drops its
// databases), and if run fails prints "NAME bench: ERROR" to stderr and
// exits 1.
func Main(name string, run func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, name+" bench:", err)
		os.Exit(1)
	}
}
