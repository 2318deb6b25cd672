package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

func externalSim(t *testing.T) *sim {
	t.Helper()
	s := newSim(t, &plan.Plan{Name: "claims", External: true})
	s.want(Running)
	if !s.run.External {
		t.Fatal("run of an external plan is not external")
	}
	return s
}

func gate(name string, at time.Time) OpenGate {
	return OpenGate{Gate: name, Actor: "alice", Title: "review " + name, Audience: "reviewer", Server: "gate", Tool: name,
		Args: plan.Object(`{"artifacts":{"claims.txt":"sha256:aa"}}`), Evidence: []Evidence{{Name: "claims.txt", Content: []byte("x"), Digest: "sha256:aa"}}, At: at}
}

// The seed's shape: steps and gates alternate in one run; the run is
// parked (never failed, never complete) while a gate waits, and every
// decision is journaled with its actor.
func TestExternalRunParksAtEachGate(t *testing.T) {
	s := externalSim(t)
	for i, g := range []string{"claims", "adjudication", "fix-plan", "commit"} {
		step := "step" + string(rune('1'+i))
		s.apply(ScriptStep{Step: step, Actor: "alice", Exit: 0, OutputDigest: "sha256:bb", StartedAt: s.tick(time.Second), FinishedAt: s.tick(time.Second), At: s.now})
		s.want(Running)
		tr := s.apply(gate(g, s.tick(time.Millisecond)))
		s.want(Parked)
		if len(tr.Effects) != 1 || tr.Effects[0] != (AskOpened{Ask: g}) {
			t.Fatalf("opening %s: effects %v", g, tr.Effects)
		}
		a := s.run.Asks[g]
		if a.Type != Gate || a.PayloadDigest() == "" || a.EvidenceDigest() == "" {
			t.Fatalf("gate %s: %+v", g, a)
		}
		if _, err := s.m.Apply(s.run, ScriptStep{Step: "sneak", Actor: "alice", At: s.now}); !errors.Is(err, ErrGateOpen) {
			t.Fatalf("a step recorded while %s waits: %v", g, err)
		}
		if _, err := s.m.Apply(s.run, Finish{Actor: "alice", At: s.now}); !errors.Is(err, ErrGateOpen) {
			t.Fatalf("finished while %s waits: %v", g, err)
		}
		s.approve(g, "bob")
		s.want(Running)
		if a := s.run.Asks[g]; a.State != AskConsumed || a.Decisions[0].Actor != "bob" || a.Decisions[0].Kind != DecisionApprove {
			t.Fatalf("gate %s after approval: %+v", g, a)
		}
	}
	s.apply(Finish{Actor: "alice", At: s.tick(time.Second)})
	s.want(Complete)
	if s.run.Parks != 4 {
		t.Fatalf("parks = %d, want 4", s.run.Parks)
	}
	decided := 0
	for _, r := range s.records {
		if r.Kind == JournalAskDecided && r.Actor == "bob" {
			decided++
		}
	}
	if decided != 4 {
		t.Fatalf("%d decisions journaled, want 4", decided)
	}
}

func TestExternalGateOutcomes(t *testing.T) {
	cases := []struct {
		name   string
		ev     func(s *sim) Event
		state  State
		ask    AskState
		reason string
	}{
		{"reject", func(s *sim) Event {
			return Decide{Ask: "g", Actor: "bob", Reject: true, Reason: "claims unsupported", At: s.tick(time.Second)}
		}, Rejected, AskRejected, "claims unsupported"},
		{"choose No", func(s *sim) Event { return Decide{Ask: "g", Actor: "bob", Option: GateNo, At: s.tick(time.Second)} }, Rejected, AskRejected, "chose No"},
		{"expire", func(s *sim) Event { return Tick{At: s.tick(DefaultAskExpiry)} }, Expired, AskExpired, "expired"},
		{"cancel", func(s *sim) Event { return Cancel{Actor: "alice", Reason: "abandoned", At: s.tick(time.Second)} }, Cancelled, AskCancelled, "abandoned"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := externalSim(t)
			s.apply(gate("g", s.tick(time.Second)))
			s.apply(c.ev(s))
			s.want(c.state)
			if a := s.run.Asks["g"]; a.State != c.ask {
				t.Fatalf("ask %s, want %s", a.State, c.ask)
			}
			if !strings.Contains(s.run.Reason, c.reason) {
				t.Fatalf("reason %q lacks %q", s.run.Reason, c.reason)
			}
			if _, err := s.m.Apply(s.run, gate("h", s.tick(time.Second))); !errors.Is(err, ErrRunEnded) {
				t.Fatalf("gate on an ended run: %v", err)
			}
		})
	}
}

