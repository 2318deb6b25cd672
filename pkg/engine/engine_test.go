package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/answer"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

func TestGraphAskDemoEndToEnd(t *testing.T) {
	s := newSim(t, skill(t, "graph-ask-demo"))
	if got := s.dispatched(); got["cpu"] != 1 || got["mem"] != 1 || len(got) != 2 {
		t.Fatalf("start dispatches exactly the fan: %v", got)
	}
	s.want(Running)
	s.succeed("cpu", map[string]any{"cores": 2})
	s.fail("mem", "no /proc")
	if s.run.Steps["join_probes"].Status != StatusSucceeded {
		t.Fatalf("need 1 of 2: the join holds with one success: %+v", s.run.Steps["join_probes"])
	}
	if p := s.queued["brief"].Prompt; !strings.Contains(p, `{"cores":2}`) {
		t.Fatalf("brief's prompt should splice cpu's output: %q", p)
	}
	s.succeed("brief", "a calm machine")
	s.want(Parked)
	a := s.run.Asks["ask_1"]
	if a == nil || a.State != AskPending || len(a.Payload) != 1 || string(a.Payload[0].Args) != `{"text":"a calm machine"}` {
		t.Fatalf("ask_1 must be pending with save's exact args: %+v", a)
	}
	if _, ok := s.queued["save"]; ok {
		t.Fatal("I1: save dispatched before the approval")
	}
	s.approve("ask_1", "alice")
	d := s.queued["save"]
	if d.Grant != "ask_1" || string(d.Args) != `{"text":"a calm machine"}` || !d.SideEffect {
		t.Fatalf("save must dispatch under ask_1 with the approved args: %+v", d)
	}
	if s.run.Asks["ask_1"].State != AskConsumed {
		t.Fatalf("the approval is consumed by the dispatch: %s", s.run.Asks["ask_1"].State)
	}
	s.succeed("save", map[string]any{"ok": true})
	s.want(Partial) // mem failed but the join held
	if s.run.ID != "r1" {
		t.Fatal("one run id")
	}
}

func TestRejectEndsRejected(t *testing.T) {
	s := newSim(t, skill(t, "graph-ask-demo"))
	s.succeed("cpu", 1)
	s.succeed("mem", 2)
	s.succeed("brief", "x")
	if _, err := s.m.Apply(s.run, Decide{Ask: "ask_1", Actor: "alice", Reject: true, At: s.tick(time.Second)}); !errors.Is(err, ErrReasonRequired) {
		t.Fatalf("reject without a reason: %v", err)
	}
	s.apply(Decide{Ask: "ask_1", Actor: "alice", Reject: true, Reason: "not today", At: s.tick(time.Second)})
	s.want(Rejected)
	if !strings.Contains(s.run.Reason, "not today") || s.dispatched()["save"] != 0 {
		t.Fatalf("reason %q, save dispatched %d", s.run.Reason, s.dispatched()["save"])
	}
	d := s.run.Asks["ask_1"].Decisions
	if len(d) != 1 || d[0].Actor != "alice" || d[0].Kind != DecisionReject || d[0].Reason != "not today" || !d[0].At.Equal(s.now) {
		t.Fatalf("decision recorded with actor, time and reason: %+v", d)
	}
}

func TestDecisionRefusals(t *testing.T) {
	s := newSim(t, skill(t, "graph-ask-demo"))
	s.succeed("cpu", 1)
	s.succeed("mem", 2)
	s.succeed("brief", "x")
	cases := []struct {
		ev   Event
		want error
	}{
		{Decide{Ask: "ask_1", Actor: "bob", Option: "1", At: s.now}, ErrForbidden},
		{Decide{Ask: "nope", Actor: "alice", Option: "1", At: s.now}, ErrUnknownAsk},
		{Decide{Ask: "ask_1", Actor: "alice", Option: "9", At: s.now}, ErrBadOption},
	}
	for _, c := range cases {
		if _, err := s.m.Apply(s.run, c.ev); !errors.Is(err, c.want) {
			t.Errorf("%+v: got %v, want %v", c.ev, err, c.want)
		}
	}
	before := s.run
	s.approve("ask_1", "alice")
	if before.Asks["ask_1"].State != AskPending {
		t.Fatal("Apply changed its input run")
	}
	if _, err := s.m.Apply(s.run, Decide{Ask: "ask_1", Actor: "alice", Option: "1", At: s.now}); !errors.Is(err, ErrAlreadyDecided) {
		t.Fatalf("second approval: %v", err)
	}
}

