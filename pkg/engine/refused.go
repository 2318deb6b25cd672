package engine

import (
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// StepRefused: the control plane refused to hand the queued attempt to
// any executor, so it never ran (an executor says the tool is
// side-effecting, but the plan took it as read-only, so no approval
// governs it: I1, I2). The step fails with Reason; retries do not apply,
// since every one would be refused the same way. on_fail: skip still
// lets the run go on without it.
type StepRefused struct {
	Step    string
	Attempt int
	Reason  string
	At      time.Time
}

func (e StepRefused) at() time.Time { return e.At }

func (t *tx) refused(e StepRefused) error {
	s, err := t.attempt(e.Step, e.Attempt)
	if err != nil {
		return err
	}
	if s.Status != StatusQueued {
		return fmt.Errorf("%w: refusal of %s while %s", ErrWrongTransition, e.Step, s.Status)
	}
	a := &s.Attempts[len(s.Attempts)-1]
	a.FinishedAt, a.Error = t.at, e.Reason
	s.Blocked = false
	s.Status, s.Error = StatusFailed, e.Reason
	// A step.failed like any other (metrics, traces and fans count it),
	// marked as refused before it ran.
	t.record(JournalStepFailed, "system", map[string]any{"step": e.Step, "attempt": e.Attempt, "error": e.Reason, "refused": true})
	if t.m.steps[e.Step].step.OnFail != plan.OnFailSkip && t.run.Failing == "" {
		t.run.Failing = e.Step
	}
	return nil
}
