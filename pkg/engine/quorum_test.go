package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// floorOf is a QuorumFloor: the quorum of the listed actions, 0 for others.
func floorOf(q map[string]int) func([]string) int {
	return func(actions []string) int {
		n := 0
		for _, a := range actions {
			n = max(n, q[a])
		}
		return n
	}
}

func simWith(t *testing.T, p *plan.Plan, cfg Config) *sim {
	t.Helper()
	m, err := New(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &sim{t: t, m: m, now: t0, queued: map[string]Dispatch{}}
	s.take(m.Start("r1", "alice", t0))
	return s
}

const memberStore = "a: notes.search {\"q\": \"x\"}\nask member:\n  store it?\nb: notes.store {\"text\": \"{a}\"}\n"

// The policy's floor fixes a recipe ask's quorum when it opens: the
// recipe said nothing, policy says 2, one approval runs nothing.
func TestPolicyQuorumIsEnforcedForRecipes(t *testing.T) {
	s := simWith(t, compile(t, memberStore), Config{QuorumFloor: floorOf(map[string]int{"notes.store": 2})})
	s.succeed("a", "x")
	if q := s.run.Asks["ask_1"].Quorum; q != 2 {
		t.Fatalf("the ask opened with quorum %d; policy says 2", q)
	}
	s.approve("ask_1", "bob")
	if s.dispatched()["b"] != 0 {
		t.Fatal("one approval of a policy quorum of 2 ran notes.store")
	}
	s.approve("ask_1", "carol")
	if s.dispatched()["b"] != 1 {
		t.Fatal("two approvals did not run notes.store")
	}
}

// A gate's quorum is the larger of the request's and the policy's for
// gate.NAME and every action it raised (Also).
func TestPolicyQuorumIsEnforcedForGates(t *testing.T) {
	for _, tc := range []struct {
		name      string
		requested int
		also      []string
		want      int
	}{
		{"the script asks none", 0, nil, 2},
		{"the script asks fewer", 1, nil, 2},
		{"the script asks more", 3, nil, 3},
		{"a raised action's quorum", 0, []string{"payments.pay"}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := simWith(t, &plan.Plan{Name: "claims", External: true}, Config{QuorumFloor: floorOf(map[string]int{"gate.g": 2, "payments.pay": 4})})
			g := gate("g", s.tick(time.Second))
			g.Quorum, g.Also = tc.requested, tc.also
			s.apply(g)
			if q := s.run.Asks["g"].Quorum; q != tc.want {
				t.Fatalf("gate quorum %d, want %d", q, tc.want)
			}
		})
	}
}

// The in-doubt ask about a step inherits the governing ask's effective
// quorum (the policy's): a retry needs as many distinct people.
func TestPolicyQuorumIsEnforcedForInDoubtRetry(t *testing.T) {
	s := simWith(t, compile(t, memberStore), Config{QuorumFloor: floorOf(map[string]int{"notes.store": 2})})
	s.succeed("a", "x")
	s.approve("ask_1", "bob")
	s.approve("ask_1", "carol")
	s.apply(StepLeased{Step: "b", Attempt: 1, Executor: "x1", At: s.tick(time.Second)})
	s.apply(StepStarted{Step: "b", Attempt: 1, At: s.tick(time.Second)})
	s.apply(LeaseLost{Step: "b", Attempt: 1, At: s.tick(time.Second)})
	a := s.run.Asks["doubt_b_1"]
	if a == nil || a.Quorum != 2 {
		t.Fatalf("the in-doubt ask's quorum: %+v", a)
	}
	s.apply(Decide{Ask: a.ID, Actor: "bob", Option: DoubtRetry, At: s.tick(time.Second)})
	if s.dispatched()["b"] != 1 {
		t.Fatal("one retry of a policy quorum of 2 ran the effect again")
	}
	s.apply(Decide{Ask: a.ID, Actor: "dave", Option: DoubtRetry, At: s.tick(time.Second)})
	if s.dispatched()["b"] != 2 {
		t.Fatal("two retries did not run it again")
	}
}

