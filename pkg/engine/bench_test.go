package engine

import (
	"testing"
	"time"
)

// BenchmarkTransition is one engine transition of a parked run: an
// approval that opens the continuation and dispatches the governed step.
func BenchmarkTransition(b *testing.B) {
	s := newSim(b, skill(b, "graph-ask-demo"))
	s.succeed("cpu", 1)
	s.succeed("mem", 2)
	s.succeed("brief", "x")
	parked := s.run
	ev := Decide{Ask: "ask_1", Actor: "alice", Option: "1", At: s.now.Add(time.Second)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.m.Apply(parked, ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStepResult is the most common transition: a step's result
// arriving and the next step dispatching.
func BenchmarkStepResult(b *testing.B) {
	s := newSim(b, skill(b, "pr-review"))
	d := s.queued["pr"]
	s.apply(StepLeased{Step: "pr", Attempt: d.Attempt, Executor: "x", At: s.tick(time.Millisecond)})
	run := s.run
	ev := StepSucceeded{Step: "pr", Attempt: d.Attempt, Output: []byte(`{"title":"fix"}`), At: s.now.Add(time.Millisecond)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.m.Apply(run, ev); err != nil {
			b.Fatal(err)
		}
	}
}
