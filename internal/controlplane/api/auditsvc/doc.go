// Package auditsvc serves tollgate.v1.AuditService: verifying a run's
// journal chain, checking the invariants over what was recorded, and
// listing the journal.
//
// Invariants it enforces, and where (audit.go):
//   - I8 the record is the truth: the journal is read back and its hash
//     chain verified (VerifyJournal, store.VerifyChain); CheckInvariants
//     reads I3 (a pending ask on a terminal run) and I1 (a side effect
//     started without a consumed approval, engine.AttemptAuthorized) off
//     the record.
//   - I9: only runs api.Readers lets the caller see (forRuns).
package auditsvc
