// Package plan is the compiled form of a recipe: phases of steps and stopping
// points, where every option of an approval gate carries its own continuation.
//
// The JSON encoding of these types is the plan format of DESIGN.md §3; the
// proto Plan mirrors it. The package is pure: no I/O.
//
// Invariants it enforces, and where:
//   - I1 gate before effect: Verify (verify.go), written apart from the
//     compiler, refuses a plan with a side-effecting step that neither
//     carries without_asking nor sits inside an option of an approval
//     gate whose opening already knows every value its args read; the
//     engine calls it on every plan before a run starts, so a compiler bug
//     or a hand-made plan cannot walk past a gate.
package plan
