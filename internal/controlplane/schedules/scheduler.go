package schedules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/internal/controlplane/api/runsvc"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/limits"
	"github.com/tollgate-dev/tollgate/pkg/schedule"
)

// Starter starts a run the one way every run starts (runsvc.Service).
type Starter interface {
	Start(ctx context.Context, who string, in runsvc.Start) (*engine.Run, *engine.Machine, bool, error)
}

// Runs reads runs (runner.Runner) and finds the run a request made.
type Runs interface {
	Get(ctx context.Context, id string) (*engine.Run, *engine.Machine, error)
}

// Store is what the loop reads and claims in.
type Store interface {
	store.Schedules
	Now(ctx context.Context) (time.Time, error)
	Alive(ctx context.Context, replica string) (bool, error)
	RequestedRun(ctx context.Context, key string) (string, error)
}

// SchedulerConfig is what a Scheduler needs.
type SchedulerConfig struct {
	Store   Store
	Starter Starter
	Runs    Runs
	// Replica names this replica in the claims it makes.
	Replica string
	// Poll is the longest the loop sleeps between passes (default 1s): a
	// schedule another replica added or changed is seen within it.
	Poll time.Duration
	// ClaimTimeout is how long another replica's claim may stay
	// unfinished while it is alive before this one finishes it (default
	// 10s); a claim of a replica whose heartbeat lapsed is finished at once.
	ClaimTimeout time.Duration
	Log          *slog.Logger
}

// Scheduler is one replica's loop over every schedule.
type Scheduler struct {
	cfg SchedulerConfig
	// crons are the parsed expressions by expression and zone: parsing
	// (and the book's interval check) costs far more than deciding, and a
	// pass reads every schedule every second.
	mu    sync.Mutex
	crons map[[2]string]*schedule.Cron
}

// passWorkers is how many schedules a pass decides at once: each due
// tick is a few store round trips (claim, start, record), which one
// schedule must make in order but many may make side by side.
const passWorkers = 16

// NewScheduler returns a Scheduler.
func NewScheduler(cfg SchedulerConfig) *Scheduler {
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.ClaimTimeout <= 0 {
		cfg.ClaimTimeout = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{cfg: cfg, crons: map[[2]string]*schedule.Cron{}}
}

// maxCrons bounds the parsed expressions kept; past it the cache starts
// over (schedules are at most MaxSchedules, so only churn fills it).
const maxCrons = 2 * MaxSchedules

// cron is sc's parsed expression and tick policy; false for a stored
// schedule that no longer parses (the book refused it once; it waits for
// a fix).
func (s *Scheduler) cron(sc store.Schedule) (*schedule.Cron, schedule.Policy, bool) {
	cu, err1 := schedule.ParseCatchUp(sc.CatchUp)
	cc, err2 := schedule.ParseConcurrency(sc.Concurrency)
	if err1 != nil || err2 != nil {
		return nil, schedule.Policy{}, false
	}
	pol := schedule.Policy{CatchUp: cu, Concurrency: cc, Grace: sc.Grace}
	if pol.Grace <= 0 {
		pol.Grace = DefaultGrace
	}
	key := [2]string{sc.Cron, sc.TimeZone}
	s.mu.Lock()
	c, ok := s.crons[key]
	s.mu.Unlock()
	if ok {
		return c, pol, true
	}
	c, err := schedule.Parse(sc.Cron, sc.TimeZone)
	if err != nil {
		return nil, schedule.Policy{}, false
	}
	s.mu.Lock()
	if len(s.crons) >= maxCrons {
		clear(s.crons)
	}
	s.crons[key] = c
	s.mu.Unlock()
	return c, pol, true
}

// Run makes a pass, sleeps until the soonest tick (at most Poll), and
// again, until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		wait := s.cfg.Poll
		now, wake, err := s.Pass(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			s.cfg.Log.LogAttrs(ctx, slog.LevelWarn, "schedules: pass failed; trying again", slog.String("error", err.Error()))
		case !wake.IsZero():
			wait = min(wait, max(wake.Sub(now), time.Millisecond))
		}
		t.Reset(wait)
	}
}

