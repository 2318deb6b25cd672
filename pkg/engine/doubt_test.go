package engine

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// Item 2 in the engine: the in-doubt ask about a governed step carries the
// governing ask's payload, audience, approvers and quorum. The requester
// may say it ran or stop; a retry needs the quorum of distinct named
// approvers, runs with exactly the approved args, and is journaled as a
// consumed approval — what AttemptAuthorized (the audit's rule) reads.
func TestItem2_InDoubtCarriesTheGoverningAuthority(t *testing.T) {
	recipe := "a: notes.search {\"q\": \"x\"}\nask finance:\n  store it?\n  approvers: 2 of bob, carol, dave\nb: notes.store {\"text\": \"{a}\"}\n"
	lost := func() (*sim, *AskRun) {
		s := newSim(t, compile(t, recipe))
		s.succeed("a", "x")
		s.apply(Decide{Ask: "ask_1", Actor: "bob", Option: "1", At: s.tick(time.Second)})
		s.apply(Decide{Ask: "ask_1", Actor: "carol", Option: "1", At: s.tick(time.Second)})
		s.apply(StepLeased{Step: "b", Attempt: 1, Executor: "x1", At: s.tick(time.Second)})
		s.apply(StepStarted{Step: "b", Attempt: 1, At: s.tick(time.Second)})
		s.apply(LeaseLost{Step: "b", Attempt: 1, At: s.tick(time.Second)})
		a := s.run.Asks["doubt_b_1"]
		gov := s.run.Asks["ask_1"]
		if a == nil || a.Audience != "finance" || a.Quorum != 2 || !slices.Equal(a.Approvers, gov.Approvers) ||
			len(a.Payload) != 1 || a.Payload[0].Digest != gov.Payload[0].Digest {
			t.Fatalf("the in-doubt ask carries the governing authority: %+v", a)
		}
		return s, a
	}

	s, a := lost()
	s.apply(Decide{Ask: a.ID, Actor: "alice", Option: DoubtRan, At: s.tick(time.Second)})
	if s.run.Steps["b"].Status != StatusSucceeded {
		t.Fatalf("the requester says it ran: %s", s.run.Steps["b"].Status)
	}

	s, a = lost()
	for _, who := range []string{"erin", "alice"} {
		if _, err := s.m.Apply(s.run, Decide{Ask: a.ID, Actor: who, Option: DoubtRetry, At: s.now}); !errors.Is(err, ErrForbidden) {
			t.Fatalf("%s, whom the recipe does not name, retries: %v", who, err)
		}
	}
	s.apply(Decide{Ask: a.ID, Actor: "dave", Option: DoubtRetry, At: s.tick(time.Second)})
	if _, err := s.m.Apply(s.run, Decide{Ask: a.ID, Actor: "dave", Option: DoubtRetry, At: s.now}); !errors.Is(err, ErrAlreadyVoted) {
		t.Fatalf("one person twice: %v", err)
	}
	if s.dispatched()["b"] != 1 || s.run.Asks[a.ID].State != AskPending {
		t.Fatal("one retry vote of a two-person quorum ran the effect again")
	}
	s.apply(Decide{Ask: a.ID, Actor: "carol", Option: DoubtRetry, At: s.tick(time.Second)})
	d := s.queued["b"]
	if s.dispatched()["b"] != 2 || d.Grant != a.ID || string(d.Args) != string(a.Payload[0].Args) {
		t.Fatalf("the retry runs under the in-doubt decision with the approved args: %+v", d)
	}
	consumed := map[string]bool{}
	for _, r := range s.records {
		if r.Kind == JournalApprovalConsumed {
			consumed[r.Payload["ask"].(string)] = true
		}
	}
	if !AttemptAuthorized(d.Grant, func(ask string) bool { return consumed[ask] }) {
		t.Fatalf("the decided retry is journaled as the consumed approval of attempt 2: %v", consumed)
	}
	if AttemptAuthorized("doubt_x_9", func(ask string) bool { return consumed[ask] }) || AttemptAuthorized("", func(string) bool { return true }) {
		t.Fatal("an unconsumed or missing approval authorizes nothing")
	}
}
