// Package executor is the agent that runs leased steps: it connects out to
// a control plane, advertises the tools it hosts, and runs each lease in a
// goroutine of its own so a slow tool never holds up another branch. It
// verifies every side-effecting lease's grant itself and records Start
// durably before invoking the tool, so a gate holds even against a control
// plane bug.
//
// Invariants it enforces, and where:
//   - I1, I2 from the executor's side: a call is side-effecting unless this
//     executor's own host lists the tool read-only — the lease can make it
//     stricter, never laxer (sideEffect, sideeffect.go) — and one without
//     a valid grant is refused, never run (execute, executor.go).
//   - I6: the grant must name this run, step, fence and action, and the
//     lease's args must digest to its payload; its verifier's ledger
//     accepts it once (grant.Verifier, built in cli.go).
//   - I7 at most once: Start is acknowledged durable before a side effect
//     is invoked (start, executor.go); each call carries the idempotency
//     key run/step (IdempotencyMetaKey, mcphost.go); a result is sent
//     until the control plane records it (deliver); a call that may have
//     run says so (TransportError.OutcomeUnknown), so it becomes a question.
//   - I10 fans are fans: every lease runs in a goroutine of its own, up to
//     the credits offered (session, executor.go).
//   - Work survives its stream (issue 15): a lease runs on when its
//     replica dies or the stream breaks; the next session's hello names
//     it with its fence (held_leases) and its start and result are sent
//     again on that stream (sendOn); only a lease the control plane calls
//     stale is cancelled.
package executor
