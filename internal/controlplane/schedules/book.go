package schedules

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/controlplane/skills"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/limits"
	"github.com/tollgate-dev/tollgate/pkg/schedule"
)

// Limits of the book.
const (
	// MaxSchedules bounds how many schedules a deployment keeps: every
	// replica's loop reads them all on every pass.
	MaxSchedules = 1000
	// MinInterval is the shortest time between ticks a schedule may have.
	MinInterval = time.Second
	// DefaultGrace is how late a tick may start and still be on time.
	DefaultGrace = time.Minute
	// MinGrace is the least grace: a loop's pass and a claim take time.
	MinGrace = time.Second
	// MaxGrace bounds it: a tick a day late is not on time.
	MaxGrace = 24 * time.Hour
	// MaxPerCreator bounds one person's schedules, so nobody can take
	// every place in the book.
	MaxPerCreator = 100
	// MaxInputBytes bounds a schedule's inputs, names and values
	// together: every replica reads every schedule on every pass.
	MaxInputBytes = 16 << 10
)

// Roles is what the book asks of policy (approvals.Desk).
type Roles interface {
	Holds(ctx context.Context, who, role string) bool
}

// Skills finds the skill a schedule names (skills.Registry).
type Skills interface {
	Runnable(ctx context.Context, name string, version int64) (store.SkillVersion, error)
}

// BookConfig is what a Book needs.
type BookConfig struct {
	Store  store.Schedules
	Skills Skills
	Roles  Roles
	// OperatorRole may run schedules as anyone and change anyone's;
	// AuditorRole may read every schedule.
	OperatorRole string
	AuditorRole  string
	Now          func(context.Context) (time.Time, error)
}

// Book is the schedules people write.
type Book struct{ cfg BookConfig }

// NewBook returns a Book.
func NewBook(cfg BookConfig) *Book { return &Book{cfg: cfg} }

// Spec is what a person writes.
type Spec struct {
	Name, Skill  string
	SkillVersion int64
	Cron, Zone   string
	Inputs       map[string]string
	RunAs        string
	CatchUp      string
	Concurrency  string
	Grace        time.Duration // 0: DefaultGrace
}

// Put creates (expect 0) or replaces (expect the version read) a
// schedule as who.
func (b *Book) Put(ctx context.Context, who string, sp Spec, expect int64) (store.Schedule, error) {
	if err := skills.CheckName("schedule", sp.Name); err != nil {
		return store.Schedule{}, err
	}
	if sp.RunAs == "" {
		sp.RunAs = who
	}
	if sp.RunAs != who && !b.cfg.Roles.Holds(ctx, who, b.cfg.OperatorRole) {
		return store.Schedule{}, fmt.Errorf("%s may not make a schedule that runs as %s: only operators may run schedules as someone else: %w", who, limits.Short(sp.RunAs), errkind.Denied)
	}
	_, pol, err := Check(sp)
	if err != nil {
		return store.Schedule{}, err
	}
	if n := inputBytes(sp.Inputs); n > MaxInputBytes {
		return store.Schedule{}, fmt.Errorf("schedule %s: its inputs are %d bytes; a schedule's inputs may be %d: %w", sp.Name, n, MaxInputBytes, errkind.Invalid)
	}
	if _, err := b.cfg.Skills.Runnable(ctx, sp.Skill, sp.SkillVersion); err != nil {
		return store.Schedule{}, fmt.Errorf("schedule %s: %w", sp.Name, err)
	}
	now, err := b.cfg.Now(ctx)
	if err != nil {
		return store.Schedule{}, err
	}
	next := store.Schedule{Name: sp.Name, Skill: sp.Skill, SkillVersion: sp.SkillVersion, Cron: sp.Cron, TimeZone: sp.Zone, Inputs: sp.Inputs,
		RunAs: sp.RunAs, CatchUp: string(pol.CatchUp), Concurrency: string(pol.Concurrency), Grace: pol.Grace,
		CreatedBy: who, CreatedAt: now, UpdatedBy: who, UpdatedAt: now, LastTick: now}
	if expect != 0 {
		old, err := b.Get(ctx, sp.Name)
		if err != nil {
			return store.Schedule{}, err
		}
		if err := b.mayChange(ctx, who, old); err != nil {
			return store.Schedule{}, err
		}
		// A change keeps what became of its ticks; a changed expression
		// starts from now (no tick of the old one is caught up).
		next.CreatedBy, next.CreatedAt, next.Paused, next.PausedBy, next.PausedAt = old.CreatedBy, old.CreatedAt, old.Paused, old.PausedBy, old.PausedAt
		next.LastTick, next.Pending, next.Buffered, next.LastRun, next.LastRunTick = old.LastTick, old.Pending, old.Buffered, old.LastRun, old.LastRunTick
		next.Started, next.Skipped, next.Missed, next.LastSkip, next.LastError = old.Started, old.Skipped, old.Missed, old.LastSkip, old.LastError
		if old.Cron != sp.Cron || old.TimeZone != sp.Zone {
			next.LastTick = later(old.LastTick, now)
		}
	} else {
		all, err := b.cfg.Store.ListSchedules(ctx)
		if err != nil {
			return store.Schedule{}, err
		}
		if len(all) >= MaxSchedules {
			return store.Schedule{}, fmt.Errorf("there are %d schedules, the most a control plane keeps: %w", len(all), errkind.Exhausted)
		}
		mine := 0
		for _, sc := range all {
			if sc.CreatedBy == who {
				mine++
			}
		}
		if mine >= MaxPerCreator {
			return store.Schedule{}, fmt.Errorf("%s made %d schedules, the most one person may: %w", who, mine, errkind.Exhausted)
		}
	}
	out, err := b.cfg.Store.PutSchedule(ctx, next, expect)
	if errors.Is(err, store.ErrConflict) {
		if expect == 0 {
			return store.Schedule{}, fmt.Errorf("a schedule named %s exists; replace it with its version (approvectl schedules add --replace): %w", sp.Name, errkind.Precondition)
		}
		return store.Schedule{}, fmt.Errorf("the schedule %s changed since version %d; read it again: %w", sp.Name, expect, errkind.Precondition)
	}
	return out, err
}

