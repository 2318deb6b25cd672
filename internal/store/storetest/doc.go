// Package storetest is the conformance suite every store.Store passes.
// A store's own tests call Run with a constructor that returns a fresh,
// empty store.
//
// It enforces no invariant of its own; it is the suite that holds every
// store to store.Store's I3 (atomic commits), I4 (deadline by the store's
// clock) and I8 (the journal's head).
package storetest
