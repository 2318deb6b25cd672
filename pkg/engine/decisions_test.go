package engine

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// vendorPayment parks at the finance gate with pay's args fixed.
func vendorPayment(t *testing.T) *sim {
	t.Helper()
	s := newSim(t, skill(t, "vendor-payment"))
	s.succeed("vendor", map[string]any{"bank_account": "DE00 2048"})
	s.succeed("invoice", 1)
	s.succeed("po", 1)
	s.succeed("match", "ok")
	s.want(Parked)
	// The facts the approver decides on, read as the ask opened.
	s.succeed(CheckStepID("ask_1"), map[string]any{"bank_account": "DE00 2048", "status": "active"})
	s.want(Parked)
	return s
}

// The gate of a two-of-three recipe.
const quorumRecipe = `a: notes.search {"q": "x"}
ask finance:
  store it?
  approvers: 2 of bob, carol, dave
b: notes.store {"text": "{a}"}
`

func TestQuorumNeedsDistinctPeople(t *testing.T) {
	s := newSim(t, compile(t, quorumRecipe))
	s.succeed("a", "x")
	s.want(Parked)
	ask := ""
	for id := range s.run.Asks {
		ask = id
	}
	s.apply(Decide{Ask: ask, Actor: "bob", Option: "1", Why: "named approver", At: s.tick(time.Second)})
	for range 4 {
		if _, err := s.m.Apply(s.run, Decide{Ask: ask, Actor: "bob", Option: "1", At: s.tick(time.Second)}); !errors.Is(err, ErrAlreadyVoted) {
			t.Fatalf("bob approving again: %v, want ErrAlreadyVoted", err)
		}
	}
	if a := s.run.Asks[ask]; a.State != AskPending || len(a.Votes) != 1 || s.dispatched()["b"] != 0 {
		t.Fatalf("one person five times leaves it pending: %s, %d votes, b dispatched %d", a.State, len(a.Votes), s.dispatched()["b"])
	}
	if _, err := s.m.Apply(s.run, Decide{Ask: ask, Actor: "erin", Option: "1", At: s.tick(time.Second)}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("someone the recipe does not name: %v", err)
	}
	// bob withdraws; carol alone is then one vote, dave completes it.
	s.apply(Revoke{Ask: ask, Actor: "bob", Reason: "changed my mind", At: s.tick(time.Second)})
	if _, err := s.m.Apply(s.run, Revoke{Ask: ask, Actor: "bob", At: s.tick(time.Second)}); !errors.Is(err, ErrNoVote) {
		t.Fatalf("revoking twice: %v", err)
	}
	s.apply(Decide{Ask: ask, Actor: "carol", Option: "1", At: s.tick(time.Second)})
	if s.dispatched()["b"] != 0 {
		t.Fatal("a revoked vote still counted toward the quorum")
	}
	s.apply(Decide{Ask: ask, Actor: "dave", Option: "1", At: s.tick(time.Second)})
	if s.dispatched()["b"] != 1 || s.run.Asks[ask].State != AskConsumed {
		t.Fatalf("two distinct approvals: b dispatched %d, ask %s", s.dispatched()["b"], s.run.Asks[ask].State)
	}
	if _, err := s.m.Apply(s.run, Revoke{Ask: ask, Actor: "dave", At: s.tick(time.Second)}); !errors.Is(err, ErrAlreadyDecided) {
		t.Fatalf("revoking a consumed approval: %v", err)
	}
}

func TestAmendWithinBounds(t *testing.T) {
	s := vendorPayment(t)
	a := s.run.Asks["ask_1"]
	before := a.PayloadDigest()
	for _, tc := range []struct {
		ev   Amend
		want string
	}{
		{Amend{Ask: "ask_1", Actor: "dave", Field: "amount", Value: 500000}, "out of bounds 0..485000"},
		{Amend{Ask: "ask_1", Actor: "dave", Field: "amount", Value: -1}, "out of bounds"},
		{Amend{Ask: "ask_1", Actor: "dave", Field: "bank_account", Value: 1}, "may not be amended (amendable: amount 0..485000)"},
	} {
		tc.ev.At = s.tick(time.Second)
		_, err := s.m.Apply(s.run, tc.ev)
		if !errors.Is(err, ErrBadAmend) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.ev, err, tc.want)
		}
	}
	s.apply(Amend{Ask: "ask_1", Actor: "dave", Field: "amount", Value: 400000, At: s.tick(time.Second)})
	a = s.run.Asks["ask_1"]
	if a.PayloadDigest() == before || a.State != AskPending {
		t.Fatalf("the amendment changes the payload digest and leaves the ask pending: %s, %s", a.PayloadDigest(), a.State)
	}
	s.approve("ask_1", "dave")
	s.succeed(CheckStepID("ask_1"), map[string]any{"bank_account": "DE00 2048", "status": "active"})
	d := s.queued["pay"]
	if !strings.Contains(string(d.Args), `"amount":400000`) || !strings.Contains(string(d.Args), `"bank_account":"DE00 2048"`) {
		t.Fatalf("pay runs with the amended amount and nothing else changed: %s", d.Args)
	}
}

