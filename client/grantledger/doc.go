// Package grantledger holds grant.Ledger implementations that live
// outside the verifier's process, so verifiers that share one refuse a
// grant any of them accepted: the ledger is the verifier's memory, and a
// replay is refused only where that memory is shared.
//
// It is not under pkg/ because it talks to Redis (pkg/ stays pure); the
// Ledger interface it implements is pkg/grant's. Services in Go use it
// directly; `approvectl grant verify --ledger redis://…` uses it too.
//
// Invariants it enforces, and where (redis.go):
//   - I6 a grant is consumed at most once, at the executing side: Use is
//     one SET NX PX, so of any number of verifiers racing on one grant
//     exactly one is told it is fresh; a call that fails refuses the
//     grant; Open refuses a Redis that keeps no append-only file, whose
//     restart would let every used grant be replayed.
package grantledger
