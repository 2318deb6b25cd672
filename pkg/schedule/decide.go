package schedule

import (
	"fmt"
	"time"
)

// CatchUp says what happens to ticks that nobody decided within the grace
// (every control plane was down, or all were late).
type CatchUp string

const (
	// CatchUpNone misses them all.
	CatchUpNone CatchUp = "none"
	// CatchUpLast starts the latest of them (when no later tick is on
	// time) and misses the rest. It is the default.
	CatchUpLast CatchUp = "last"
)

// ParseCatchUp parses a catch_up setting: "none" or "last"; "" means
// "last".
func ParseCatchUp(s string) (CatchUp, error) {
	switch CatchUp(s) {
	case "":
		return CatchUpLast, nil
	case CatchUpNone, CatchUpLast:
		return CatchUp(s), nil
	}
	return "", fmt.Errorf("catch_up %q is not one of: none, last", s)
}

// Concurrency says what a tick does while a run the schedule started is
// still running.
type Concurrency string

const (
	// ConcurrencyAllow starts another run.
	ConcurrencyAllow Concurrency = "allow"
	// ConcurrencySkip skips the tick. It is the default.
	ConcurrencySkip Concurrency = "skip"
	// ConcurrencyWait keeps the tick (one at most) and starts it when the
	// run ends; ticks while one already waits are skipped.
	ConcurrencyWait Concurrency = "wait"
)

// ParseConcurrency parses a concurrency setting: "allow", "skip" or
// "wait"; "" means "skip".
func ParseConcurrency(s string) (Concurrency, error) {
	switch Concurrency(s) {
	case "":
		return ConcurrencySkip, nil
	case ConcurrencyAllow, ConcurrencySkip, ConcurrencyWait:
		return Concurrency(s), nil
	}
	return "", fmt.Errorf("concurrency %q is not one of: allow, skip, wait", s)
}

// DefaultGrace is how late a tick may be decided and still count as on
// time, when Policy.Grace is not positive.
const DefaultGrace = time.Minute

// MaxDropped caps Decision.Dropped: counting stops there, so a decision
// after a long outage costs at most MaxDropped calls of Next.
const MaxDropped = 1000

// State is what the store holds about a schedule's ticks, and what the
// loop observed about its runs.
type State struct {
	// Since is when the schedule was created or last resumed: no tick at
	// or before it is ever due.
	Since time.Time
	// LastTick is the latest tick decided; zero if none.
	LastTick time.Time
	// Buffered is a tick waiting for the running run to end (concurrency
	// wait); zero if none. The loop clears it when it pauses the schedule.
	Buffered time.Time
	// RunActive says the run the schedule started last has not ended.
	RunActive bool
}

// Policy is how a schedule treats missed ticks and overlapping runs.
type Policy struct {
	// CatchUp is "" (meaning last), none or last; an unknown value counts
	// as last.
	CatchUp CatchUp
	// Concurrency is "" (meaning skip), allow, skip or wait; an unknown
	// value counts as skip.
	Concurrency Concurrency
	// Grace is how long after its time a tick still counts as on time; a
	// value that is not positive means DefaultGrace.
	Grace time.Duration
}

// Action is what a Decision asks the loop to do.
type Action int

const (
	// Nothing is due: look again at Decision.Wake.
	Nothing Action = iota
	// Start a run for Tick; it becomes LastTick.
	Start
	// StartBuffered starts a run for the buffered tick (Tick) and clears
	// Buffered; LastTick does not change.
	StartBuffered
	// Skip Tick without a run (a run is still going); it becomes
	// LastTick.
	Skip
	// Buffer Tick: it becomes LastTick and Buffered, and starts when the
	// running run ends.
	Buffer
	// Miss Tick: nobody decided it within the grace; it becomes LastTick.
	Miss
)

var actionNames = [...]string{"nothing", "start", "start-buffered", "skip", "buffer", "miss"}