// Pass decides every due tick of every schedule once, by the store's
// clock, and returns that clock and the soonest time anything is due
// next (zero: nothing known).
func (s *Scheduler) Pass(ctx context.Context) (now, wake time.Time, err error) {
	all, err := s.cfg.Store.ListSchedules(ctx)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	now, err = s.cfg.Store.Now(ctx)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	// Schedules are independent: up to passWorkers are decided at once,
	// and the pass returns when all are (it owns what it starts).
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		slot = make(chan struct{}, passWorkers)
	)
	for _, sc := range all {
		if ctx.Err() != nil {
			break
		}
		slot <- struct{}{}
		wg.Go(func() {
			defer func() { <-slot }()
			w := s.one(ctx, sc, now)
			mu.Lock()
			if !w.IsZero() && (wake.IsZero() || w.Before(wake)) {
				wake = w
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return now, wake, ctx.Err()
}

// maxSteps bounds the decisions one pass makes for one schedule (each is
// a write); the next pass goes on.
const maxSteps = 16

// one decides what is due of one schedule and returns when it is next
// due.
func (s *Scheduler) one(ctx context.Context, sc store.Schedule, now time.Time) time.Time {
	c, pol, ok := s.cron(sc)
	if !ok {
		return time.Time{}
	}
	for range maxSteps {
		if sc.Paused {
			return time.Time{}
		}
		if p := sc.Pending; p != nil {
			if !s.mayFinish(ctx, p, now) {
				return p.At.Add(s.cfg.ClaimTimeout)
			}
			next, ok := s.finish(ctx, sc)
			if !ok {
				return now.Add(s.cfg.Poll)
			}
			sc = next
			continue
		}
		// Whether the last run is live matters only to a tick that is due
		// or waiting: decided first as if it were not, an idle pass reads
		// no run (every replica passes over every schedule every second).
		st := schedule.State{Since: sc.CreatedAt, LastTick: sc.LastTick, Buffered: sc.Buffered}
		d := schedule.Decide(c, pol, st, now)
		if d.Action == schedule.Nothing {
			return d.Wake
		}
		if st.RunActive = s.active(ctx, sc); st.RunActive {
			if d = schedule.Decide(c, pol, st, now); d.Action == schedule.Nothing {
				return d.Wake
			}
		}
		next := apply(sc, d, s.cfg.Replica, now)
		stored, err := s.cfg.Store.PutSchedule(ctx, next, sc.Version)
		switch {
		case errors.Is(err, store.ErrConflict):
			// Another replica decided it, or a person changed it: read
			// it again and go on from what it says.
			if sc, err = s.cfg.Store.GetSchedule(ctx, sc.Name); err != nil {
				return time.Time{}
			}
			continue
		case err != nil:
			s.cfg.Log.LogAttrs(ctx, slog.LevelWarn, "schedules: could not record a tick; trying again", slog.String("schedule", sc.Name), slog.String("error", err.Error()))
			return now.Add(s.cfg.Poll)
		}
		s.logDecision(ctx, sc.Name, d)
		sc = stored
	}
	return now
}

// apply is the record after decision d.
func apply(sc store.Schedule, d schedule.Decision, replica string, now time.Time) store.Schedule {
	claim := func(tick time.Time) *store.TickClaim {
		return &store.TickClaim{Tick: tick, RequestID: RequestID(sc, tick), RunAs: sc.RunAs, By: replica, At: now}
	}
	sc.Missed += int64(d.Dropped)
	switch d.Action {
	case schedule.Start:
		sc.LastTick, sc.Pending = d.Tick, claim(d.Tick)
	case schedule.StartBuffered:
		sc.Buffered, sc.Pending = time.Time{}, claim(d.Tick)
	case schedule.Skip:
		sc.LastTick, sc.Skipped, sc.LastSkip = d.Tick, sc.Skipped+1, d.Reason
	case schedule.Miss:
		sc.LastTick, sc.Missed, sc.LastSkip = d.Tick, sc.Missed+1, d.Reason
	case schedule.Buffer:
		sc.LastTick, sc.Buffered = d.Tick, d.Tick
	}
	return sc
}

// RequestID is the idempotency key of the run a schedule starts for
// tick: the same on every replica, and new for a schedule of the same
// name made again.
func RequestID(sc store.Schedule, tick time.Time) string {
	return fmt.Sprintf(runsvc.ReservedRequestPrefix+"%s:%d:%s", sc.Name, sc.CreatedAt.UnixNano(), tick.UTC().Format(time.RFC3339Nano))
}

// mayFinish reports whether this replica may finish claim p: its own, or
// one whose replica stopped beating or that stayed unfinished too long.
func (s *Scheduler) mayFinish(ctx context.Context, p *store.TickClaim, now time.Time) bool {
	if p.By == s.cfg.Replica || now.Sub(p.At) >= s.cfg.ClaimTimeout {
		return true
	}
	alive, err := s.cfg.Store.Alive(ctx, p.By)
	return err == nil && !alive
}

// finish starts the run of sc's pending claim — or finds the one a
// replica already started for it — and records it. A start refused for
// good (the skill no longer exists or compiles, policy refuses it) is
// recorded as the tick's error; one that failed for now (the store)
// leaves the claim for the next pass. It returns the record and false
// when nothing was recorded.
func (s *Scheduler) finish(ctx context.Context, sc store.Schedule) (store.Schedule, bool) {
	// Read it again just before starting: a pause, a delete or another
	// replica's finish since this pass read it must be seen (a pause
	// after this read races the start, as a pause does a tick).
	fresh, err := s.cfg.Store.GetSchedule(ctx, sc.Name)
	if err != nil {
		return sc, false
	}
	if fresh.Paused || fresh.Pending == nil || fresh.Pending.RequestID != sc.Pending.RequestID {
		return fresh, true
	}
	sc = fresh
	p := sc.Pending
	runID, startErr := s.start(ctx, sc, p)
	if startErr != nil {
		// Another replica finishing the same claim may have started it
		// (this start then collides with its run): that run is the tick's.
		if id, err := s.found(ctx, sc, p); err == nil && id != "" {
			runID, startErr = id, nil
		}
	}
	if startErr != nil && !permanent(startErr) {
		s.cfg.Log.LogAttrs(ctx, slog.LevelWarn, "schedules: could not start a tick's run; trying again", slog.String("schedule", sc.Name),
			slog.Time("tick", p.Tick), slog.String("error", startErr.Error()))
		return sc, false
	}
	for range 4 {
		next := sc
		next.Pending = nil
		if startErr != nil {
			next.LastError = fmt.Sprintf("the run for the tick %s was not started: %s", p.Tick.UTC().Format(time.RFC3339), limits.Short(startErr.Error()))
		} else {
			next.LastRun, next.LastRunTick, next.Started, next.LastError = runID, p.Tick, next.Started+1, ""
		}
		stored, err := s.cfg.Store.PutSchedule(ctx, next, sc.Version)
		if err == nil {
			if startErr != nil {
				s.cfg.Log.LogAttrs(ctx, slog.LevelError, "schedules: a tick's run was refused", slog.String("schedule", sc.Name), slog.Time("tick", p.Tick), slog.String("error", startErr.Error()))
			}
			return stored, true
		}
		if !errors.Is(err, store.ErrConflict) {
			return sc, false
		}
		if sc, err = s.cfg.Store.GetSchedule(ctx, sc.Name); err != nil {
			return sc, false
		}
		if sc.Pending == nil || sc.Pending.RequestID != p.RequestID {
			return sc, true // another replica recorded it
		}
	}
	return sc, false
}

// start starts the claim's run as the schedule's RunAs, or finds the run
// an earlier start of the same claim made.
func (s *Scheduler) start(ctx context.Context, sc store.Schedule, p *store.TickClaim) (string, error) {
	if id, err := s.found(ctx, sc, p); err != nil || id != "" {
		return id, err
	}
	run, _, _, err := s.cfg.Starter.Start(ctx, claimant(sc, p), runsvc.Start{RequestID: p.RequestID, Skill: sc.Skill, SkillVersion: sc.SkillVersion,
		Inputs: sc.Inputs, Schedule: sc.Name, Tick: p.Tick})
	if err != nil {
		return "", err
	}
	s.cfg.Log.LogAttrs(ctx, slog.LevelInfo, "schedules: tick started a run", slog.String("schedule", sc.Name), slog.Time("tick", p.Tick),
		slog.String("run", run.ID), slog.String("run_as", sc.RunAs))
	return run.ID, nil
}

// claimant is whom a claim's run starts as: the RunAs fixed by the claim.
func claimant(sc store.Schedule, p *store.TickClaim) string {
	if p.RunAs != "" {
		return p.RunAs
	}
	return sc.RunAs
}

// found is the run an earlier start of the claim made, or "". The runner
// keys a request by its requester and id; a run found under the key that
// is not this schedule's tick (someone started a run of their own with
// that id) is an error: the tick's run cannot start under it.
func (s *Scheduler) found(ctx context.Context, sc store.Schedule, p *store.TickClaim) (string, error) {
	id, err := s.cfg.Store.RequestedRun(ctx, claimant(sc, p)+"\x00"+p.RequestID)
	if err != nil || id == "" {
		return "", err
	}
	run, _, err := s.cfg.Runs.Get(ctx, id)
	if err != nil {
		return "", err
	}
	if run.Origin.Schedule != sc.Name || !run.Origin.Tick.Equal(p.Tick) {
		return "", fmt.Errorf("the request id %s is taken by run %s, which this schedule did not start: %w", p.RequestID, id, errkind.RequestReused)
	}
	return id, nil
}

// permanent reports whether a start's error will not go away by trying
// the same start again: anything but the store or the context failing
// for now. (An error that says nothing is permanent: retrying it would
// hold the claim, and every later tick, forever.)
func permanent(err error) bool {
	for _, k := range []error{store.ErrUnavailable, errkind.Busy, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, k) {
			return false
		}
	}
	return true
}

// active reports whether the schedule's last run is live (a parked run
// is: it waits for a person).
func (s *Scheduler) active(ctx context.Context, sc store.Schedule) bool {
	if sc.LastRun == "" {
		return false
	}
	run, _, err := s.cfg.Runs.Get(ctx, sc.LastRun)
	if err != nil {
		return !errors.Is(err, store.ErrNotFound) // unknown now: assume it still runs
	}
	return !run.State.Terminal()
}

func (s *Scheduler) logDecision(ctx context.Context, name string, d schedule.Decision) {
	switch d.Action {
	case schedule.Skip, schedule.Miss, schedule.Buffer:
		s.cfg.Log.LogAttrs(ctx, slog.LevelInfo, "schedules: tick "+d.Action.String(), slog.String("schedule", name), slog.Time("tick", d.Tick),
			slog.Int("dropped", d.Dropped), slog.String("reason", d.Reason))
	}
}
