// Package api is what every gRPC service of the control plane shares at
// the edge: the authenticated caller (Caller), the one mapping of error
// kinds to gRPC status (ToStatus, the interceptors), the bounds on what a
// request may carry and a response may hold (limits.go), who may see a
// run (Readers), and what watch streams share (Watches). The services
// themselves are one package each below it (runsvc, approvalsvc,
// auditsvc, gatesvc, plansvc): Config → New → Register, handlers thin —
// convert, call the runner or the approvals desk, convert.
//
// Invariants it enforces, and where:
//   - I9 every request is authenticated: Caller refuses an RPC with no
//     principal, and an executor's (caller.go); visibility is one rule,
//     NOT_FOUND for everyone it leaves out (readers.go).
//   - I8 what is recorded is readable: errors reach callers as one status
//     each, never losing the kind (status.go).
//   - Limits on every input: a value over limits.MaxValueBytes is refused
//     naming its field; a response over the message limit is cut to fit
//     (limits.go); a caller holds at most so many watch streams
//     (watches.go).
package api
