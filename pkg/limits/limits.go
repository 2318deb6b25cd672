package limits

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

const (
	// MaxMessageBytes is the largest gRPC message any Tollgate process
	// sends or receives: 4 MiB, gRPC's default receive limit.
	MaxMessageBytes = 4 << 20
	// MaxExecutorLeases is the most leases one executor stream may hold
	// at once: the largest capacity an executor may be configured with,
	// the most credits a hello is given, and the most held leases a hello
	// may name (each one is a store read and perhaps a commit).
	MaxExecutorLeases = 4096
	// MaxValueBytes is the largest single value a run takes in or hands
	// on (see the package comment): 1 MiB, a quarter of a message, so a
	// lease or a decision packet carrying one fits with room to spare.
	MaxValueBytes = 1 << 20
	// LogValueBytes is how much of an untrusted value a log line or an
	// error message repeats (Short).
	LogValueBytes = 256
	// MaxErrorBytes is how much of an error message a log line or a
	// status sent to a client carries (a message may quote what a caller
	// sent; see Short).
	MaxErrorBytes = 16 << 10
)

// ErrTooLarge is what a value over its limit is refused with; the control
// plane answers it as InvalidArgument.
var ErrTooLarge = errors.New("too large")

// Value checks that a value of n bytes fits MaxValueBytes; the error
// names what (the field) and the limit, and wraps ErrTooLarge.
func Value(what string, n int) error {
	if n <= MaxValueBytes {
		return nil
	}
	return fmt.Errorf("%s: %d bytes, over the limit of %d bytes (%s): %w", what, n, MaxValueBytes, Size(MaxValueBytes), ErrTooLarge)
}

// Truncate returns s if it is at most n bytes long; otherwise its first
// n bytes (cut at a character boundary) followed by a marker saying how
// long s was: "…(3900000 bytes)".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:cut], len(s))
}

// Short is Truncate to LogValueBytes: what a log line or an error message
// repeats of a value a caller sent.
func Short(s string) string { return Truncate(s, LogValueBytes) }

// Size writes n bytes in binary units: "1 MiB", "4 MiB", "512 KiB".
func Size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
