package schedules

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/store/redisstore"
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

// BenchmarkPassRedis is BenchmarkPass on Redis (a private redis-server):
// the pass every replica makes every second, idle and all due.
func BenchmarkPassRedis(b *testing.B) {
	for _, due := range []bool{false, true} {
		name := "idle"
		if due {
			name = "due"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			srv := redistest.Start(b)
			st, err := redisstore.New(ctx, redisstore.Config{URL: srv.URL()})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			r := &runs{byKey: map[string]string{}, live: map[string]bool{}, started: map[time.Time]int{}}
			book := NewBook(BookConfig{Store: st, Skills: oneSkill{}, Roles: everyone{}, OperatorRole: "operator", Now: st.Now})
			// Idle: yearly, so no pass finds a tick due; due: every second.
			cron := "0 0 0 1 1 *"
			if due {
				cron = "* * * * * *"
			}
			for i := range MaxSchedules {
				if _, err := book.Put(ctx, "alice", Spec{Name: fmt.Sprintf("s%04d", i), Skill: "brief", Cron: cron, Concurrency: "allow"}, 0); err != nil {
					b.Fatal(err)
				}
			}
			s := NewScheduler(SchedulerConfig{Store: st, Starter: r, Runs: r, Replica: "a"})
			b.ReportAllocs()
			for b.Loop() {
				if due {
					// A second later by Redis's clock, every schedule is due.
					time.Sleep(time.Second)
				}
				if _, _, err := s.Pass(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
