package engine

import (
	"slices"
	"time"
)

// clone deep-copies a run so Apply never changes its input.
func (r *Run) clone() *Run {
	c := *r
	c.Phases = slices.Clone(r.Phases)
	c.Steps = make(map[string]*StepRun, len(r.Steps))
	for k, s := range r.Steps {
		cs := *s
		cs.Attempts = slices.Clone(s.Attempts)
		cs.Output = slices.Clone(s.Output)
		c.Steps[k] = &cs
	}
	c.Asks = make(map[string]*AskRun, len(r.Asks))
	for k, a := range r.Asks {
		ca := *a
		ca.Options = slices.Clone(a.Options)
		ca.Payload = slices.Clone(a.Payload)
		ca.Decisions = slices.Clone(a.Decisions)
		c.Asks[k] = &ca
	}
	return &c
}

// parseDur reads a plan duration ("24h", "1h30m").
func parseDur(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return time.ParseDuration(s)
}
