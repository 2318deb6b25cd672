// Package freshness is the one home of every digest Tollgate computes and
// of the comparison that decides whether what a person approved is still
// what would run:
//
//   - PayloadDigest: one governed action's args, as canonical JSON. The
//     engine binds it into an ask, the control plane signs it into a
//     grant, and every verifier recomputes it from the args it holds, so
//     all three must be this one function (I1, I2, I6).
//   - PayloadsDigest, EvidenceDigest, ValueDigest, ContentDigest: the rest
//     of a decision packet — every action an ask governs, the evidence it
//     shows, a value shown by reference, an artifact's bytes (I6).
//   - BasisDigest: everything a decision on an ask is judged by, so a
//     decision commits only on the ask it was authorized on (I6, I9).
//   - ReadFacts, FactsDigest, Changes, Mask: the material facts an
//     approval was given on, their digest (the resource version), the
//     named changes that retire an approval whose facts moved, shown
//     without disclosing account-like values (I6).
//   - PlanDigest: a plan's identity (what a run started from).
//   - JournalDigest: a journal record's hash, the link of the hash chain
//     (I8).
//
// Every digest is "sha256:" and 64 lower-case hex digits. The encodings are
// a contract: stored journals, grants and votes carry these digests, so a
// change to any of them breaks what is already recorded (the tests pin
// known inputs to their digests).
//
// Pure: no I/O, no clock, no package state. Canonical JSON is pkg/plan's
// (plan.Object, plan.AppendCanonical); this package builds on it.
package freshness
