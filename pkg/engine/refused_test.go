package engine

import (
	"errors"
	"testing"
	"time"
)

// Item 4: a queued attempt the control plane will not hand out fails
// without running, once (no retry: it would be refused again), and the
// run fails; on fail: skip lets the run go on. A refusal of an attempt
// already leased is a wrong transition.
func TestItem4_RefusedStepFailsWithoutRunning(t *testing.T) {
	s := newSim(t, compile(t, "a: notes.search {} retry: 2\n"))
	s.apply(StepRefused{Step: "a", Attempt: 1, Reason: "executor edge-1 says it is side-effecting", At: s.tick(time.Second)})
	s.want(Failed)
	if st := s.run.Steps["a"]; st.Status != StatusFailed || st.Attempt != 1 || st.Error == "" || st.Attempts[0].Executor != "" {
		t.Fatalf("refused: %+v", st)
	}

	s = newSim(t, compile(t, "a: notes.search {} on fail: skip\nb: notes.search {}\n"))
	s.apply(StepRefused{Step: "a", Attempt: 1, Reason: "no", At: s.tick(time.Second)})
	s.succeed("b", 1)
	s.want(Partial)

	s = newSim(t, compile(t, "a: notes.search {}\n"))
	s.apply(StepLeased{Step: "a", Attempt: 1, Executor: "edge-1", LeaseID: "l", At: s.tick(time.Second)})
	if _, err := s.m.Apply(s.run, StepRefused{Step: "a", Attempt: 1, Reason: "no", At: s.tick(time.Second)}); !errors.Is(err, ErrWrongTransition) {
		t.Fatalf("refusing a leased attempt: %v", err)
	}
}
