// Package redisserver runs a private redis-server process: its own data
// directory, a unix socket and no TCP port, and an append-only file fsynced
// on every write unless told otherwise. internal/redistest starts one for
// each test; the bench program (internal/bench) one for each workload.
// StartCluster starts several such servers in cluster mode, on loopback
// TCP ports too, joins them with redis-cli --cluster create and waits
// until every node serves and agrees on the slot map.
//
// It enforces no invariant; it is a tool for tests and the bench.
package redisserver
