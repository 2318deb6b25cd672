package engine

// LeaseLostError is the error an attempt records when its lease was lost
// (no result reached the control plane).
const LeaseLostError = "lease lost"

// Reported reports whether attempt n of step has ended with an outcome its
// executor reported (a success, a failure, or a result that arrived after
// the run ended), rather than still running or lost. An executor that
// sends a result again, not knowing whether its first copy was recorded
// (the store's answer was lost), is then told that it was: the same
// result is never applied twice, since the engine refuses a second result
// for a finished attempt (its fence).
func (r *Run) Reported(step string, n int) bool {
	s, ok := r.Steps[step]
	if !ok {
		return false
	}
	for _, a := range s.Attempts {
		if a.N == n {
			return !a.FinishedAt.IsZero() && a.Error != LeaseLostError
		}
	}
	return false
}
