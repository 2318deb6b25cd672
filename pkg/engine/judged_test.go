package engine

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// I6, I9: a decision judged on one state of the ask is refused by the
// engine on another, whatever committed in between; the ask is left as
// it was.
func TestDecisionIsJudgedOnTheStateItCommits(t *testing.T) {
	s := vendorPayment(t)
	s.apply(Amend{Ask: "ask_1", Actor: "dave", Field: "amount", Value: 90000, At: s.tick(time.Second)})
	seen := s.run.Asks["ask_1"]
	judged := JudgedOn(seen, seen.PayloadDigest(), seen.EvidenceDigest(), true)
	other := JudgedOn(seen, "", "", false) // a decision that approves nothing
	if err := seen.StillAsJudged(judged); err != nil {
		t.Fatalf("the ask as judged: %v", err)
	}
	s.apply(Amend{Ask: "ask_1", Actor: "dave", Field: "amount", Value: 485000, At: s.tick(time.Second)})
	for name, ev := range map[string]Event{
		"approve":  Decide{Ask: "ask_1", Actor: "bob", Option: "1", Judged: judged, At: s.tick(time.Second)},
		"answer 1": Answer{Ask: "ask_1", Actor: "bob", Text: "1", Judged: judged, At: s.tick(time.Second)},
		// Not only approvals: an amendment or a hand-over judged on the
		// old ask is of another ask too.
		"amend":    Amend{Ask: "ask_1", Actor: "bob", Field: "amount", Value: 1, Judged: other, At: s.tick(time.Second)},
		"delegate": Delegate{Ask: "ask_1", Actor: "bob", To: "carol", Judged: other, At: s.tick(time.Second)},
	} {
		_, err := s.m.Apply(s.run, ev)
		if !errors.Is(err, ErrStaleAsk) || !strings.Contains(err.Error(), s.run.Asks["ask_1"].PayloadDigest()) {
			t.Errorf("%s judged at 90000, applied at 485000: %v, want ErrStaleAsk naming the digest now", name, err)
		}
	}
	// Judged on the ask as it is, it applies.
	now := s.run.Asks["ask_1"]
	s.apply(Decide{Ask: "ask_1", Actor: "dave", Option: "1", Judged: JudgedOn(now, now.PayloadDigest(), now.EvidenceDigest(), true), At: s.tick(time.Second)})
	if st := s.run.Asks["ask_1"].State; st == AskPending {
		t.Fatalf("an approval judged on the ask as it is did not apply: %s", st)
	}
}

// An approval pinned to the ask but quoting no payload digest approves
// whatever the ask binds: refused.
func TestApproveWithoutPayloadDigestIsRefused(t *testing.T) {
	s := vendorPayment(t)
	a := s.run.Asks["ask_1"]
	_, err := s.m.Apply(s.run, Decide{Ask: "ask_1", Actor: "dave", Option: "1", Judged: JudgedOn(a, "", a.EvidenceDigest(), true), At: s.tick(time.Second)})
	if !errors.Is(err, ErrUnreviewed) {
		t.Fatalf("approve quoting no payload digest: %v, want ErrUnreviewed", err)
	}
	// A rejection lets nothing run.
	s.apply(Decide{Ask: "ask_1", Actor: "dave", Reject: true, Reason: "no", Judged: JudgedOn(a, "", "", false), At: s.tick(time.Second)})
}

// Another approver's vote is not a change of the ask an approver is
// judged on: concurrent votes toward a quorum both count.
func TestConcurrentVotesAreJudgedOnTheSameAsk(t *testing.T) {
	s := newSim(t, compile(t, `a: notes.search {"q": "x"}
ask finance:
  pay?
  approvers: 2 of bob, carol
b: payments.pay {"vendor": "V", "invoice": "I", "amount": 10, "currency": "INR", "bank_account": "{a}"}
`))
	s.succeed("a", "x")
	ask := ""
	for id := range s.run.Asks {
		ask = id
	}
	a := s.run.Asks[ask]
	j := JudgedOn(a, a.PayloadDigest(), a.EvidenceDigest(), true)
	s.apply(Decide{Ask: ask, Actor: "bob", Option: "1", Judged: j, At: s.tick(time.Second)})
	s.apply(Decide{Ask: ask, Actor: "carol", Option: "1", Judged: j, At: s.tick(time.Second)})
	if st := s.run.Asks[ask].State; st == AskPending {
		t.Fatalf("two votes judged on the same ask did not reach the quorum: %s", s.run.Asks[ask].State)
	}
}

