// Package examples holds the example skills and the tool catalog, embedded
// so that approvectl can compile offline from any directory.
//
// It enforces no invariant; it is data.
package examples