func TestExpiryIsEnforcedByTheReader(t *testing.T) {
	for _, c := range []struct {
		onExpiry string
		want     State
	}{{"", Expired}, {"  on expiry: reject\n", Rejected}, {"  on expiry: cancel\n", Cancelled}} {
		s := newSim(t, compile(t, "a: notes.search {}\nask me:\n  go?\n  expires: 1h\n"+c.onExpiry+"w: notes.store {\"t\":\"{a}\"}\n"))
		s.succeed("a", "x")
		s.want(Parked)
		late := s.run.Asks["ask_1"].ExpiresAt
		tr, err := s.m.Apply(s.run, Decide{Ask: "ask_1", Actor: "alice", Option: "1", At: late})
		if err != nil || !errors.Is(tr.Refusal, ErrExpired) {
			t.Fatalf("an approval at the deadline is refused as expired and the expiry committed: err=%v refusal=%v", err, tr.Refusal)
		}
		s.take(tr)
		s.want(c.want)
		if s.run.Asks["ask_1"].State != AskExpired || s.dispatched()["w"] != 0 {
			t.Fatalf("ask %s, w dispatched %d", s.run.Asks["ask_1"].State, s.dispatched()["w"])
		}
		var idle any
		for _, r := range s.records {
			if r.Kind == JournalAskExpired {
				idle = r.Payload["idle_ms"]
			}
		}
		if idle != int64(time.Hour/time.Millisecond) {
			t.Fatalf("the expiry records its idle time: %v", idle)
		}
		if _, err := s.m.Apply(s.run, Decide{Ask: "ask_1", Actor: "alice", Option: "1", At: late.Add(time.Hour)}); !errors.Is(err, ErrExpired) {
			t.Fatalf("later: %v", err)
		}
	}
}

func TestCancelClosesAsksInTheSameTransition(t *testing.T) {
	s := newSim(t, skill(t, "morning-briefing"))
	if s.run.Asks["gate_ping"] == nil || s.run.Asks["gate_ping"].State != AskPending {
		t.Fatal("ping's gate opens at once")
	}
	s.want(Running) // the sources run while the gate waits
	tr := s.apply(Cancel{Actor: "alice", Reason: "enough", At: s.tick(time.Second)})
	s.want(Cancelled)
	if s.run.Asks["gate_ping"].State != AskCancelled {
		t.Fatal("I3: a cancelled run holds no pending ask")
	}
	cancels := 0
	for _, e := range tr.Effects {
		if _, ok := e.(AskClosed); ok {
			cancels++
		}
	}
	if cancels != 1 {
		t.Fatalf("the ask is closed in the cancel's own transition: %d", cancels)
	}
	for _, st := range s.run.Steps {
		if st.Status == StatusQueued || st.Status == StatusWaiting {
			t.Fatalf("nothing stays runnable after cancel: %+v", st)
		}
	}
	if _, err := s.m.Apply(s.run, Cancel{Actor: "alice", At: s.now}); !errors.Is(err, ErrRunEnded) {
		t.Fatalf("cancel twice: %v", err)
	}
}

func TestPRReviewFourGatesOneRun(t *testing.T) {
	s := newSim(t, skill(t, "pr-review"))
	s.succeed("pr", "pr")
	s.succeed("diff", "diff")
	s.succeed("claims", "1. x")
	for i, step := range []string{"verdicts", "plan"} {
		s.want(Parked)
		s.approve([]string{"ask_1", "ask_2"}[i], "alice")
		s.succeed(step, step)
	}
	s.want(Parked)
	s.approve("ask_3", "alice")
	if s.queued["patch"].Grant != "ask_3" {
		t.Fatalf("patch is governed by ask_3: %+v", s.queued["patch"])
	}
	s.succeed("patch", "sha")
	s.approve("ask_4", "alice")
	s.succeed("push", "ok")
	s.want(Complete)
	if len(s.run.Asks) != 4 || s.run.ID != "r1" {
		t.Fatalf("one run, four asks: %d", len(s.run.Asks))
	}
}

