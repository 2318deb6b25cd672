// Package wire converts between the API's protos (gen/tollgate/v1) and the
// domain types of pkg/plan, pkg/engine, pkg/compiler and pkg/grant: the
// edge where protos become domain values, so pkg/ never imports gen/ or
// gRPC (DESIGN.md §11). Handlers convert a request with wire, call the
// pure cores with domain values, and convert the result back with wire.
// One file per domain type (runs.go, asks.go, plans.go, compile.go,
// grant.go); a function that reads a proto is named …FromProto.
//
// It enforces no invariant itself; it keeps these contracts, each held by
// a test:
//   - Round trips are lossless: PlanFromProto(Plan(p, d)) digests as p
//     (plans.go), and a grant that crossed the wire still verifies: a
//     conversion carries every field a verifier checks (grant.go; I1,
//     I2). A proto enum value with no domain meaning is an error, never a
//     silent default.
//   - What the API shows of a run or an ask is the run as recorded (I8):
//     states, actors, times and decisions are rendered, not recomputed
//     (runs.go, asks.go). A fan's figures are the engine's one computation
//     (engine.Machine.Fan), the same that traces and metrics report (I10).
//   - A plan's view (its proto and card) is built once per plan and shared
//     by the responses that carry it, in a bounded cache owned by whoever
//     renders runs (views.go); the package keeps no state of its own.
package wire
