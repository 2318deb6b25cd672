// Package engine is the run state machine of DESIGN.md §4: (plan, run,
// event) → (new run, effects). It is pure — no I/O, no clock (events carry
// the store's time), no goroutines — so any control-plane replica can apply
// any event to any run, and the store makes each transition durable.
//
// Invariants it enforces, and where:
//   - I1 gate before effect: New refuses a plan plan.Verify rejects
//     (machine.go); a side effect is queued only once its gate's approval
//     is consumed, or the start approves it (`without asking`) (grant,
//     advance.go); AttemptAuthorized (types.go) is the rule audits replay.
//   - I3 a parked run is never terminal: end closes every open ask in the
//     transition that ends the run (apply.go).
//   - I4 deadlines by readers: Apply applies every passed deadline before
//     the event, at the event's time (expire, apply.go).
//   - I5 non-answers terminate: every reply gets a typed Reply from package
//     answer (AskRun.Reply; answer, apply.go); every ask has a deadline.
//   - I6 one decision about one exact thing: an ask binds its payload and
//     evidence digests when it opens (open, advance.go); a decision applies
//     only to the ask it was judged on (StillAsJudged, judged.go); an
//     approval is consumed once (grant); one whose facts changed goes
//     stale and is asked anew (checked, stale in advance.go). A call whose
//     resolved args its tool's input schema refuses is never asked: the
//     run fails instead (Config.CheckArgs; open, advance.go), and an
//     amendment it refuses is refused (amend, apply.go).
//   - I7 nothing completed runs twice: events of another attempt are
//     refused (attempt, apply.go); a side effect reports only after its
//     recorded start, and one lost after it started becomes an in-doubt
//     ask, never a blind retry (leaseLost, openDoubt, resolveDoubt).
//   - I8 the record: every change is journaled in the transition that
//     makes it (record, apply.go; kinds in journalkinds.go).
//   - I10 fans are fans: every runnable branch queues in one transition
//     (advance.go); a fan's wall, sum and max are one computation (figures.go).
package engine
