// Package runtrace draws every run as a trace (DESIGN.md §9): run → phase
// → fan → step, the executor's span inside its step, each ask as a span of
// its waiting time, and each stretch after a park as a span linked to the
// decisions that released it. A Tracer is a runner.Observer: the Runner
// hands it each transition after the transition is committed.
//
// Invariants it enforces, and where (tracer.go):
//   - I8 the record is the truth: a span is drawn only from a committed
//     run, with the times the run records durably and ids derived from the
//     run (telemetry.RunTraceID, SpanID). Nothing is held open in memory,
//     so a crash loses at most an observation, never a fact, and a replica
//     that never saw a part begin still draws it as it happened.
//   - I10 fans are fans: a fan span carries the fan's wall clock
//     (tollgate.fan.wall_ms) and its branches' sum and maximum
//     (tollgate.fan.branch_sum_ms, tollgate.fan.branch_max_ms), taken from
//     the engine's one computation (engine.Machine.FansDone), the same the
//     API and metrics report; its branches are sibling step spans under it.
package runtrace
