// Package schedule is the pure core of Tollgate's schedules: it parses the
// cron expression and time zone a schedule starts runs of a saved skill
// on, and decides, given what the store holds about a schedule and the
// store's clock, what should happen now. Several control-plane replicas
// each run a loop that asks Decide, claims the decision in the shared
// store with compare-and-set (State.Apply gives the state to write), and
// asks again; the store and the loop are not here. The package does no I/O
// and reads no clock.
//
// It enforces these invariants:
//
//   - Each tick is decided once and in order: every decision's tick is
//     after the schedule's base (the later of its last decided tick and
//     Since) and becomes the new last tick, so applying decisions never
//     decides a tick twice nor goes backwards. A buffered tick (concurrency
//     wait) is started once, by StartBuffered, which does not move the last
//     tick.
//   - Nothing is decided before it is due: no decision's tick is after now,
//     and none is at or before Since (when the schedule was created or last
//     resumed).
//   - Missed ticks follow catch_up: a tick not decided within the grace is
//     missed; when a later tick is on time, the missed ones are folded into
//     one Miss; otherwise catch_up none misses them and catch_up last
//     decides the latest as if on time. Every missed tick is accounted for
//     (Decision.Dropped counts the ones folded in, up to MaxDropped).
//   - The decision is a pure function of the cron, the policy, the state and
//     the clock passed in, so every replica decides the same, and the work
//     per decision is bounded however long the schedule went undecided.
//
// Ticks are the instants whose wall-clock time in the schedule's zone
// matches the expression (see Cron for daylight-saving gaps and overlaps).
// The zone database is the host's (or time/tzdata, if the binary embeds
// it): replicas should run with the same one.
//
// It enforces none of the ten invariants of docs/invariants.md by itself;
// the control plane's schedule loop relies on the ones above so that a tick
// starts at most one run however many replicas claim it.
package schedule
