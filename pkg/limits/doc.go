// Package limits holds the size limits every Tollgate process agrees on,
// and the one way untrusted values are shortened for logs and errors.
//
// There is one message limit, MaxMessageBytes, for every gRPC sender and
// receiver (the control plane's API and executor listeners, executors,
// approvectl, client/gates and the bench clients). It is gRPC's default
// receive limit, so a client built with default options agrees too.
//
// Values are bounded where they enter, so that every message carrying
// them fits: one value (an answer, a run input, a reason, a gate payload,
// an artifact, a step's args after its references are resolved, a step's
// output) is at most MaxValueBytes. A request carrying a longer value is
// refused with InvalidArgument naming the field and the limit; a step
// whose resolved args would be longer fails, with that reason, before it
// is leased; an output that is longer fails its step. Responses that
// gather many values (GetRun, GetAsk, ListJournal, watch streams) are cut
// to fit MaxMessageBytes: the longest strings are shortened first, each
// ending with the marker Truncate writes.
//
// It enforces no invariant of DESIGN.md §1; it holds the bounds the API
// (internal/controlplane/api), the engine and the executor apply.
package limits
