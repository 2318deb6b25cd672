package schedules

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkPass is one replica's pass over MaxSchedules schedules on the
// memory store: "idle" when no tick is due (what every pass costs), "due"
// when every schedule's tick is due (a claim, a start and a record each).
func BenchmarkPass(b *testing.B) {
	for _, due := range []bool{false, true} {
		name := "idle"
		if due {
			name = "due"
		}
		b.Run(name, func(b *testing.B) {
			w := newWorld(&testing.T{})
			ctx := context.Background()
			for i := range MaxSchedules {
				if _, err := w.book.Put(ctx, "alice", Spec{Name: fmt.Sprintf("s%04d", i), Skill: "brief", Cron: "* * * * * *", Concurrency: "allow"}, 0); err != nil {
					b.Fatal(err)
				}
			}
			s := w.scheduler("a")
			b.ReportAllocs()
			for b.Loop() {
				if due {
					w.clock.add(time.Second)
				}
				if _, _, err := s.Pass(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
