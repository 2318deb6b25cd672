// Package controlplane is the control plane's wiring and nothing else:
// its settings (one table drives flags and the config file, config.go),
// dev mode (dev.go), and the Server that builds the parts and hands each
// what it needs — the approvals desk, the Runner with its dispatcher and
// observers, the API's services — then serves them and drains them.
//
// The jobs live in packages of their own, each naming the invariants it
// enforces: runner (the one road: I2, I3, I4, I7, I8), dispatch (leases,
// fences, grants: I2, I7), approvals (decision-time authority, routing,
// standing approvals, notices: I1, I5, I6, I9), api and its services (the
// edge: I9, and what each service names), internal/wire (proto ↔ domain)
// and internal/runtrace (traces from the record: I8, I10).
//
// Invariants it enforces, and where:
//   - I9 every request is authenticated: NewServer (server.go) puts
//     identity's interceptors on every unary and streaming RPC but health,
//     and serves executors only over TLS with verified client certificates.
package controlplane