// Check validates a spec: its cron expression and zone, and its
// policies, with defaults filled in.
func Check(sp Spec) (*schedule.Cron, schedule.Policy, error) {
	if sp.Skill == "" {
		return nil, schedule.Policy{}, fmt.Errorf("schedule %s: name the skill it runs: %w", sp.Name, errkind.Invalid)
	}
	if err := skills.CheckName("skill", sp.Skill); err != nil {
		return nil, schedule.Policy{}, err
	}
	if sp.SkillVersion < 0 {
		return nil, schedule.Policy{}, fmt.Errorf("schedule %s: skill_version %d: want 0 (the latest) or a version: %w", sp.Name, sp.SkillVersion, errkind.Invalid)
	}
	c, err := schedule.Parse(sp.Cron, sp.Zone)
	if err != nil {
		return nil, schedule.Policy{}, fmt.Errorf("schedule %s: %w: %w", sp.Name, err, errkind.Invalid)
	}
	if err := c.CheckInterval(MinInterval); err != nil {
		return nil, schedule.Policy{}, fmt.Errorf("schedule %s: %w: %w", sp.Name, err, errkind.Invalid)
	}
	cu, err := schedule.ParseCatchUp(sp.CatchUp)
	if err != nil {
		return nil, schedule.Policy{}, fmt.Errorf("schedule %s: catch_up: %w: %w", sp.Name, err, errkind.Invalid)
	}
	cc, err := schedule.ParseConcurrency(sp.Concurrency)
	if err != nil {
		return nil, schedule.Policy{}, fmt.Errorf("schedule %s: concurrency: %w: %w", sp.Name, err, errkind.Invalid)
	}
	g := sp.Grace
	if g == 0 {
		g = DefaultGrace
	}
	if g < MinGrace || g > MaxGrace {
		return nil, schedule.Policy{}, fmt.Errorf("schedule %s: grace %s: want %s to %s: %w", sp.Name, g, MinGrace, MaxGrace, errkind.Invalid)
	}
	return c, schedule.Policy{CatchUp: cu, Concurrency: cc, Grace: g}, nil
}

// Visible reports whether who may read sc: its creator, whom it runs as,
// operators and auditors. A schedule holds its runs' inputs, and to
// anyone else it does not exist (as runs do not, I9).
func (b *Book) Visible(ctx context.Context, who string, sc store.Schedule) bool {
	return who == sc.CreatedBy || who == sc.RunAs || b.cfg.Roles.Holds(ctx, who, b.cfg.OperatorRole) ||
		(b.cfg.AuditorRole != "" && b.cfg.Roles.Holds(ctx, who, b.cfg.AuditorRole))
}

// Read returns a schedule who may see; to anyone else it is not found,
// exactly as a name never used.
func (b *Book) Read(ctx context.Context, who, name string) (store.Schedule, error) {
	sc, err := b.Get(ctx, name)
	if err != nil {
		return store.Schedule{}, err
	}
	if !b.Visible(ctx, who, sc) {
		return store.Schedule{}, fmt.Errorf("no schedule named %s: %w", name, errkind.NotFound)
	}
	return sc, nil
}

