// Package gatesvc serves tollgate.v1.GateService: gates from code. A
// script's run is an external run; its gates are asks like any other,
// decided under gate.NAME, and an approved gate yields a signed grant.
//
// Invariants it enforces, and where:
//   - I1, I6: a grant is signed only for an approved gate, over its one
//     payload digest and action gate.NAME, fence 1 (gateToProto, gateGrant
//     in gates.go); the service that performs the effect verifies it.
//   - I9: a gate opens only where policy covers gate.NAME, and --action
//     only raises the bar (approvals.Desk.RouteGate); visibility through
//     api.Readers.
package gatesvc