// A policy raised after the ask opened: the decision carries the quorum
// policy sets now (Decide.Quorum, Answer.Quorum); the approval that
// would have completed the old quorum is one vote of the new one. A
// lower number never lowers it.
func TestPolicyQuorumRaisedAfterOpen(t *testing.T) {
	s := simWith(t, compile(t, memberStore), Config{})
	s.succeed("a", "x")
	if q := s.run.Asks["ask_1"].Quorum; q > 1 {
		t.Fatalf("no floor, quorum %d", q)
	}
	s.apply(Decide{Ask: "ask_1", Actor: "bob", Option: "1", Quorum: 2, At: s.tick(time.Second)})
	if s.dispatched()["b"] != 0 || s.run.Asks["ask_1"].Quorum != 2 {
		t.Fatalf("policy now says 2: bob alone ran it (quorum %d)", s.run.Asks["ask_1"].Quorum)
	}
	if _, err := s.m.Apply(s.run, Decide{Ask: "ask_1", Actor: "bob", Option: "1", Quorum: 1, At: s.now}); !errors.Is(err, ErrAlreadyVoted) {
		t.Fatalf("bob again, under a lowered policy: %v", err)
	}
	s.apply(Answer{Ask: "ask_1", Actor: "carol", Text: "1", Quorum: 1, At: s.tick(time.Second)})
	if s.dispatched()["b"] != 1 {
		t.Fatalf("bob and carol approved; a lower number lowered nothing, and two of two run it: %v", s.run.Asks["ask_1"].State)
	}
	raised := false
	for _, r := range s.records {
		raised = raised || (r.Kind == JournalAskQuorumRaised && r.Payload["to"] == 2)
	}
	if !raised {
		t.Fatal("the raise is not journaled")
	}

	// An in-doubt retry likewise.
	s.apply(StepLeased{Step: "b", Attempt: 1, Executor: "x1", At: s.tick(time.Second)})
	s.apply(StepStarted{Step: "b", Attempt: 1, At: s.tick(time.Second)})
	s.apply(LeaseLost{Step: "b", Attempt: 1, At: s.tick(time.Second)})
	s.apply(Decide{Ask: "doubt_b_1", Actor: "bob", Option: DoubtRetry, Quorum: 3, At: s.tick(time.Second)})
	s.apply(Decide{Ask: "doubt_b_1", Actor: "carol", Option: DoubtRetry, Quorum: 3, At: s.tick(time.Second)})
	if s.dispatched()["b"] != 1 {
		t.Fatal("policy now says 3: two retries ran the effect again")
	}
	s.apply(Decide{Ask: "doubt_b_1", Actor: "dave", Option: DoubtRetry, Quorum: 3, At: s.tick(time.Second)})
	if s.dispatched()["b"] != 2 {
		t.Fatal("three retries did not run it again")
	}
}

// Issue 16: an approval ask nobody could decide (Config.Undecidable, as
// it opens with its args resolved) is never parked: the run fails with
// the reason, and the governed step never runs.
func TestUndecidableAskFailsTheRun(t *testing.T) {
	var seen string
	s := simWith(t, compile(t, memberStore), Config{Undecidable: func(run *Run, a *AskRun) string {
		seen = a.Payload[0].Server + "." + a.Payload[0].Tool + " " + string(a.Payload[0].Args)
		return "nobody holds member"
	}})
	s.succeed("a", "x")
	if s.run.State != Failed || !strings.Contains(s.run.Reason, "cannot be decided by anyone") || !strings.Contains(s.run.Reason, "nobody holds member") {
		t.Fatalf("run %s %q, want failed with the reason", s.run.State, s.run.Reason)
	}
	if _, ok := s.run.Asks["ask_1"]; ok || s.dispatched()["b"] != 0 {
		t.Fatalf("asks %v, dispatched %v: nothing parks, nothing runs", s.run.Asks, s.dispatched())
	}
	if !strings.Contains(seen, `notes.store {"text":"x"}`) {
		t.Fatalf("judged %q, want the resolved args", seen)
	}
}