func (a Action) String() string {
	if a >= 0 && int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Decision is the one next thing to do for a schedule.
type Decision struct {
	Action Action
	// Tick is the tick decided: the new LastTick, except for
	// StartBuffered, where it is the buffered tick and LastTick stays.
	// Zero for Nothing.
	Tick time.Time
	// Dropped is how many earlier ticks, after the previous LastTick (or
	// Since) and before Tick, this decision passes over without a run
	// (missed ticks folded into it); Tick's own fate is Action. It is
	// counted up to MaxDropped: MaxDropped means that many or more.
	Dropped int
	// Reason says why, in words, for Skip, Buffer, Miss, StartBuffered and
	// a late Start; "" for a Start on time.
	Reason string
	// Wake is, for Nothing, when to call Decide again: the next tick (zero
	// if there is none), or a second from now while a buffered tick waits
	// on a run, if that is sooner. Zero for the other actions: apply the
	// decision and call Decide again at once.
	Wake time.Time
}

// Apply returns the state once the loop has applied d, taking Start and
// StartBuffered to start a run: the state the loop writes with
// compare-and-set.
func (st State) Apply(d Decision) State {
	switch d.Action {
	case Start:
		st.LastTick, st.RunActive = d.Tick, true
	case StartBuffered:
		st.Buffered, st.RunActive = time.Time{}, true
	case Skip, Miss:
		st.LastTick = d.Tick
	case Buffer:
		st.LastTick, st.Buffered = d.Tick, d.Tick
	}
	return st
}

// Decide returns the one next decision for a schedule with cron c, policy p
// and state st at now (the store's clock). The loop applies it (claims it
// in the store; see State.Apply), then calls Decide again with the new
// state, until the Action is Nothing. Decide is a pure function of its
// arguments.
//
// The rules, in order:
//
//  1. A buffered tick whose run has ended starts first: StartBuffered.
//  2. Ticks considered are those after base = the later of LastTick and
//     Since, up to now; the earliest is decided. None: Nothing, with Wake
//     the next tick (or now+1s while a buffered tick waits on a run).
//  3. A tick is on time if it is after now-Grace, missed otherwise.
//  4. If the earliest tick is missed, let m be the latest missed one. If an
//     on-time tick follows m, Miss m (the missed ticks before it are
//     Dropped); the on-time tick is decided next. Otherwise, with catch_up
//     none, Miss m; with catch_up last, decide m as if on time (a late
//     Start, or Skip or Buffer as below), with the missed ticks before it
//     Dropped.
//  5. An on-time tick: allow starts it; skip starts it unless a run is
//     active, and skips it if one is; wait starts it if no run is active,
//     buffers it if one is and none is buffered, and skips it if one is
//     already buffered.
//
// So every tick is decided once and in order (each decision's Tick is after
// base, and becomes the new LastTick), none before it is due or at or
// before Since, and a loop that applies decisions at one now (runs not
// ending meanwhile) gets Nothing after at most one call per tick in
// (now-Grace, now] plus three: one for all missed ticks, one
// StartBuffered, and the Nothing.
func Decide(c *Cron, p Policy, st State, now time.Time) Decision {
	if p.Grace <= 0 {
		p.Grace = DefaultGrace
	}
	if !st.Buffered.IsZero() && !st.RunActive {
		return Decision{Action: StartBuffered, Tick: st.Buffered,
			Reason: fmt.Sprintf("the run that the tick at %s waited for has ended", c.when(st.Buffered))}
	}
	base := st.LastTick
	if st.Since.After(base) {
		base = st.Since
	}
	first := c.Next(base)
	if first.IsZero() || first.After(now) {
		d := Decision{Action: Nothing, Wake: first}
		if !st.Buffered.IsZero() {
			if poll := now.Add(time.Second); d.Wake.IsZero() || poll.Before(d.Wake) {
				d.Wake = poll
			}
		}
		return d
	}
	cutoff := now.Add(-p.Grace)
	if first.After(cutoff) {
		return c.decideTick(p, st, first, 0, "")
	}
	m, ok := c.Latest(base, cutoff)
	if !ok { // cannot happen: first is in (base, cutoff]
		m = first
	}
	dropped := c.count(base, m, MaxDropped)
	late := fmt.Sprintf("no control plane decided the tick at %s within its grace of %v", c.when(m), p.Grace)
	if dropped > 0 {
		late += fmt.Sprintf(", nor %s before it", ticks(dropped))
	}
	if next := c.Next(m); !next.IsZero() && !next.After(now) {
		return Decision{Action: Miss, Tick: m, Dropped: dropped,
			Reason: fmt.Sprintf("missed: %s; the tick at %s is on time", late, c.when(next))}
	}
	if p.CatchUp == CatchUpNone {
		return Decision{Action: Miss, Tick: m, Dropped: dropped,
			Reason: fmt.Sprintf("missed: %s (catch_up none)", late)}
	}
	return c.decideTick(p, st, m, dropped, fmt.Sprintf("late: %s; catching up on it (catch_up last)", late))
}

// decideTick applies the concurrency rule to tick t; late, if set, says
// why t is decided late.
func (c *Cron) decideTick(p Policy, st State, t time.Time, dropped int, late string) Decision {
	d := Decision{Action: Start, Tick: t, Dropped: dropped}
	const active = "a run this schedule started is still running"
	switch {
	case p.Concurrency == ConcurrencyAllow || !st.RunActive:
		// Start.
	case p.Concurrency != ConcurrencyWait:
		d.Action, d.Reason = Skip, active+" (concurrency skip)"
	case st.Buffered.IsZero():
		d.Action, d.Reason = Buffer, active+"; this tick waits for it to end (concurrency wait)"
	default:
		d.Action, d.Reason = Skip, fmt.Sprintf("%s and the tick at %s already waits for it (concurrency wait)", active, c.when(st.Buffered))
	}
	switch {
	case late != "" && d.Reason != "":
		d.Reason = late + "; but " + d.Reason
	case late != "":
		d.Reason = late
	}
	return d
}

// when formats a tick for a reason, on the schedule's wall clock.
func (c *Cron) when(t time.Time) string {
	return t.In(c.loc).Format("2006-01-02 15:04:05 MST")
}

func ticks(n int) string {
	switch {
	case n >= MaxDropped:
		return fmt.Sprintf("at least %d ticks", n)
	case n == 1:
		return "1 tick"
	}
	return fmt.Sprintf("%d ticks", n)
}
