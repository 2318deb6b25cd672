package engine

import (
	"errors"
	"testing"
	"time"
)

// Item 8 (issue 13): an executor re-sends a result whose first copy may
// have been recorded. The second copy is never applied (the attempt's
// fence), and Reported tells the control plane that the first one was,
// so it can acknowledge the copy; a lost attempt is not reported.
func TestItem8_ResentResultIsAppliedOnceAndReported(t *testing.T) {
	s := newSim(t, compile(t, "w: notes.store {} without asking\nb: notes.search {}\n"))
	s.apply(StepLeased{Step: "w", Attempt: 1, Executor: "x1", At: s.tick(time.Second)})
	s.apply(StepStarted{Step: "w", Attempt: 1, At: s.tick(time.Second)})
	if s.run.Reported("w", 1) {
		t.Fatal("a running attempt is not reported")
	}
	s.apply(StepSucceeded{Step: "w", Attempt: 1, Output: []byte(`"ok"`), At: s.tick(time.Second)})
	if _, err := s.m.Apply(s.run, StepSucceeded{Step: "w", Attempt: 1, Output: []byte(`"again"`), At: s.now}); !errors.Is(err, ErrWrongTransition) {
		t.Fatalf("a second copy of the result is refused: %v", err)
	}
	if !s.run.Reported("w", 1) || string(s.run.Steps["w"].Output) != `"ok"` {
		t.Fatalf("the first copy is the one recorded: %v %s", s.run.Reported("w", 1), s.run.Steps["w"].Output)
	}
	s.apply(StepLeased{Step: "b", Attempt: 1, Executor: "x1", At: s.tick(time.Second)})
	s.apply(LeaseLost{Step: "b", Attempt: 1, At: s.tick(time.Second)})
	if s.run.Reported("b", 1) || s.run.Reported("b", 2) || s.run.Reported("nope", 1) {
		t.Fatal("a lost attempt, a queued one and an unknown step are not reported")
	}
}
