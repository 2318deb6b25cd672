// Package grant is the control plane's signed permission to run one
// side-effecting step once, with one exact payload, under one fence. The
// control plane signs; executors — and any service that performs an effect
// — verify before they act, so a gate holds even if the control plane had
// a bug (I1, I2, I6). The encoding is the one documented on the proto
// message tollgate.v1.Grant. Pure: no I/O, no clock of its own.
//
// Invariants it enforces, and where (grant.go):
//   - I1, I2 the executor's proof: Verify refuses, with one Err* reason, a
//     grant not signed by a trusted key, expired, or for another run, step
//     or fence; the caller must not act on a refusal.
//   - I6 one decision about one exact thing: the grant binds the action
//     (a verifier names the one it is about to perform) and the payload
//     digest, recomputed by Verify from the args the verifier holds
//     (freshness.PayloadDigest); its Ledger accepts it once (MemoryLedger
//     here, a shared one in client/grantledger), and a ledger that cannot
//     tell refuses it.
package grant
