package engine

import (
	"strings"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// tally counts a run's steps the way deriveState reads them. A run keeps
// the tally of its own steps (Run.tally, never encoded): a transition
// starts from its input's and adds what it changed (tx.touched), so
// deriving the state, and knowing whether any step waits, costs what the
// transition changed, not the run's size. A run without one (decoded from
// the store) is counted once.
type tally struct {
	inflight, queued, blocked, waiting, doubt, failedSkip int
	probes, probesBlocked                                 int
}

// count adds (sign 1) or removes (sign -1) one step.
func (m *Machine) count(c *tally, id string, s *StepRun, sign int) {
	if s == nil {
		return
	}
	if strings.HasPrefix(id, "check~") {
		// A freshness probe: it reads facts while people decide, so it
		// keeps no run from being parked.
		if s.Status == StatusQueued && s.Blocked {
			c.probesBlocked += sign
		} else if s.Status == StatusQueued || s.Status.InFlight() {
			c.probes += sign
		}
		return
	}
	switch s.Status {
	case StatusLeased, StatusStarted:
		c.inflight += sign
	case StatusQueued:
		c.queued += sign
		if s.Blocked {
			c.blocked += sign
		}
	case StatusWaiting:
		c.waiting += sign
	case StatusInDoubt:
		c.doubt += sign
	case StatusFailed:
		if si := m.steps[id]; si != nil && si.step.OnFail == plan.OnFailSkip {
			c.failedSkip += sign
		}
	}
}

// countAll counts every step of a run.
func (m *Machine) countAll(r *Run) tally {
	var c tally
	for id, s := range r.Steps {
		m.count(&c, id, s, 1)
	}
	return c
}

// counts is the tally of the transition's run as it is now: its input's
// and the difference of every step it touched since, or (without an
// input tally) a count of every step.
func (t *tx) counts() tally {
	if t.base == nil {
		return t.m.countAll(t.run)
	}
	c := *t.base
	for id, old := range t.touched {
		t.m.count(&c, id, old, -1)
		t.m.count(&c, id, t.run.Steps[id], 1)
	}
	return c
}

// startTally starts counting from the run as it is: its own tally, or
// one count of its steps.
func (t *tx) startTally() {
	if t.run.tally != nil {
		t.base = t.run.tally
	} else {
		c := t.m.countAll(t.run)
		t.base = &c
	}
	t.touched = map[string]*StepRun{}
}

// touch remembers a step as it was before this transition first wrote
// it (nil: it did not exist), for counts.
func (t *tx) touch(id string, old *StepRun) {
	if _, ok := t.touched[id]; t.touched != nil && !ok {
		t.touched[id] = old
	}
}
