// Package errkind holds the kinds of error the control plane's parts
// return, wrapped with %w around what went wrong. The API maps each kind
// to one gRPC status code, once (api's interceptors); nothing below the
// API knows about gRPC.
//
// It enforces no invariant.
package errkind