func TestQuestionsAndAddedGates(t *testing.T) {
	s := newSim(t, skill(t, "uml-diagram"))
	s.succeed("source", "readme")
	s.want(Parked)
	s.apply(Decide{Ask: "kind", Actor: "alice", Option: "2", At: s.tick(time.Second)})
	if p := s.queued["drawing"].Prompt; p != "draw a class diagram of the service described in readme" {
		t.Fatalf("the chosen label is data: %q", p)
	}
	s.succeed("drawing", "classDiagram")
	tr := s.apply(Answer{Ask: "destination", Actor: "alice", Text: "docs/checkout.md", At: s.tick(time.Second)})
	if tr.Reply == nil || tr.Reply.Kind != answer.Selected {
		t.Fatalf("a free-text answer is selected: %+v", tr.Reply)
	}
	g := s.run.Asks["gate_saved"]
	if g == nil || !g.Added || string(g.Payload[0].Args) != `{"branch":"docs","content":"classDiagram","path":"docs/checkout.md","repo":"acme/shop"}` {
		t.Fatalf("the added gate shows saved's exact args: %+v", g)
	}
	s.approve("gate_saved", "alice")
	s.succeed("saved", "ok")
	s.want(Complete)
}

func TestVendorPaymentPayloadIsWhatRuns(t *testing.T) {
	s := newSim(t, skill(t, "vendor-payment"))
	s.succeed("vendor", map[string]any{"bank_account": "XX2048", "status": "active"})
	s.succeed("invoice", "I")
	s.succeed("po", "P")
	s.succeed("match", "ok")
	a := s.run.Asks["ask_1"]
	if a.Audience != "finance" || a.OnExpiry != "reject" || !a.ExpiresAt.Equal(a.OpenedAt.Add(8*time.Hour)) {
		t.Fatalf("%+v", a)
	}
	want := `{"amount":485000,"bank_account":"XX2048","currency":"INR","invoice":"I-991","vendor":"V-1187"}`
	if string(a.Payload[0].Args) != want || !strings.HasPrefix(a.Payload[0].Digest, "sha256:") {
		t.Fatalf("payload: %s", a.Payload[0].Args)
	}
	s.succeed(CheckStepID("ask_1"), map[string]any{"bank_account": "XX2048", "status": "active"}) // the facts as asked
	s.approve("ask_1", "carol")                                                                   // a role ask: authorization is the control plane's job
	if _, ok := s.queued["pay"]; ok {
		t.Fatal("I6: pay dispatched before the check probe verified the facts")
	}
	s.succeed(CheckStepID("ask_1"), map[string]any{"bank_account": "XX2048", "status": "active"})
	if string(s.queued["pay"].Args) != want {
		t.Fatalf("dispatched %s, approved %s", s.queued["pay"].Args, want)
	}
}

func TestJoinFailureFailsTheRun(t *testing.T) {
	s := newSim(t, compile(t, "together f:\n  a: notes.search {}\n  b: notes.search {}\nthen:\n  c: say {a} {b}\n"))
	s.apply(StepLeased{Step: "b", Attempt: 1, Executor: "x2", At: s.tick(time.Millisecond)})
	s.fail("a", "boom")
	if s.run.Steps["join_f"].Status != StatusFailed {
		t.Fatalf("need 2 of 2 with a failure fails the join: %+v", s.run.Steps["join_f"])
	}
	s.want(Running) // b is still in flight: let it settle
	s.apply(StepSucceeded{Step: "b", Attempt: 1, Output: []byte("1"), At: s.tick(time.Millisecond)})
	s.want(Failed)
	if s.dispatched()["c"] != 0 {
		t.Fatal("c must not run after its join failed")
	}
}

func TestRetryAndLeaseLoss(t *testing.T) {
	s := newSim(t, compile(t, "a: notes.search {}; retry: 1\nb: notes.search {}\n"))
	s.fail("a", "flaky")
	if s.run.Steps["a"].Status != StatusQueued || s.queued["a"].Attempt != 2 {
		t.Fatalf("retry: %+v", s.run.Steps["a"])
	}
	s.succeed("a", 1)
	d := s.queued["b"]
	s.apply(StepLeased{Step: "b", Attempt: d.Attempt, Executor: "x1", At: s.tick(time.Second)})
	s.apply(LeaseLost{Step: "b", Attempt: d.Attempt, At: s.tick(time.Second)})
	if s.queued["b"].Attempt != 2 {
		t.Fatal("a read-only step is re-leased after a lost lease")
	}
	if _, err := s.m.Apply(s.run, StepSucceeded{Step: "b", Attempt: 1, Output: []byte("1"), At: s.now}); !errors.Is(err, ErrStaleAttempt) {
		t.Fatalf("a result from the lost attempt is refused: %v", err)
	}
	s.succeed("b", 2)
	s.want(Complete)
}