// An approval quoting an evidence digest is told what is wrong with it: no
// digest (send the one shown), a digest the ask never showed (it does not
// match), or one it showed before evidence was attached (a change since).
func TestEvidenceDigestMismatchSaysWhich(t *testing.T) {
	first := Evidence{Ref: "match", Digest: "sha256:aa"}
	before := (&AskRun{Evidence: []Evidence{first}}).EvidenceDigest()
	a := &AskRun{Title: "pay?", State: AskPending, Evidence: []Evidence{first, {Name: "po.pdf", Digest: "sha256:bb", AttachedBy: "alice"}}}
	for _, tc := range []struct {
		quote string
		want  error
		says  string
	}{
		{"", ErrUnreviewed, "send the evidence digest you were shown"},
		{"sha256:0000", ErrDigestMismatch, "does not match the ask's, " + a.EvidenceDigest()},
		{before, ErrStaleAsk, "evidence was attached since"},
	} {
		err := a.StillAsJudged(Judged{Evidence: tc.quote, Approves: true})
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("approve quoting evidence %q: %v, want %v saying %q", tc.quote, err, tc.want, tc.says)
		}
	}
	if err := a.StillAsJudged(Judged{Evidence: a.EvidenceDigest(), Approves: true}); err != nil {
		t.Errorf("approve quoting the evidence shown: %v", err)
	}
}

// A decision through a single-use link is stamped with its surface and
// link, on the ask and in the journal; a second decision through the same
// link is refused, whoever makes it and whatever it decides, also while
// the ask stays open (an amendment, a first vote of two).
func TestSingleUseLinkDecidesOnce(t *testing.T) {
	s := newSim(t, compile(t, `a: notes.search {"q": "x"}
ask finance:
  pay?
  approvers: 2 of bob, carol
b: payments.pay {"vendor": "V", "invoice": "I", "amount": 10, "currency": "INR", "bank_account": "{a}"}
`))
	s.succeed("a", "x")
	ask := ""
	for id := range s.run.Asks {
		ask = id
	}
	a := s.run.Asks[ask]
	j := JudgedOn(a, a.PayloadDigest(), a.EvidenceDigest(), true)
	j.Via, j.Link = "web", "lnk_bob"
	tr := s.apply(Decide{Ask: ask, Actor: "bob", Option: "1", Judged: j, At: s.tick(time.Second)})
	d := s.run.Asks[ask].Decisions
	if len(d) != 1 || d[0].Via != "web" || d[0].Link != "lnk_bob" {
		t.Fatalf("decisions after a vote through a link: %+v, want one stamped web/lnk_bob", d)
	}
	stamped := false
	for _, r := range tr.Records {
		if r.Actor == "bob" && r.Payload["via"] == "web" && r.Payload["link"] == "lnk_bob" {
			stamped = true
		}
	}
	if !stamped {
		t.Errorf("no journal record of bob's vote names its surface and link: %+v", tr.Records)
	}
	if u, ok := s.run.Asks[ask].LinkUse("lnk_bob"); !ok || u.Actor != "bob" {
		t.Errorf("LinkUse(lnk_bob) = %+v, %v", u, ok)
	}
	for name, ev := range map[string]Event{
		"the same vote again": Decide{Ask: ask, Actor: "bob", Option: "1", Judged: j, At: s.tick(time.Second)},
		"another's vote":      Decide{Ask: ask, Actor: "carol", Option: "1", Judged: j, At: s.tick(time.Second)},
		"a rejection":         Decide{Ask: ask, Actor: "bob", Reject: true, Reason: "no", Judged: Judged{Via: "web", Link: "lnk_bob"}, At: s.tick(time.Second)},
		"an answer in words":  Answer{Ask: ask, Actor: "carol", Text: "1", Judged: j, At: s.tick(time.Second)},
		"a request for proof": RequestEvidence{Ask: ask, Actor: "carol", What: "invoice", Judged: Judged{Link: "lnk_bob"}, At: s.tick(time.Second)},
		"a hand-over":         Delegate{Ask: ask, Actor: "bob", To: "dave", Judged: Judged{Link: "lnk_bob"}, At: s.tick(time.Second)},
	} {
		if _, err := s.m.Apply(s.run, ev); !errors.Is(err, ErrLinkUsed) || !strings.Contains(err.Error(), "bob") {
			t.Errorf("%s through a used link: %v, want ErrLinkUsed naming who used it", name, err)
		}
	}
	// Another link, or none, still decides.
	j2 := JudgedOn(s.run.Asks[ask], a.PayloadDigest(), a.EvidenceDigest(), true)
	j2.Via, j2.Link = "web", "lnk_carol"
	s.apply(Decide{Ask: ask, Actor: "carol", Option: "1", Judged: j2, At: s.tick(time.Second)})
	if st := s.run.Asks[ask].State; st == AskPending {
		t.Fatalf("carol's vote through her own link did not complete the quorum: %s", st)
	}
}

