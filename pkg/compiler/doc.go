// Package compiler turns recipes and skills into plans. It is the only
// compiler: every surface (CLI, API, dev server, saved skills) calls it and
// shows the same plan card. It does no I/O.
//
// Invariants it enforces, and where:
//   - I1 gate before effect: every side effect is governed by the gate
//     around it, refused when an ask depends on it (refuse), or put behind
//     a gate of its own (addGates) — all in gates.go; a `without asking`
//     one carries a note on the card that starting the run approves it
//     (gates, gates.go; card.go), and is refused when its args read an
//     earlier step or an answer, not known when the start approves it
//     (unaskedKnown, gates.go). Literal args the tool's input schema
//     refuses are refused, with the field (checkArgs, build.go; the check
//     is pkg/toolschema's), so no gate is put to an approver for a call
//     that cannot run. A tool the catalog does not know is a
//     side effect (resolveTool, build.go), and what executors advertise
//     only makes the catalog stricter (stricter.go). Compile checks its own
//     plan with plan.Verify before returning it (compile.go).
package compiler
