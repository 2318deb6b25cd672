// Package freshness is the one home of every digest Tollgate computes and
// of the comparison that decides whether what a person approved is still
// what would run. Every digest is "sha256:" and 64 lower-case hex digits.
// The encodings are a contract: stored journals, grants and votes carry
// these digests, so a change to any of them breaks what is already
// recorded (the tests pin known inputs to their digests).
//
// Invariants it enforces, and where:
//   - I6 one decision about one exact thing (digest.go): PayloadDigest is
//     one action's args as canonical JSON; the engine binds it into an
//     ask, the control plane signs it into a grant, and every verifier
//     recomputes it from the args it holds, so all three are this one
//     function (I1, I2). PayloadsDigest, EvidenceDigest, ValueDigest and
//     ContentDigest digest the rest of a decision packet — every action an
//     ask governs, its evidence, a value shown by reference, an artifact;
//     BasisDigest all a decision on an ask is judged by (I9).
//   - I6, facts (facts.go): ReadFacts and FactsDigest (the resource
//     version) are the material facts an approval was given on; Changes
//     names what moved, which retires the approval; Mask shows a change
//     without disclosing account-like values.
//   - I8 the record is the truth (journal.go): JournalDigest is a journal
//     record's hash, the link of the hash chain.
//
// PlanDigest (digest.go) is a plan's identity, what a run started from.
// Pure: no I/O, no clock, no package state. Canonical JSON is pkg/plan's
// (plan.Object, plan.AppendCanonical); this package builds on it.
package freshness