func TestStartedSideEffectIsNeverRetriedBlindly(t *testing.T) {
	for _, c := range []struct {
		option     string
		dispatched int
		want       State
	}{{DoubtRan, 1, Complete}, {DoubtStop, 1, Failed}, {DoubtRetry, 2, Complete}} {
		s := newSim(t, compile(t, "w: notes.store {} without asking\nr: summarise {w}\n"))
		d := s.queued["w"]
		if d.Grant != GrantStart {
			t.Fatalf("without asking: the start is the approval: %+v", d)
		}
		s.apply(StepLeased{Step: "w", Attempt: 1, Executor: "x1", At: s.tick(time.Second)})
		s.apply(StepStarted{Step: "w", Attempt: 1, At: s.tick(time.Second)})
		s.apply(LeaseLost{Step: "w", Attempt: 1, At: s.tick(time.Second)})
		if s.dispatched()["w"] != 1 || s.run.Steps["w"].Status != StatusInDoubt {
			t.Fatal("I7: a started side effect with an unknown outcome is not dispatched again")
		}
		s.want(Parked)
		a := s.run.Asks["doubt_w_1"]
		if a == nil || a.Type != InDoubt || a.Step != "w" || len(a.Options) != 3 {
			t.Fatalf("an in-doubt ask opens: %+v", a)
		}
		if _, err := s.m.Apply(s.run, Decide{Ask: a.ID, Actor: "bob", Option: c.option, At: s.now}); !errors.Is(err, ErrForbidden) {
			t.Fatalf("only the requester answers: %v", err)
		}
		s.apply(Decide{Ask: a.ID, Actor: "alice", Option: c.option, At: s.tick(time.Second)})
		if c.option == DoubtRetry {
			if s.queued["w"].Attempt != 2 || s.queued["w"].Grant != a.ID {
				t.Fatalf("a retry runs under the person's decision: %+v", s.queued["w"])
			}
			s.succeed("w", "ok")
		}
		if c.want != Failed {
			s.succeed("r", "ok")
		}
		if got := s.dispatched()["w"]; got != c.dispatched {
			t.Fatalf("%s: w dispatched %d times", c.option, got)
		}
		s.want(c.want)
	}
}

func TestBlocked(t *testing.T) {
	s := newSim(t, compile(t, "a: notes.search {}\n"))
	s.apply(StepBlocked{Step: "a", Attempt: 1, At: s.tick(time.Second)})
	s.want(Blocked)
	s.succeed("a", 1)
	s.want(Complete)
}

func TestAnswerScript(t *testing.T) {
	s := newSim(t, skill(t, "uml-diagram"))
	s.succeed("source", "readme")
	var kinds []answer.Kind
	for _, text := range []string{"pick the right one", "did it run?", "help", "what now", "cancel"} {
		tr := s.apply(Answer{Ask: "kind", Actor: "alice", Text: text, At: s.tick(time.Second)})
		if tr.Reply == nil || tr.Reply.Message == "" {
			t.Fatalf("%q: no reply", text)
		}
		kinds = append(kinds, tr.Reply.Kind)
	}
	want := []answer.Kind{answer.NoMatch, answer.NoMatch, answer.EscapeHint, answer.EscapeHint, answer.Dropped}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("kinds %v, want %v", kinds, want)
		}
	}
	s.want(Cancelled)
	if s.run.Asks["kind"].State != AskCancelled {
		t.Fatal("dropping closes the ask")
	}
}

func TestMissCounterPersistsAndResets(t *testing.T) {
	s := newSim(t, skill(t, "uml-diagram"))
	s.succeed("source", "readme")
	s.apply(Answer{Ask: "kind", Actor: "alice", Text: "hmm", At: s.tick(time.Second)})
	s.apply(Answer{Ask: "kind", Actor: "alice", Text: "/menu", At: s.tick(time.Second)})
	if s.run.Asks["kind"].Misses != 1 {
		t.Fatalf("the count is stored on the ask: %d", s.run.Asks["kind"].Misses)
	}
	s.apply(Answer{Ask: "kind", Actor: "alice", Text: "state", At: s.tick(time.Second)})
	if a := s.run.Asks["kind"]; a.State != AskAnswered || a.Label != "state" || a.Misses != 0 {
		t.Fatalf("%+v", a)
	}
}

