package executor

import (
	"strings"
	"sync"

	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// Status is what an executor's Run loop last said about itself, for its
// readiness probe (/readyz, admin.go). Run is its only writer; it is safe
// for concurrent use, and a nil *Status records nothing.
type Status struct {
	mu        sync.Mutex
	connected bool   // a stream is open and its hello was welcomed
	lastErr   string // why the last stream ended, or could not open
	draining  bool   // Run's context ended: the executor is leaving
}

// Ready reports whether the executor takes work: it has a welcomed stream
// to a control-plane replica and is not leaving. When not, why says so in
// one line.
func (s *Status) Ready() (ok bool, why string) {
	if s == nil {
		return false, "no status"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.draining:
		return false, "draining"
	case s.connected:
		return true, ""
	case s.lastErr == "":
		return false, "not connected to a control plane: no stream opened yet"
	default:
		return false, "not connected to a control plane: " + s.lastErr
	}
}

// welcomed: a session's hello was accepted.
func (s *Status) welcomed() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.connected, s.lastErr = true, ""
	s.mu.Unlock()
}

// ended: the session ended (or never opened) with err.
func (s *Status) ended(err error) {
	if s == nil {
		return
	}
	why := "stream ended"
	if err != nil {
		// One line (errors.Join, one per replica tried, joins with
		// newlines), short enough for a probe's event.
		why = limits.Truncate(strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " "), reasonBytes)
	}
	s.mu.Lock()
	s.connected, s.lastErr = false, why
	s.mu.Unlock()
}

// leaving: Run's context ended; from now on the executor is not ready.
func (s *Status) leaving() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
}

// reasonBytes bounds the reason /readyz gives.
const reasonBytes = 1 << 10