// ReadAll returns the schedules who may see (of skill, when set), by
// name.
func (b *Book) ReadAll(ctx context.Context, who, skill string) ([]store.Schedule, error) {
	all, err := b.List(ctx, skill)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(sc store.Schedule) bool { return !b.Visible(ctx, who, sc) }), nil
}

// Get returns a schedule, whoever asks (the book's own reads).
func (b *Book) Get(ctx context.Context, name string) (store.Schedule, error) {
	if err := skills.CheckName("schedule", name); err != nil {
		return store.Schedule{}, err
	}
	sc, err := b.cfg.Store.GetSchedule(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return store.Schedule{}, fmt.Errorf("no schedule named %s: %w", name, errkind.NotFound)
	}
	return sc, err
}

// List returns every schedule (of skill, when set), by name.
func (b *Book) List(ctx context.Context, skill string) ([]store.Schedule, error) {
	all, err := b.cfg.Store.ListSchedules(ctx)
	if err != nil {
		return nil, err
	}
	if skill != "" {
		all = slices.DeleteFunc(all, func(s store.Schedule) bool { return s.Skill != skill })
	}
	return all, nil
}

// Pause stops a schedule's ticks.
func (b *Book) Pause(ctx context.Context, who, name string) (store.Schedule, error) {
	return b.change(ctx, who, name, func(sc *store.Schedule, now time.Time) {
		if !sc.Paused {
			sc.Paused, sc.PausedBy, sc.PausedAt = true, who, now
		}
	})
}

// Resume resumes a schedule from now: ticks that came while it was
// paused are passed over, never caught up.
func (b *Book) Resume(ctx context.Context, who, name string) (store.Schedule, error) {
	return b.change(ctx, who, name, func(sc *store.Schedule, now time.Time) {
		if sc.Paused {
			// From now: a tick claimed or waiting before the pause is
			// passed over too (it would start days late). A claimed tick
			// whose run a replica had started keeps its run; the record
			// just does not name it.
			sc.Paused, sc.PausedBy, sc.PausedAt = false, "", time.Time{}
			sc.LastTick, sc.Pending, sc.Buffered = later(sc.LastTick, now), nil, time.Time{}
		}
	})
}

// Delete removes a schedule.
func (b *Book) Delete(ctx context.Context, who, name string) error {
	for range 4 {
		sc, err := b.Get(ctx, name)
		if err != nil {
			return err
		}
		if err := b.mayChange(ctx, who, sc); err != nil {
			return err
		}
		err = b.cfg.Store.DeleteSchedule(ctx, name, sc.Version)
		if errors.Is(err, store.ErrConflict) {
			continue // a tick moved it on
		}
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no schedule named %s: %w", name, errkind.NotFound)
		}
		return err
	}
	return fmt.Errorf("the schedule %s keeps changing; try again: %w", name, errkind.Busy)
}

// change applies f to a schedule as who, retrying when a tick moved the
// record on meanwhile.
func (b *Book) change(ctx context.Context, who, name string, f func(*store.Schedule, time.Time)) (store.Schedule, error) {
	for range 4 {
		sc, err := b.Get(ctx, name)
		if err != nil {
			return store.Schedule{}, err
		}
		if err := b.mayChange(ctx, who, sc); err != nil {
			return store.Schedule{}, err
		}
		now, err := b.cfg.Now(ctx)
		if err != nil {
			return store.Schedule{}, err
		}
		expect := sc.Version
		f(&sc, now)
		sc.UpdatedBy, sc.UpdatedAt = who, now
		out, err := b.cfg.Store.PutSchedule(ctx, sc, expect)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		return out, err
	}
	return store.Schedule{}, fmt.Errorf("the schedule %s keeps changing; try again: %w", name, errkind.Busy)
}

func (b *Book) mayChange(ctx context.Context, who string, sc store.Schedule) error {
	if who == sc.CreatedBy || who == sc.RunAs || b.cfg.Roles.Holds(ctx, who, b.cfg.OperatorRole) {
		return nil
	}
	if !b.Visible(ctx, who, sc) {
		return fmt.Errorf("no schedule named %s: %w", sc.Name, errkind.NotFound)
	}
	return fmt.Errorf("%s may not change the schedule %s: only its creator (%s), whom it runs as (%s) and operators may: %w", who, sc.Name, sc.CreatedBy, sc.RunAs, errkind.Denied)
}

func inputBytes(in map[string]string) int {
	n := 0
	for k, v := range in {
		n += len(k) + len(v)
	}
	return n
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
