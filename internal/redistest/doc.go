// Package redistest starts a private redis-server for a test: its own
// directory, a unix socket and no TCP port, an append-only file fsynced on
// every write, and stopped when the test ends. Tests that need Redis call
// Start; without redis-server on PATH they skip, except under CI=true,
// where they fail (CI never skips silently). StartCluster starts a Redis
// Cluster of several masters on loopback (it also needs redis-cli). The
// processes themselves are internal/redisserver's.
//
// It enforces no invariant; it is a tool for tests.
package redistest