func TestNewRefusesUnverifiedPlans(t *testing.T) {
	bad := &plan.Plan{InitialSteps: []plan.Step{{ID: "pay", Kind: plan.KindTool, Server: "p", Tool: "pay", SideEffect: true}}}
	if _, err := New(bad, Config{}); err == nil {
		t.Fatal("a plan with an ungated side effect must be refused")
	}
}

// Review finding: a retry queued in the same transition that makes the run
// fail must not go out.
func TestNothingDispatchesWhileTheRunFails(t *testing.T) {
	s := newSim(t, compile(t, "together f:\n  a: notes.search {}; on fail: stop\n  b: notes.store {} without asking; retry: 2\n"))
	s.apply(StepLeased{Step: "a", Attempt: 1, Executor: "x", At: s.tick(time.Millisecond)})
	s.apply(StepLeased{Step: "b", Attempt: 1, Executor: "x", At: s.tick(time.Millisecond)})
	s.apply(StepStarted{Step: "b", Attempt: 1, At: s.tick(time.Millisecond)})
	s.apply(StepFailed{Step: "a", Attempt: 1, Error: "boom", At: s.tick(time.Millisecond)})
	tr := s.apply(StepFailed{Step: "b", Attempt: 1, Error: "nope", At: s.tick(time.Millisecond)})
	for _, e := range tr.Effects {
		if d, ok := e.(Dispatch); ok {
			t.Fatalf("dispatched %s#%d while the run was failing", d.Step, d.Attempt)
		}
	}
	s.want(Failed)
}

// A gate's No option may carry its own steps; choosing No approves exactly
// them, and the journal says so.
func TestNoBranchSideEffectIsJournaledAsConsumed(t *testing.T) {
	s := newSim(t, compile(t, "ask me:\n  deploy?\n  if no:\n    tell: notes.store {\"text\":\"declined\"}\nd: payments.pay {\"vendor\":\"V\",\"invoice\":\"I\",\"amount\":1,\"currency\":\"INR\",\"bank_account\":\"X\"}\n"))
	s.apply(Decide{Ask: "ask_1", Actor: "alice", Reject: true, Reason: "not now", At: s.tick(time.Second)})
	if d := s.queued["tell"]; d.Grant != "ask_1" || s.dispatched()["d"] != 0 {
		t.Fatalf("No runs tell under ask_1 and never d: %+v", s.dispatched())
	}
	consumed := false
	for _, r := range s.records {
		if r.Kind == JournalApprovalConsumed && r.Payload["step"] == "tell" {
			consumed = true
		}
	}
	if !consumed {
		t.Fatal("the No decision's use is journaled as a consumption")
	}
}

// I7: a side effect's result counts only after its Start was recorded.
func TestSideEffectResultNeedsStart(t *testing.T) {
	s := newSim(t, compile(t, "w: notes.store {} without asking\n"))
	s.apply(StepLeased{Step: "w", Attempt: 1, Executor: "x", At: s.tick(time.Millisecond)})
	if _, err := s.m.Apply(s.run, StepSucceeded{Step: "w", Attempt: 1, Output: []byte("1"), At: s.now}); !errors.Is(err, ErrWrongTransition) {
		t.Fatalf("a result without a start: %v", err)
	}
	// Lost before Start: nothing can have run, so it is simply leased again.
	s.apply(LeaseLost{Step: "w", Attempt: 1, At: s.tick(time.Millisecond)})
	if s.queued["w"].Attempt != 2 {
		t.Fatal("re-leased")
	}
}

func TestOnlyTheRequesterDropsARun(t *testing.T) {
	s := newSim(t, skill(t, "vendor-payment"))
	s.succeed("vendor", map[string]any{"bank_account": "1"})
	s.succeed("invoice", 1)
	s.succeed("po", 1)
	s.succeed("match", 1)
	if _, err := s.m.Apply(s.run, Answer{Ask: "ask_1", Actor: "carol", Text: "cancel", At: s.now}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("carol dropping alice's run: %v", err)
	}
}