// I6: an amendment withdraws approvals given to the payload before it.
func TestAmendWithdrawsVotes(t *testing.T) {
	s := newSim(t, compile(t, `a: notes.search {"q": "x"}
ask finance:
  pay?
  approvers: 2 of bob, carol
  amend: amount between 1 and 10
b: payments.pay {"vendor": "V", "invoice": "I", "amount": 10, "currency": "INR", "bank_account": "{a}"}
`))
	s.succeed("a", "x")
	ask := ""
	for id := range s.run.Asks {
		ask = id
	}
	s.apply(Decide{Ask: ask, Actor: "bob", Option: "1", At: s.tick(time.Second)})
	s.apply(Amend{Ask: ask, Actor: "carol", Field: "amount", Value: 5, At: s.tick(time.Second)})
	if n := len(s.run.Asks[ask].Votes); n != 0 {
		t.Fatalf("bob approved amount 10; after the amendment his vote must not count (%d votes)", n)
	}
	s.apply(Decide{Ask: ask, Actor: "carol", Option: "1", At: s.tick(time.Second)})
	if s.dispatched()["b"] != 0 {
		t.Fatal("one vote on the amended payload dispatched a 2-of quorum")
	}
	s.apply(Decide{Ask: ask, Actor: "bob", Option: "1", At: s.tick(time.Second)})
	if d := s.queued["b"]; !strings.Contains(string(d.Args), `"amount":5`) {
		t.Fatalf("pay after two votes on the amended payload: %s", d.Args)
	}
}

// I6 freshness: a changed material fact retires the approval before it is
// consumed, names what changed (masked), re-prepares and asks again; the
// side effect never runs with the old facts.
func TestStaleApprovalIsNotConsumed(t *testing.T) {
	s := vendorPayment(t)
	s.approve("ask_1", "dave")
	// Between approval and consumption the vendor's bank account changes.
	s.succeed(CheckStepID("ask_1"), map[string]any{"bank_account": "DE00 7731", "status": "active"})
	if _, ok := s.queued["pay"]; ok {
		t.Fatal("pay dispatched although the bank account changed")
	}
	a := s.run.Asks["ask_1"]
	if a.State != AskStale || a.Stale != "bank_account ending 2048 → ending 7731" {
		t.Fatalf("the ask is stale and says what changed, masked: %s %q", a.State, a.Stale)
	}
	// Re-prepare: the facts are read again; the run is not parked on a dead ask.
	if st := s.run.Steps["vendor"]; st.Status != StatusQueued || st.Attempt != 2 {
		t.Fatalf("vendor runs again: %+v", st)
	}
	s.succeed("vendor", map[string]any{"bank_account": "DE00 7731"})
	s.succeed("invoice", 1)
	s.succeed("po", 1)
	s.succeed("match", "ok")
	a = s.run.Asks["ask_1"]
	if a.State != AskPending || a.Round != 1 || !strings.Contains(string(a.Payload[0].Args), "DE00 7731") {
		t.Fatalf("a new ask with the new account: %s round %d %s", a.State, a.Round, a.Payload[0].Args)
	}
	if old := s.run.Asks["ask_1~1"]; old == nil || old.State != AskStale {
		t.Fatalf("the stale ask keeps its record: %+v", old)
	}
	s.succeed(CheckStepID("ask_1"), map[string]any{"bank_account": "DE00 7731", "status": "active"})
	s.approve("ask_1", "dave")
	s.succeed(CheckStepID("ask_1"), map[string]any{"bank_account": "DE00 7731", "status": "active", "phone": "changed"})
	if d := s.queued["pay"]; !strings.Contains(string(d.Args), "DE00 7731") {
		t.Fatalf("a change in a field that does not matter asks nothing: pay %s", d.Args)
	}
	if s.dispatched()["pay"] != 1 {
		t.Fatalf("pay dispatched %d times", s.dispatched()["pay"])
	}
}

