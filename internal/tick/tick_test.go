package tick

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Every runs its pass until the context ends, and leaves nothing running.
func TestEveryRunsUntilTheContextEnds(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(context.Background())
	passes := make(chan struct{}, 8)
	done := make(chan error)
	go func() {
		done <- Every(ctx, time.Millisecond, func(context.Context) {
			select {
			case passes <- struct{}{}:
			default:
			}
		})
	}()
	for range 3 {
		<-passes
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
