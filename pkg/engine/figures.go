package engine

import (
	"slices"
	"time"
)

// FanFigures are a parallel group's timings once every branch is done:
// what tells a fan that ran in parallel (Wall near BranchMax) from one
// that ran a branch at a time (Wall near BranchSum).
//
// A branch's time is what executors spent on it: from each attempt's
// lease to its finish, summed over attempts. Time queued for an executor
// is not branch time, so a fan starved of executors shows it: its wall
// grows towards the sum while every branch stays short. Wall runs from
// the first branch queued to the last one finished.
type FanFigures struct {
	Phase, Group string
	Branches     int
	Steps        []string // the branches, in plan order
	Start, End   time.Time
	Wall         time.Duration
	BranchSum    time.Duration
	BranchMax    time.Duration
}

// Parallelism is BranchSum ÷ Wall: about the branch count for a fan of
// equal branches run at once, about 1 for one run a branch at a time.
func (f FanFigures) Parallelism() float64 {
	if f.Wall <= 0 {
		return 0
	}
	return float64(f.BranchSum) / float64(f.Wall)
}

// BranchTime is the time executors spent on a step: each attempt's lease
// to its finish, summed.
func BranchTime(s *StepRun) time.Duration {
	var d time.Duration
	for _, a := range s.Attempts {
		if !a.LeasedAt.IsZero() && !a.FinishedAt.IsZero() && a.FinishedAt.After(a.LeasedAt) {
			d += a.FinishedAt.Sub(a.LeasedAt)
		}
	}
	return d
}

// Fan returns the figures of the parallel group in phase; false while a
// branch is not done, or if the group has no branches in the run.
func (m *Machine) Fan(run *Run, phase, group string) (FanFigures, bool) {
	f := FanFigures{Phase: phase, Group: group}
	if group == "" {
		return f, false
	}
	for _, id := range m.PhaseSteps(phase) {
		if m.steps[id].step.ParallelGroup != group {
			continue
		}
		s := run.Steps[id]
		if s == nil || !s.Status.Done() {
			return f, false
		}
		f.Branches++
		f.Steps = append(f.Steps, id)
		for _, a := range s.Attempts {
			if !a.QueuedAt.IsZero() && (f.Start.IsZero() || a.QueuedAt.Before(f.Start)) {
				f.Start = a.QueuedAt
			}
			if a.FinishedAt.After(f.End) {
				f.End = a.FinishedAt
			}
		}
		bt := BranchTime(s)
		f.BranchSum += bt
		f.BranchMax = max(f.BranchMax, bt)
	}
	if f.Branches == 0 {
		return f, false
	}
	if !f.Start.IsZero() && f.End.After(f.Start) {
		f.Wall = f.End.Sub(f.Start)
	}
	return f, true
}

// FansDone lists the fans the move from before to after finished: every
// branch done in after, not in before (nil before: a new run). Records
// say which steps moved, so a commit costs only its own steps.
func (m *Machine) FansDone(before, after *Run, records []Record) []FanFigures {
	var out []FanFigures
	var seen []Place
	for _, rec := range records {
		switch rec.Kind {
		case JournalStepSucceeded, JournalStepFailed, JournalStepCancelled:
		default:
			continue
		}
		id, _ := rec.Payload["step"].(string)
		p, ok := m.Place(id)
		if !ok || p.Group == "" || slices.Contains(seen, p) {
			continue
		}
		seen = append(seen, p)
		f, done := m.Fan(after, p.Phase, p.Group)
		if !done {
			continue
		}
		if before != nil {
			if _, was := m.Fan(before, p.Phase, p.Group); was {
				continue
			}
		}
		out = append(out, f)
	}
	return out
}
