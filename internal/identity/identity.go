package identity

import (
	"context"
	"errors"
	"slices"
)

// Principal kinds. A Principal's Kind is always one of these.
const (
	// KindPerson is a human user (an approver or a requester).
	KindPerson = "person"
	// KindService is a non-human caller of the approver API.
	KindService = "service"
	// KindExecutor is an executor agent. Executors authenticate with mTLS,
	// so a bearer token never yields this kind (see [Verifier.Verify]).
	KindExecutor = "executor"
)

// Principal is an authenticated caller. Subject is the stable id of the
// caller within Issuer ("sub" of a JWT, or the configured person claim of
// an OpenID provider's token), Kind is one of [KindPerson], [KindService]
// or [KindExecutor], and Issuer names who vouched for it ("iss" of a JWT).
// Groups are the person's groups at the OpenID provider (bare names,
// sorted, distinct); only [OIDCVerifier] sets them, so a token of any
// other issuer carries none whatever its claims say. Treat Groups as
// read-only.
type Principal struct {
	Subject string
	Kind    string
	Issuer  string
	Groups  []string
}

// clone is p with its own copy of Groups.
func (p Principal) clone() Principal {
	p.Groups = slices.Clone(p.Groups)
	return p
}

// ErrUnauthenticated is the kind of every error this package returns when a
// credential is missing or not acceptable. Such errors wrap it (test with
// errors.Is) and read "unauthenticated: <reason>", where reason is a short
// lowercase phrase such as "token expired" or "wrong audience". The text
// never contains the credential itself.
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrInvalidConfig is the kind of the errors returned for a bad [Config],
// bad arguments to [Mint] or [MintDev], or unusable key material.
var ErrInvalidConfig = errors.New("invalid identity config")

// authError is an ErrUnauthenticated with its reason kept apart, so the gRPC
// interceptors can report the bare reason as the status message.
type authError struct{ reason string }

func (e *authError) Error() string { return ErrUnauthenticated.Error() + ": " + e.reason }
func (e *authError) Unwrap() error { return ErrUnauthenticated }

func unauthenticated(reason string) error { return &authError{reason: reason} }

// reasonOf returns the bare reason of an authentication error, or a generic
// one for any other error.
func reasonOf(err error) string {
	var ae *authError
	if errors.As(err, &ae) {
		return ae.reason
	}
	return "authentication failed"
}

type principalKey struct{}

// WithPrincipal returns a copy of ctx carrying p, replacing any Principal ctx
// already carries. Only code that has authenticated p (the interceptors of
// this package, or tests) should call it.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the Principal carried by ctx. ok is false when ctx
// carries none, or carries one with an empty Subject: a zero Principal never
// counts as authenticated.
func FromContext(ctx context.Context) (p Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(Principal)
	if !ok || p.Subject == "" {
		return Principal{}, false
	}
	return p, true
}