// A link decides once over every round of its ask: after the ask goes
// stale and is asked again under the same id (its earlier round kept as
// ask~1), a decision through a link used on the earlier round is refused;
// another link decides the new round.
func TestSingleUseLinkDecidesOnceOverRounds(t *testing.T) {
	s := newSim(t, compile(t, `a: notes.search {"q": "x"}
ask finance:
  pay?
b: payments.pay {"vendor": "V", "invoice": "I", "amount": 10, "currency": "INR", "bank_account": "{a}"}
`))
	s.succeed("a", "x")
	ask := ""
	for id := range s.run.Asks {
		ask = id
	}
	a := s.run.Asks[ask]
	j := JudgedOn(a, a.PayloadDigest(), a.EvidenceDigest(), false)
	j.Via, j.Link = "web", "lnk_bob"
	s.apply(RequestEvidence{Ask: ask, Actor: "bob", What: "the invoice", Judged: j, At: s.tick(time.Second)})
	// Stale and asked again, as advance's open does it.
	old := *s.run.Asks[ask]
	old.ID, old.State = ask+"~1", AskStale
	s.run.Asks[old.ID] = &old
	fresh := *s.run.Asks[ask]
	fresh.State, fresh.Decisions, fresh.Votes, fresh.Round = AskPending, nil, nil, 1
	s.run.Asks[ask] = &fresh
	if u, ok := s.run.LinkUse(ask, "lnk_bob"); !ok || u.Actor != "bob" {
		t.Fatalf("Run.LinkUse over rounds = %+v, %v", u, ok)
	}
	jr := JudgedOn(&fresh, fresh.PayloadDigest(), fresh.EvidenceDigest(), true)
	jr.Via, jr.Link = "web", "lnk_bob"
	if _, err := s.m.Apply(s.run, Decide{Ask: ask, Actor: "bob", Option: "1", Judged: jr, At: s.tick(time.Second)}); !errors.Is(err, ErrLinkUsed) {
		t.Fatalf("the used link on the ask asked again: %v, want ErrLinkUsed", err)
	}
	jr.Link = "lnk_bob_2"
	s.apply(Decide{Ask: ask, Actor: "bob", Option: "1", Judged: jr, At: s.tick(time.Second)})
	if st := s.run.Asks[ask].State; st == AskPending {
		t.Fatalf("a new link did not decide the new round: %s", st)
	}
}
