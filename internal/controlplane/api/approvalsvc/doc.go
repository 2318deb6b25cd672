// Package approvalsvc serves tollgate.v1.ApprovalService: the inbox, an
// ask's packet, every decision, answers in words, evidence, standing
// approvals and the inbox watch. Who may decide is the approvals desk's
// to say, at decision time; handlers convert, ask the desk, and move the
// run through the runner.
//
// Invariants it enforces, and where:
//   - I6: a decision that lets an action run quotes the payload and
//     evidence digests the caller was shown, pinned to the ask it was
//     judged on (decidable in decide.go; the engine refuses any other).
//   - I9: every decision is authorized now (decidable → approvals.Desk),
//     and an ask is visible only as api.Readers says.
//   - I5: every reply gets a typed answer (answer.go).
package approvalsvc
