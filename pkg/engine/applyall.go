package engine

import (
	"fmt"
	"slices"
)

// ApplyAll applies evs in order, each to the run the last accepted one
// left, exactly as calling Apply once per event would, but copying the
// run once rather than once per event: a batch of k events on a run of N
// steps copies N pointers, not k·N. It returns each event's transition
// and error as Apply would; every accepted event's transition carries the
// final run. run is not modified.
func (m *Machine) ApplyAll(run *Run, evs []Event) ([]Transition, []error) {
	trs := make([]Transition, len(evs))
	errs := make([]error, len(evs))
	if run.PlanDigest != m.digest {
		err := fmt.Errorf("run %s was started from plan %s, not %s", run.ID, run.PlanDigest, m.digest)
		for i := range errs {
			errs[i] = err
		}
		return trs, errs
	}
	t := &tx{m: m, run: run.clone(), own: map[*StepRun]bool{}}
	var accepted []int
	for i, ev := range evs {
		// What a refused event must leave as it was: the run's own
		// fields, its asks (few, copied whole), and the steps it touches
		// (logged by stepW and newStep as they are first touched).
		hdr := *t.run
		hdr.Phases = slices.Clone(t.run.Phases)
		asks := cloneAsks(t.run.Asks)
		// Each event copies what it writes afresh, so what it changed in
		// place is only ever its own copy.
		t.own, t.undo = map[*StepRun]bool{}, map[string]*StepRun{}
		t.startTally()
		t.effects, t.records, t.reply, t.refusal = nil, nil, nil, nil
		tr, err := t.apply(ev)
		if err != nil {
			for id, old := range t.undo {
				if old == nil {
					delete(t.run.Steps, id)
				} else {
					hdr.Steps[id] = old
				}
			}
			hdr.Asks = asks
			*t.run = hdr
			errs[i] = err
			continue
		}
		trs[i] = tr
		accepted = append(accepted, i)
	}
	t.undo = nil
	for _, i := range accepted {
		trs[i].Run = t.run
	}
	return trs, errs
}

// cloneAsks deep-copies a run's asks.
func cloneAsks(asks map[string]*AskRun) map[string]*AskRun {
	c := make(map[string]*AskRun, len(asks))
	for k, a := range asks {
		ca := *a
		ca.Options = slices.Clone(a.Options)
		ca.Payload = slices.Clone(a.Payload)
		ca.Decisions = slices.Clone(a.Decisions)
		c[k] = &ca
	}
	return c
}
