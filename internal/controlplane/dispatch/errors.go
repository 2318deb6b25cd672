package dispatch

import (
	"errors"

	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// retryable reports whether err says the store could not record a fact
// now, though it may later: the fact is kept and recorded again.
func retryable(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, errkind.Busy)
}

// engineRefusal reports whether err is the engine refusing an event that
// no longer fits the run (so retrying it is pointless).
func engineRefusal(err error) bool {
	return errors.Is(err, engine.ErrStaleAttempt) || errors.Is(err, engine.ErrWrongTransition) ||
		errors.Is(err, engine.ErrUnknownStep) || errors.Is(err, engine.ErrRunEnded)
}
