// Package wire converts between the API's protos (gen/tollgate/v1) and the
// domain types of pkg/plan, pkg/engine and pkg/compiler. Protos stop here:
// handlers convert a request with wire, call the pure cores with domain
// values, and convert the result back with wire (DESIGN.md §11, "protos
// convert to domain types at the edge").
//
// Contracts, and where they are kept:
//   - Plans are lossless both ways: PlanFromProto(Plan(p, d)) digests as p
//     (plans.go); a proto enum value with no domain meaning is an error,
//     never a silent default.
//   - What the API shows of a run or an ask is read from the run as
//     recorded (I8): states, actors, times and decisions are rendered, not
//     recomputed (runs.go, asks.go). A fan's figures are the engine's one
//     computation (engine.Machine.Fan), the same that traces and metrics
//     report (I10).
//   - A plan's view (its proto and card) is built once per plan and shared
//     by the responses that carry it, in a bounded cache owned by whoever
//     renders runs (views.go); the package keeps no state of its own.
package wire