// An approval given while the opening probe still runs waits for a probe
// read after it.
func TestApprovalDuringTheOpeningProbe(t *testing.T) {
	s := newSim(t, skill(t, "vendor-payment"))
	s.succeed("vendor", map[string]any{"bank_account": "DE00 2048"})
	s.succeed("invoice", 1)
	s.succeed("po", 1)
	s.succeed("match", "ok")
	s.approve("ask_1", "dave")
	s.succeed(CheckStepID("ask_1"), map[string]any{"bank_account": "DE00 2048"}) // read before the approval
	if _, ok := s.queued["pay"]; ok {
		t.Fatal("consumed on facts read before the approval")
	}
	if st := s.run.Steps[CheckStepID("ask_1")]; st.Status != StatusQueued || st.Attempt != 2 {
		t.Fatalf("the probe runs again after the approval: %+v", st)
	}
	s.succeed(CheckStepID("ask_1"), map[string]any{"bank_account": "DE00 2048"})
	if _, ok := s.queued["pay"]; !ok {
		t.Fatal("unchanged facts: pay dispatches")
	}
}

// The deadline ladder: a reminder, an escalation, and the deadline, each
// once, each journaled; an escalation changes who decides, never decides.
func TestDeadlineLadder(t *testing.T) {
	s := newSim(t, compile(t, `a: notes.search {"q": "x"}
ask finance:
  store it?
  remind after: 1h
  escalate after: 2h to cfo
  expires: 4h
b: notes.store {"text": "{a}"}
`))
	s.succeed("a", "x")
	ask := ""
	for id := range s.run.Asks {
		ask = id
	}
	a := s.run.Asks[ask]
	if !a.DueAt().Equal(a.OpenedAt.Add(time.Hour)) {
		t.Fatalf("due first at the reminder: %v", a.DueAt())
	}
	kinds := func() map[JournalKind]int {
		out := map[JournalKind]int{}
		for _, r := range s.records {
			out[r.Kind]++
		}
		return out
	}
	tr := s.apply(Tick{At: a.OpenedAt.Add(time.Hour)})
	if k := kinds(); k[JournalAskReminded] != 1 || len(tr.Effects) == 0 {
		t.Fatalf("reminded once: %v %v", k, tr.Effects)
	}
	s.apply(Tick{At: a.OpenedAt.Add(90 * time.Minute)})
	if k := kinds(); k[JournalAskReminded] != 1 || k[JournalAskEscalated] != 0 {
		t.Fatalf("nothing more before the escalation: %v", k)
	}
	s.apply(Tick{At: a.OpenedAt.Add(2 * time.Hour)})
	a = s.run.Asks[ask]
	if a.Audience != "cfo" || a.EscalatedFrom != "finance" || a.State != AskPending || kinds()[JournalAskEscalated] != 1 {
		t.Fatalf("escalated to cfo, still pending: %+v", a)
	}
	if !a.DueAt().Equal(a.ExpiresAt) {
		t.Fatalf("then due at the deadline: %v", a.DueAt())
	}
	s.apply(Tick{At: a.OpenedAt.Add(4 * time.Hour)})
	s.want(Expired)
}

func TestOnExpiryEscalate(t *testing.T) {
	s := newSim(t, compile(t, `a: notes.search {"q": "x"}
ask finance:
  store it?
  escalate after: 8h to cfo
  expires: 1h
  on expiry: escalate
b: notes.store {"text": "{a}"}
`))
	s.succeed("a", "x")
	var a *AskRun
	for _, x := range s.run.Asks {
		a = x
	}
	opened := a.OpenedAt
	s.apply(Tick{At: opened.Add(time.Hour)})
	a = s.run.Asks[a.ID]
	if a.State != AskPending || a.Audience != "cfo" || !a.ExpiresAt.Equal(opened.Add(2*time.Hour)) {
		t.Fatalf("the deadline escalates once and runs again: %+v", a)
	}
	s.apply(Tick{At: opened.Add(2 * time.Hour)})
	s.want(Expired)
	if _, err := s.m.Apply(s.run, Escalate{Ask: a.ID, To: "ceo", At: s.tick(time.Second)}); err == nil {
		t.Fatal("escalating an expired ask")
	}
}

func TestEscalateEvent(t *testing.T) {
	s := vendorPayment(t)
	s.apply(Escalate{Ask: "ask_1", To: "controller", Reason: "nobody in finance may decide it", At: s.tick(time.Second)})
	if a := s.run.Asks["ask_1"]; a.Audience != "controller" || a.State != AskPending {
		t.Fatalf("escalated, not decided: %+v", a)
	}
	if _, err := s.m.Apply(s.run, Escalate{Ask: "ask_1", To: "controller", At: s.tick(time.Second)}); !errors.Is(err, ErrWrongTransition) {
		t.Fatalf("escalating to the same audience: %v", err)
	}
}

