// Package devstack links a control plane started with --dev to an
// executor in the same process: the one place where the two binaries'
// packages meet, so neither imports the other.
//
// It enforces no invariant; it is dev-mode wiring.
package devstack
