package engine

import (
	"testing"
	"time"
)

// The fan figures are what an SRE reads to tell a fan from a queue, so
// each one is checked against timings chosen so that a wrong formula
// (queue time counted as branch time, the sum reported as the wall, a
// retry's first attempt forgotten) gives a different number.
func TestFanFigures(t *testing.T) {
	s := newSim(t, skill(t, "graph-ask-demo"))
	place, ok := s.m.Place("cpu")
	if !ok || place.Group == "" || place.Phase != "" {
		t.Fatalf("cpu sits in a top-level fan: %+v %v", place, ok)
	}
	if p, _ := s.m.Place("mem"); p != place {
		t.Fatalf("cpu and mem share their fan: %+v %+v", p, place)
	}
	if p, _ := s.m.Place("brief"); p.Group != "" {
		t.Fatalf("brief runs alone: %+v", p)
	}
	queued := s.now
	cpu, mem := s.queued["cpu"], s.queued["mem"]
	// cpu: leased 5ms after queueing, runs 300ms. mem: waits 100ms for an
	// executor, runs 250ms, fails; no retry in this recipe.
	s.apply(StepLeased{Step: "cpu", Attempt: cpu.Attempt, Executor: "x1", LeaseID: "r1/cpu/1", At: queued.Add(5 * time.Millisecond)})
	s.apply(StepLeased{Step: "mem", Attempt: mem.Attempt, Executor: "x2", LeaseID: "r1/mem/1", At: queued.Add(100 * time.Millisecond)})
	before := s.run
	if _, done := s.m.Fan(s.run, place.Phase, place.Group); done {
		t.Fatal("a fan with branches in flight has no figures yet")
	}
	tr := s.apply(StepSucceeded{Step: "cpu", Attempt: cpu.Attempt, Output: []byte(`{}`), At: queued.Add(305 * time.Millisecond)})
	if got := s.m.FansDone(before, tr.Run, tr.Records); len(got) != 0 {
		t.Fatalf("half a fan is not done: %+v", got)
	}
	before = s.run
	tr = s.apply(StepFailed{Step: "mem", Attempt: mem.Attempt, Error: "no /proc", At: queued.Add(350 * time.Millisecond)})
	got := s.m.FansDone(before, tr.Run, tr.Records)
	if len(got) != 1 {
		t.Fatalf("the fan finished with mem: %+v", got)
	}
	f := got[0]
	if f.Branches != 2 || f.Wall != 350*time.Millisecond || f.BranchMax != 300*time.Millisecond || f.BranchSum != 550*time.Millisecond {
		t.Fatalf("figures: %+v", f)
	}
	if p := f.Parallelism(); p < 1.57 || p > 1.572 {
		t.Fatalf("parallelism 550/350 ≈ 1.571, got %v", p)
	}
	if again := s.m.FansDone(tr.Run, tr.Run, tr.Records); len(again) != 0 {
		t.Fatalf("a fan is reported done once: %+v", again)
	}
}

func TestBranchTimeSumsAttempts(t *testing.T) {
	s := &StepRun{Attempts: []Attempt{
		{N: 1, QueuedAt: t0, LeasedAt: t0.Add(time.Second), FinishedAt: t0.Add(3 * time.Second)},
		{N: 2, QueuedAt: t0.Add(3 * time.Second), LeasedAt: t0.Add(10 * time.Second), FinishedAt: t0.Add(11 * time.Second)},
		{N: 3, QueuedAt: t0.Add(11 * time.Second)}, // never leased
	}}
	if got := BranchTime(s); got != 3*time.Second {
		t.Fatalf("branch time is leased→finished summed over attempts: %v", got)
	}
}
