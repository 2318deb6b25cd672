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
//
// Stopping (Config.DrainTimeout; the binary's --drain-timeout, default
// 20s): when Run's context ends (SIGTERM), the executor leaves instead of
// dropping its work (leave, drain.go). It says Leaving, so the control
// plane sends it no new lease; a lease already on its way is handed back
// in another Leaving, never acked or run, and is offered elsewhere at the
// same fence. The leases it runs finish and report as usual (a started
// side effect's result is recorded, not put in doubt) until the timeout;
// the rest are cancelled and reported abandoned, as after the control
// plane's Drain, and it sends Drained. With no drain timeout the end of
// the context stops everything at once.
//
// Probes (--admin-listen, admin.go): plain HTTP, /healthz (200 while the
// process runs) and /readyz (200 while a stream's hello is welcomed and
// the executor is not leaving; else 503 with the reason). Run reports its
// state through Config.Status; the handler reads only that.
package executor
