package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// TestItem9_ResolvedArgsOverTheLimitFailTheStepBeforeItIsLeased: an
// output within the limit, read twice by the next step's args, makes
// those args longer than a value may be once resolved: the step fails
// (no lease could carry it), saying why, and nothing is dispatched.
func TestItem9_ResolvedArgsOverTheLimitFailTheStepBeforeItIsLeased(t *testing.T) {
	s := newSim(t, compile(t, "cpu: mcp-monitor.get_cpu_info {}\nbig: notes.search {\"q\": \"{cpu}{cpu}\"}\n"))
	s.succeed("cpu", strings.Repeat("c", 700_000))
	if n := s.dispatched()["big"]; n != 0 {
		t.Fatalf("big was dispatched %d times with args over the limit", n)
	}
	st := s.run.Steps["big"]
	if st.Status != StatusFailed || !strings.Contains(st.Error, "big's args with their references resolved: 1400008 bytes, over the limit of 1048576") {
		t.Fatalf("big: %s %q", st.Status, st.Error)
	}
	s.want(Failed)
}

// TestItem9_PayloadOverTheLimitIsNeverAsked: a gate whose governed args
// are longer than a value may be once resolved is not asked (an approver
// could not be shown it, nor a lease carry it): the run fails, saying
// why, with no ask left open (I3).
func TestItem9_PayloadOverTheLimitIsNeverAsked(t *testing.T) {
	s := newSim(t, compile(t, "cpu: mcp-monitor.get_cpu_info {}\nask me:\n  store it?\nsave: notes.store {\"text\": \"{cpu}{cpu}\"}\n"))
	s.succeed("cpu", strings.Repeat("c", 700_000))
	s.want(Failed)
	if !strings.Contains(s.run.Reason, "cannot be asked") || !strings.Contains(s.run.Reason, "1048576") {
		t.Fatalf("reason %q", s.run.Reason)
	}
	for id, a := range s.run.Asks {
		if a.State.Open() {
			t.Fatalf("ask %s is open on a failed run", id)
		}
	}
}

// TestItem9_OutputOverTheLimitFailsItsStep: an output longer than a value
// may be is not recorded; its step fails with the reason.
func TestItem9_OutputOverTheLimitFailsItsStep(t *testing.T) {
	s := newSim(t, compile(t, "cpu: mcp-monitor.get_cpu_info {}\n"))
	s.succeed("cpu", strings.Repeat("c", limits.MaxValueBytes))
	st := s.run.Steps["cpu"]
	if st.Status != StatusFailed || len(st.Output) != 0 || !strings.Contains(st.Error, "not recorded: the output: 1048578 bytes") {
		t.Fatalf("cpu: %s %q (output %d bytes)", st.Status, st.Error, len(st.Output))
	}
	s.want(Failed)
}

// TestItem9_EvidenceOverTheLimitIsRefused: a gate's artifacts, all
// together, are one value.
func TestItem9_EvidenceOverTheLimitIsRefused(t *testing.T) {
	err := evidenceTooLarge([]Evidence{{Content: make([]byte, 600_000)}}, []Evidence{{Content: make([]byte, 600_000)}})
	if !errors.Is(err, ErrEvidence) || !errors.Is(err, limits.ErrTooLarge) {
		t.Fatalf("got %v", err)
	}
	if err := evidenceTooLarge(nil, []Evidence{{Content: make([]byte, 600_000)}}); err != nil {
		t.Fatal(err)
	}
}
