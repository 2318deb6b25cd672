package errkind

import "errors"

// The kinds. A part returns fmt.Errorf("what happened: %w", errkind.X).
var (
	Invalid         = errors.New("invalid argument")
	NotFound        = errors.New("not found")
	Unauthenticated = errors.New("unauthenticated")
	Denied          = errors.New("permission denied")
	Unimplemented   = errors.New("not implemented yet")
	Precondition    = errors.New("failed precondition")
	// RequestReused: a request_id already made a run for another request
	// (ALREADY_EXISTS).
	RequestReused = errors.New("request_id already used")
	// Busy: a run changed too fast for a commit to land (ABORTED).
	Busy = errors.New("the run is changing too fast; try again")
	// Exhausted: a caller's share of a bounded resource is used up.
	Exhausted = errors.New("resource exhausted")
	// StalePayload: the payload changed since the caller read it.
	StalePayload = errors.New("the payload changed since you read it")
	// Undeliverable: a message would exceed the message limit, so it is
	// not sent (sending it would fail the stream every lease shares).
	Undeliverable = errors.New("undeliverable")
)
