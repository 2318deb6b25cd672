// Package identity authenticates callers of the control plane (DESIGN.md §8).
//
// A [Verifier] checks bearer JWTs signed with Ed25519 (alg "EdDSA", and only
// that) against configured keys, issuer, audience and validity window, and
// turns a good token into a [Principal]. The gRPC interceptors run the same
// check on every unary and streaming RPC and put the Principal into the
// handler's context, where [FromContext] reads it; the actor of a request is
// always this Principal, never a field of the request body. An
// [OIDCVerifier] checks the ID tokens of the organisation's OpenID provider
// (discovery, a JWKS cache refreshed on an unknown kid at most once per
// MinRefresh, each key's algorithm pinned by its type) and gives the
// Principal the person's groups; a Verifier configured with one routes
// tokens to it by their "iss". [MintDev] and
// [Mint] make the key and tokens the --dev mode hands to named dev users.
//
// The package holds no mutable package-level state: everything lives in
// values the caller builds and owns.
//
// Invariants it enforces, and where:
//   - I9 every request is authenticated: Verifier.Verify (verifier.go)
//     checks signature, issuer, audience and validity; the interceptors
//     (grpc.go) refuse, as Unauthenticated, any RPC without a good token,
//     and the executor interceptors (mtls.go) any stream whose client
//     certificate was not verified. PerRPCCredentials (grpc.go) never
//     sends a token in clear text to a host that is not loopback.
package identity
