// Package memstore is the embedded store for --dev and quick starts: the
// same contract as the Redis store, and nothing survives the process.
//
// Invariants it enforces, and where (memstore.go): the store's I3, I4 and
// I8, as store.Store states them — Commit checks the version, the
// deadline by its own clock and the journal's prev hash against the
// stored head under one lock, before it writes run, asks and journal.
package memstore
