// Package mcpgw is the MCP gateway (DESIGN.md §9b): the control plane as
// the MCP server agents call, over streamable HTTP with bearer tokens.
// It lists the tools the executors connected here offer that policy lets
// the caller call (approvals.CallAction), and Tollgate's own: run a skill,
// a run's status, the caller's pending asks.
//
// A call is a run. The gateway writes the one-step recipe the call is
// (recipe.go), and the run starts through the one start path
// (runsvc.Service.Start, so the one compiler and the one road), with the
// caller as its requester and the call's idempotency key as its request
// id. A read-only call runs at once and returns the tool's result. A
// side-effecting call runs behind an explicit gate whose payload is the
// exact args, asked of the role policy gives the tool's action: the call
// waits (progress notifications say for whom, until when, and how to
// answer), then returns the tool's real result once an executor ran it
// with a grant for exactly those args, or the reason as a tool error
// (isError) when it was rejected, expired or failed. With Config.Pending
// it answers at once with the ask instead, and the outcome is read later
// (tollgate.run_status, or the same call with the same key).
//
// Invariants it enforces, and where:
//   - I1 (a side effect runs only after approval): a side-effecting call's
//     recipe has an approval gate over the call and no `without asking`
//     (recipe.go, callRecipe); without a policy loaded, when only the
//     agent itself could answer, the call is refused (call.go).
//   - I6 (an approval binds the exact payload): the call's args are the
//     gate's payload, literal or as inputs known at the start, never
//     references an agent could smuggle in: a string that reads like a
//     reference is passed as a run input, which is data (literalize).
//   - I9 (only who may, decides; every request authenticated): every HTTP
//     request carries a bearer token the control plane's Verifier accepts
//     (Handler); a tool is listed and called only where policy lets the
//     caller call it (approvals.Desk.MayCall); the gate is decided by
//     whoever policy gives the action, separation of duties from the
//     agent and its owner included (the desk, at decision time). The
//     gateway never decides an ask, and never asks the agent's client to
//     decide one (no elicitation stands in for a decision).
//   - Idempotency: the _meta key tollgate/idempotency_key is the run's
//     request id (RequestID): the same key returns the one run's outcome,
//     never a second execution, across restarts (the store keeps it).
package mcpgw
