// Package stubtools is an in-process tool host (executor.Host) whose tools
// do nothing but answer, for driving the real dispatcher and the real
// executor runtime over real gRPC without MCP servers: what is measured
// through it is Tollgate's own overhead. test/e2e and the bench program
// (internal/bench) use it.
//
// It enforces no invariant; it is a tool for tests and the bench.
package stubtools