func TestExternalRefusals(t *testing.T) {
	s := externalSim(t)
	s.apply(ScriptStep{Step: "extract", Actor: "alice", Exit: 3, At: s.tick(time.Second), FinishedAt: s.now})
	if st := s.run.Steps["extract"]; st.Status != StatusFailed || st.Error != "exit status 3" {
		t.Fatalf("failed step: %+v", st)
	}
	s.want(Running) // a failed step is the script's to handle
	s.apply(ScriptStep{Step: "extract", Actor: "alice", Exit: 0, At: s.tick(time.Second), FinishedAt: s.now})
	if st := s.run.Steps["extract"]; st.Status != StatusSucceeded || st.Attempt != 2 {
		t.Fatalf("re-run step: %+v", st)
	}
	s.apply(gate("g", s.tick(time.Second)))
	s.approve("g", "bob")

	bad := []struct {
		name string
		ev   Event
		want error
	}{
		{"step done", ScriptStep{Step: "extract", Actor: "alice", At: s.now}, ErrStepDone},
		{"gate again", gate("g", s.now), ErrAlreadyDecided},
		{"other actor", ScriptStep{Step: "x", Actor: "mallory", At: s.now}, ErrForbidden},
		{"bad gate name", gate("no/slash", s.now), ErrBadName},
		{"bad step name", ScriptStep{Step: "check~x", Actor: "alice", At: s.now}, ErrBadName},
		{"no summary", OpenGate{Gate: "h", Actor: "alice", At: s.now}, ErrWrongTransition},
		{"args not an object", OpenGate{Gate: "h", Actor: "alice", Title: "t", Args: plan.Object(`[1,2]`), At: s.now}, ErrWrongTransition},
		{"failed without reason", Finish{Actor: "alice", Failed: true, At: s.now}, ErrReasonRequired},
	}
	for _, b := range bad {
		if _, err := s.m.Apply(s.run, b.ev); !errors.Is(err, b.want) {
			t.Errorf("%s: got %v, want %v", b.name, err, b.want)
		}
	}
	// A recipe's run takes no external events.
	r := newSim(t, compile(t, "a: notes.search {}\n"))
	if _, err := r.m.Apply(r.run, gate("g", r.now)); !errors.Is(err, ErrNotExternal) {
		t.Fatalf("gate on a recipe run: %v", err)
	}
}

// Separation of duties for gates is the control plane's (policy); the
// engine still holds the recipe-level narrowing: named approvers only,
// and a quorum of distinct people.
func TestExternalGateQuorum(t *testing.T) {
	s := externalSim(t)
	g := gate("g", s.tick(time.Second))
	g.Quorum, g.Approvers = 2, []string{"bob", "carol"}
	s.apply(g)
	if _, err := s.m.Apply(s.run, Decide{Ask: "g", Actor: "dave", Option: GateApprove, At: s.now}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("unnamed approver: %v", err)
	}
	s.approve("g", "bob")
	s.want(Parked)
	if _, err := s.m.Apply(s.run, Decide{Ask: "g", Actor: "bob", Option: GateApprove, At: s.now}); !errors.Is(err, ErrAlreadyVoted) {
		t.Fatalf("second vote by bob: %v", err)
	}
	s.approve("g", "carol")
	s.want(Running)
}
