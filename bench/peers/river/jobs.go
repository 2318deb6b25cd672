package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/tollgate-dev/tollgate/bench/peers/peerkit"
)

// pgxTx is the transaction type of River's pgx driver.
type pgxTx = pgx.Tx

// stepArgs is one no-op step. Waiter is the timed run it belongs to; Left
// is how many steps of its chain follow it.
type stepArgs struct {
	Waiter int64 `json:"waiter"`
	Left   int   `json:"left"`
}

func (stepArgs) Kind() string { return "tollgate_bench_step" }

// stepWorker does no work of its own: it completes its job in its own
// transaction (JobCompleteTx) and, in a chain, inserts the next step in
// that same transaction (InsertTx), so the next step exists if and only if
// this one completed. Then it tells the waiting client.
type stepWorker struct {
	river.WorkerDefaults[stepArgs]
	pool  *pgxpool.Pool
	waits *waiters
}

func (w *stepWorker) Work(ctx context.Context, job *river.Job[stepArgs]) error {
	w.waits.started(job.Args.Waiter, time.Now())
	if err := w.finish(ctx, job); err != nil {
		w.waits.fail(job.Args.Waiter, err)
		return err
	}
	return nil
}

func (w *stepWorker) finish(ctx context.Context, job *river.Job[stepArgs]) error {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("step %d: begin: %w", job.ID, err)
	}
	// After a commit this is a no-op.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if job.Args.Left > 0 {
		next := stepArgs{Waiter: job.Args.Waiter, Left: job.Args.Left - 1}
		if _, err := river.ClientFromContext[pgxTx](ctx).InsertTx(ctx, tx, next, nil); err != nil {
			return fmt.Errorf("step %d: insert the next step: %w", job.ID, err)
		}
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
		return fmt.Errorf("step %d: complete: %w", job.ID, err)
	}
	if job.Args.Left > 0 {
		// This commit makes the next step runnable: its dispatch is timed
		// from here.
		w.waits.runnable(job.Args.Waiter, time.Now())
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("step %d: commit: %w", job.ID, err)
	}
	if job.Args.Left == 0 {
		w.waits.completed(job.Args.Waiter, time.Now())
	}
	return nil
}

// waiters are the timed runs in flight, by id: what the workers report to
// the clients waiting on them. Safe for concurrent use.
type waiters struct {
	mu   sync.Mutex
	last int64
	m    map[int64]*waiter
}

type waiter struct {
	id         int64
	left       int       // last steps still to complete
	runnableAt time.Time // when the newest step was committed
	dispatch   []time.Duration
	done       chan outcome // receives once: the last completion, or a failure
}

type outcome struct {
	at  time.Time
	err error
}

func newWaiters() *waiters { return &waiters{m: map[int64]*waiter{}} }

// add registers a run whose width last steps must complete.
func (ws *waiters) add(width int) *waiter {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.last++
	w := &waiter{id: ws.last, left: width, done: make(chan outcome, 1)}
	ws.m[w.id] = w
	return w
}

func (ws *waiters) remove(id int64) {
	ws.mu.Lock()
	delete(ws.m, id)
	ws.mu.Unlock()
}

// with runs f on waiter id under the lock; jobs of a run that is gone (a
// timed-out one's) are ignored.
func (ws *waiters) with(id int64, f func(*waiter)) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w, ok := ws.m[id]; ok {
		f(w)
	}
}

func (ws *waiters) runnable(id int64, at time.Time) {
	ws.with(id, func(w *waiter) { w.runnableAt = at })
}

func (ws *waiters) started(id int64, at time.Time) {
	ws.with(id, func(w *waiter) { w.dispatch = append(w.dispatch, at.Sub(w.runnableAt)) })
}

func (ws *waiters) completed(id int64, at time.Time) {
	ws.with(id, func(w *waiter) {
		w.left--
		if w.left == 0 {
			select {
			case w.done <- outcome{at: at}:
			default: // a failure was reported first
			}
		}
	})
}

func (ws *waiters) fail(id int64, err error) {
	ws.with(id, func(w *waiter) {
		select {
		case w.done <- outcome{err: err}:
		default:
		}
	})
}

func (ws *waiters) dispatches(id int64) []time.Duration {
	var out []time.Duration
	ws.with(id, func(w *waiter) { out = append(out, w.dispatch...) })
	return out
}

// subscription times River's own completion path: the client's
// EventKindJobCompleted, sent once River's batch completer has committed
// the completion (it commits every 250 ms, or as soon as 100 are pending).
// The worker's JobCompleteTx commits the completion first; the batch
// completer then finds the job completed and still emits the event.
type subscription struct {
	mu       sync.Mutex
	inserted map[int64]time.Time // job → just before its insert
	seen     map[int64]time.Time // job → its completed event received
	quit     chan struct{}
	stopped  sync.WaitGroup
}

func newSubscription() *subscription {
	return &subscription{inserted: map[int64]time.Time{}, seen: map[int64]time.Time{}, quit: make(chan struct{})}
}

// consume records every event until stop; cancel ends the subscription.
func (s *subscription) consume(events <-chan *river.Event, cancel func()) {
	s.stopped.Go(func() {
		defer cancel()
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					return
				}
				if ev.Job != nil {
					s.mu.Lock()
					s.seen[ev.Job.ID] = time.Now()
					s.mu.Unlock()
				}
			case <-s.quit:
				return
			}
		}
	})
}

func (s *subscription) stop() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	s.stopped.Wait()
}

func (s *subscription) track(job int64, at time.Time) {
	s.mu.Lock()
	s.inserted[job] = at
	s.mu.Unlock()
}

// report waits (up to 2 s: eight of the completer's 250 ms rounds) for
// the events of the jobs tracked since the last report, adds insert →
// event to res.Extra, and forgets them.
func (s *subscription) report(res *Result) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		s.mu.Lock()
		missing := 0
		for id := range s.inserted {
			if _, ok := s.seen[id]; !ok {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			var ds []time.Duration
			for id, t0 := range s.inserted {
				if at, ok := s.seen[id]; ok {
					ds = append(ds, at.Sub(t0))
				}
			}
			tracked := len(s.inserted)
			s.inserted, s.seen = map[int64]time.Time{}, map[int64]time.Time{}
			s.mu.Unlock()
			if tracked > 0 {
				p50, p99 := peerkit.Percentiles(ds)
				res.Extra["event_p50_ms"], res.Extra["event_p99_ms"] = p50, p99
				res.Extra["event_missing"] = float64(missing)
			}
			return
		}
		s.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

// riverLog is River's logger: it drops debug and info, and tallies
// warnings and errors (a failed fetch, a slow completer) so a slow outlier
// in the figures can be explained. Attributes given through With are
// dropped.
type riverLog struct {
	*peerkit.Tally
}

func (l *riverLog) logger() *slog.Logger { return slog.New(l) }

func (l *riverLog) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }

func (l *riverLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s", a)
		return true
	})
	l.Add(r.Level >= slog.LevelError, b.String())
	return nil
}

func (l *riverLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *riverLog) WithGroup(string) slog.Handler      { return l }
