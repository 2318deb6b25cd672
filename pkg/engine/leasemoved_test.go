package engine

import (
	"errors"
	"testing"
	"time"
)

// Issue 15, item 3 in the engine: a lease moves only as its executor
// re-attaches it, from the replica that held it, at its fence; a lease
// that moved is not lost by the replica it left.
func TestLeaseMovesAndIsLostOnlyByItsHolder(t *testing.T) {
	recipe := "m: notes.store {\"text\": \"x\"} without asking\n"
	started := func() *sim {
		s := newSim(t, compile(t, recipe))
		s.apply(StepLeased{Step: "m", Attempt: 1, Executor: "edge-1", LeaseID: "l", Replica: "cp-a", At: s.tick(time.Second)})
		s.apply(StepStarted{Step: "m", Attempt: 1, At: s.tick(time.Second)})
		return s
	}
	for _, tc := range []struct {
		name string
		ev   LeaseMoved
		want error
	}{
		{"another executor", LeaseMoved{Step: "m", Attempt: 1, Executor: "edge-2", From: "cp-a", Replica: "cp-b"}, ErrStaleAttempt},
		{"from a replica that does not hold it", LeaseMoved{Step: "m", Attempt: 1, Executor: "edge-1", From: "cp-c", Replica: "cp-b"}, ErrStaleAttempt},
		{"a stale fence", LeaseMoved{Step: "m", Attempt: 2, Executor: "edge-1", From: "cp-a", Replica: "cp-b"}, ErrStaleAttempt},
		{"to no replica", LeaseMoved{Step: "m", Attempt: 1, Executor: "edge-1", From: "cp-a"}, ErrWrongTransition},
	} {
		s := started()
		tc.ev.At = s.tick(time.Second)
		if _, err := s.m.Apply(s.run, tc.ev); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}

	s := started()
	s.apply(LeaseMoved{Step: "m", Attempt: 1, Executor: "edge-1", From: "cp-a", Replica: "cp-b", At: s.tick(time.Second)})
	if a := s.run.Steps["m"].Attempts[0]; a.Replica != "cp-b" || s.run.Steps["m"].Status != StatusStarted {
		t.Fatalf("after the move: %+v, %s", a, s.run.Steps["m"].Status)
	}
	if s.records[len(s.records)-1].Kind != JournalStepLeaseMoved {
		t.Fatalf("the move is journaled: %v", s.records[len(s.records)-1].Kind)
	}
	// cp-a's loss of the lease it no longer holds changes nothing.
	if _, err := s.m.Apply(s.run, LeaseLost{Step: "m", Attempt: 1, Replica: "cp-a", At: s.tick(time.Second)}); !errors.Is(err, ErrStaleAttempt) {
		t.Fatalf("the replica it left loses it: %v", err)
	}
	// Its holder's loss puts the started side effect in doubt.
	s.apply(LeaseLost{Step: "m", Attempt: 1, Replica: "cp-b", At: s.tick(time.Second)})
	if st := s.run.Steps["m"].Status; st != StatusInDoubt {
		t.Fatalf("lost by its holder: %s, want in doubt", st)
	}
	// Done: a finished attempt does not move.
	if _, err := s.m.Apply(s.run, LeaseMoved{Step: "m", Attempt: 1, Executor: "edge-1", From: "cp-b", Replica: "cp-c", At: s.tick(time.Second)}); !errors.Is(err, ErrWrongTransition) {
		t.Fatalf("an attempt in doubt moved: %v", err)
	}
}
