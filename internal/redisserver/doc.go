// Package redisserver runs a private redis-server process: its own data
// directory, a unix socket and no TCP port, and an append-only file fsynced
// on every write unless told otherwise. internal/redistest starts one for
// each test; the bench program (internal/bench) one for each workload.
//
// It enforces no invariant; it is a tool for tests and the bench.
package redisserver