// Request evidence: the ask waits for the requester, the deadline keeps
// running, rounds are bounded; attached evidence changes the evidence
// digest and withdraws approvals given on the old evidence.
func TestEvidenceRounds(t *testing.T) {
	s := newSim(t, compile(t, `a: notes.search {"q": "x"}
ask finance:
  store it?
  show: {a}
  approvers: 2 of bob, carol, dave
b: notes.store {"text": "{a}"}
`))
	s.succeed("a", "found")
	ask := ""
	for id := range s.run.Asks {
		ask = id
	}
	a := s.run.Asks[ask]
	if len(a.Evidence) != 1 || a.Evidence[0].Ref != "a" || a.EvidenceDigest() == "" {
		t.Fatalf("show: is bound by digest: %+v", a.Evidence)
	}
	before := a.EvidenceDigest()
	s.apply(Decide{Ask: ask, Actor: "bob", Option: "1", At: s.tick(time.Second)})
	if _, err := s.m.Apply(s.run, RequestEvidence{Ask: ask, Actor: "carol", At: s.tick(time.Second)}); !errors.Is(err, ErrReasonRequired) {
		t.Fatalf("asking for nothing in particular: %v", err)
	}
	s.apply(RequestEvidence{Ask: ask, Actor: "carol", What: "the supplier's quote", At: s.tick(time.Second)})
	s.want(Parked)
	if _, err := s.m.Apply(s.run, Decide{Ask: ask, Actor: "dave", Option: "1", At: s.tick(time.Second)}); !errors.Is(err, ErrAlreadyDecided) {
		t.Fatalf("deciding while evidence is awaited: %v", err)
	}
	if _, err := s.m.Apply(s.run, AttachEvidence{Ask: ask, Actor: "bob", Artifacts: []Evidence{{Name: "q.pdf", Content: []byte("x")}}, At: s.tick(time.Second)}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("someone else attaching: %v", err)
	}
	s.apply(AttachEvidence{Ask: ask, Actor: "alice", Artifacts: []Evidence{{Name: "q.pdf", Content: []byte("quote")}}, At: s.tick(time.Second)})
	a = s.run.Asks[ask]
	if a.State != AskPending || a.EvidenceDigest() == before || len(a.Votes) != 0 {
		t.Fatalf("pending again, new evidence digest, old approvals withdrawn: %s %v %d", a.State, a.EvidenceDigest() == before, len(a.Votes))
	}
	for range MaxEvidenceRounds - 1 {
		s.apply(RequestEvidence{Ask: ask, Actor: "carol", What: "more", At: s.tick(time.Second)})
		s.apply(AttachEvidence{Ask: ask, Actor: "alice", Artifacts: []Evidence{{Name: "more.txt", Content: []byte("m")}}, At: s.tick(time.Second)})
	}
	if _, err := s.m.Apply(s.run, RequestEvidence{Ask: ask, Actor: "carol", What: "again", At: s.tick(time.Second)}); !errors.Is(err, ErrEvidence) {
		t.Fatalf("rounds are bounded: %v", err)
	}
}

// The deadline keeps running while evidence is awaited.
func TestEvidenceRequestedAskExpires(t *testing.T) {
	s := vendorPayment(t)
	s.apply(RequestEvidence{Ask: "ask_1", Actor: "dave", What: "the PO scan", At: s.tick(time.Second)})
	if _, err := s.m.Apply(s.run, RequestEvidence{Ask: "ask_1", Actor: "dave", What: "x", At: s.tick(time.Second)}); !errors.Is(err, ErrAlreadyDecided) {
		t.Fatalf("a second request while one is open: %v", err)
	}
	s.apply(Tick{At: s.run.Asks["ask_1"].ExpiresAt})
	s.want(Rejected) // on expiry: reject
	if st := s.run.Asks["ask_1"].State; st != AskExpired {
		t.Fatalf("the ask expired while evidence was awaited: %s", st)
	}
}

// Delegation records the chain; where the recipe names approvers, the
// delegate takes the delegator's place.
func TestDelegate(t *testing.T) {
	s := newSim(t, compile(t, quorumRecipe))
	s.succeed("a", "x")
	ask := ""
	for id := range s.run.Asks {
		ask = id
	}
	s.apply(Delegate{Ask: ask, Actor: "bob", To: "erin", Reason: "on leave", At: s.tick(time.Second)})
	a := s.run.Asks[ask]
	if len(a.Delegations) != 1 || a.Delegations[0].From != "bob" || a.Delegations[0].To != "erin" {
		t.Fatalf("the chain is recorded: %+v", a.Delegations)
	}
	if _, err := s.m.Apply(s.run, Decide{Ask: ask, Actor: "bob", Option: "1", At: s.tick(time.Second)}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("bob handed it on: %v", err)
	}
	s.apply(Decide{Ask: ask, Actor: "erin", Option: "1", At: s.tick(time.Second)})
	s.apply(Decide{Ask: ask, Actor: "carol", Option: "1", At: s.tick(time.Second)})
	if s.dispatched()["b"] != 1 {
		t.Fatal("erin's approval counts in bob's place")
	}
}
