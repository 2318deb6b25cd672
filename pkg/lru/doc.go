// Package lru is a size-bounded cache that evicts the least recently used
// entry: every cache the control plane keeps of things callers can make
// it hold (plans, compilations, their views) is one of these, so memory
// follows the bound, not the number of distinct inputs ever seen.
//
// It enforces no invariant; it keeps memory bounded.
package lru
