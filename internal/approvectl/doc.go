// Package approvectl is the approvectl command: one file per verb. Run is
// its testable entry point; main only wires the process to it.
//
// Invariants it enforces, and where: the control plane enforces them;
// approvectl keeps the approver's side of I6. An approval or answer binds
// the payload and evidence digests of the ask as shown (--payload,
// --evidence; shown, decide.go), and `grant verify` accepts a grant once,
// remembering it in a FileLedger or a shared Redis ledger (ledger.go,
// gate.go).
package approvectl
