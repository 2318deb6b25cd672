// Package runsvc serves tollgate.v1.RunService: starting a run from a
// skill or a recipe (compiled by the one compiler, and started through the
// one road), reading, listing, cancelling and watching runs. Handlers are
// thin: the caller, then the runner, then the wire form.
//
// Invariants it enforces, and where:
//   - I1: a `without asking` side effect starts only where policy lets the
//     starter approve it (StartRun, approvals.Desk.MayStartUnasked).
//   - I2: every run starts through runner.Runner.Start (runs.go).
//   - I3: CancelRun closes the run's asks in the same commit (the engine's
//     Cancel, committed by the runner).
//   - I4: reads go through runner.Runner.Get, which applies deadlines.
//   - I6: a start that quotes the plan digest it reviewed starts that plan
//     or none (StartRun, expected_plan_digest).
//   - I9: visibility through api.Readers on every read.
package runsvc
