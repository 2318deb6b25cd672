package engine

import (
	"maps"
	"slices"
	"time"
)

// clone copies a run so Apply never changes its input. The steps are
// shared, not copied: a transition copies a step the first time it writes
// it (tx.stepW), so a transition of a run of N steps copies N pointers and
// the few steps it changes, not N steps.
func (r *Run) clone() *Run {
	c := *r
	c.Phases = slices.Clone(r.Phases)
	c.Steps = maps.Clone(r.Steps)
	if c.Steps == nil {
		c.Steps = map[string]*StepRun{}
	}
	c.Asks = cloneAsks(r.Asks)
	return &c
}

// stepW returns a step of the run for writing: a copy private to this
// transition, made the first time it is asked for (nil if the run has no
// such step). Every write to a step goes through it; reads need not.
func (t *tx) stepW(id string) *StepRun {
	s := t.run.Steps[id]
	if s == nil || t.own == nil || t.own[s] {
		return s
	}
	t.log(id, s)
	t.touch(id, s)
	c := *s
	c.Attempts = slices.Clone(s.Attempts)
	t.own[&c] = true
	t.run.Steps[id] = &c
	return &c
}

// newStep adds a step to the run, owned by this transition.
func (t *tx) newStep(id string, s *StepRun) *StepRun {
	t.log(id, t.run.Steps[id])
	t.touch(id, t.run.Steps[id])
	t.run.Steps[id] = s
	if t.own != nil {
		t.own[s] = true
	}
	return s
}

// log remembers a step as it was before this event first touched it,
// for ApplyAll to put back should the event be refused.
func (t *tx) log(id string, old *StepRun) {
	if _, ok := t.undo[id]; t.undo != nil && !ok {
		t.undo[id] = old
	}
}

// parseDur reads a plan duration ("24h", "1h30m").
func parseDur(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return time.ParseDuration(s)
}
