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
//     principal, and an executor's (caller.go); who may see a run is one
//     rule, and everyone it leaves out gets NOT_FOUND (Readers, readers.go).
//   - I8 what is recorded is readable: a response over the message limit
//     is cut to fit, never refused (FitResponse, limits.go).
//
// Its other contracts: each error kind maps to one gRPC status, once
// (ToStatus, status.go); a request value over limits.MaxValueBytes is
// refused naming its field (limits.go); a caller holds at most so many
// watch streams (watches.go).
package api
