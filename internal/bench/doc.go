// Package bench is the bench program (cmd/tollgate-bench): it measures
// every figure of DESIGN.md §12 on a real redis-server (AOF on), a real
// control plane and in-process executors over loopback gRPC, and prints
// a Markdown table of figure, goal, measured and met (and writes JSON).
// With -peers it also runs the peers (bench/peers/temporal: Temporal's own
// server on PostgreSQL; bench/peers/river: River) on the same workloads and
// prints them side by side; with -trace it measures
// what tracing costs the sustained workload; with -replicas N it runs N
// control planes on the one Redis, an executor on each, and spreads the
// clients over them.
//
// It enforces no invariant; it measures (DESIGN.md §12).
package bench
