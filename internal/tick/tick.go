package tick

import (
	"context"
	"time"
)

// Every calls f every interval until ctx ends, then returns nil. A pass
// that takes longer than the interval delays the next one; passes never
// overlap.
func Every(ctx context.Context, every time.Duration, f func(context.Context)) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			f(ctx)
		}
	}
}
