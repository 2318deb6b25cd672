// Package gates is the Go client for gates from code: a script or service
// declares a gate in the middle of its own work, blocks until a person
// decides, journals the steps it ran, and ends its run. It talks to the
// control plane's GateService and RunService over a connection the caller
// dials and authenticates; approvectl's gate, step and finish verbs are
// built on it.
//
// A gate is decided by people through approvectl (or any ApprovalService
// client), with the same routing, separation of duties, expiry and journal
// as a recipe's gate. An approved gate yields a grant: the control plane's
// signed permission for the gate's one payload, which the service that
// performs the effect verifies (pkg/grant) before it acts.
//
// It talks gRPC, so it lives under client/, not pkg/ (pkg/ stays pure,
// DESIGN.md §11). It enforces no invariant itself: the control plane
// does, whichever client asks.
package gates
