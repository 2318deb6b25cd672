package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/authz"
)

// The quorum re-check runs for a vote given by a typed answer too: an
// earlier vote whose authority lapsed must not complete the quorum with
// an answer "1" (it did: Answer re-checked only an in-doubt retry).
func TestAnswerRechecksEarlierVotes(t *testing.T) {
	base, err := os.ReadFile("../../examples/policy.csv")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "policy.csv")
	if err := os.WriteFile(path, base, 0o644); err != nil {
		t.Fatal(err)
	}
	az, err := authz.New(authz.Config{PolicyPath: path})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, az, echoTools())
	resp, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: `a: notes.search {"q": "x"}
ask member:
  store it?
  approvers: 2 of bob, carol, dave
b: notes.store {"text": "{a}"}
`}})
	if err != nil {
		t.Fatal(err)
	}
	e.settle()
	id := resp.GetRun().GetId()
	askID := id + "/ask_1"
	if _, err := e.approvals("bob").Decide(bg, approve(askID)); err != nil {
		t.Fatal(err)
	}
	revoked := strings.Replace(string(base), "g, bob,   role:member, acme, _, _\n", "", 1)
	if revoked == string(base) {
		t.Fatal("examples/policy.csv no longer gives bob member as this test expects")
	}
	if err := os.WriteFile(path, []byte(revoked), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := az.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.approvals("dave").Answer(bg, &tollgatev1.AnswerRequest{AskId: askID, Text: "1"}); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if n := e.exec.calls(id + "/b"); n != 0 {
		t.Fatalf("bob's lapsed vote and dave's answer completed the quorum: store ran %d times", n)
	}
}

// A vote given by a typed answer (Answer, "1") through an IdP group is a
// vote like one given by Decide: it must still count when the next vote
// comes. (The answer's event records no groups, so the re-check judged
// dave without finance-emea and withdrew his vote.)
func TestGroupVoteByAnswerSurvivesTheNextVote(t *testing.T) {
	e, p := quorumTwoEnv(t)
	p.SetGroups("dave", "finance-emea")
	resp, err := tollgatev1.NewRunServiceClient(signedIn(t, e, p, "alice")).StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Skill{Skill: "vendor-payment"}})
	if err != nil {
		t.Fatal(err)
	}
	e.settle()
	ask := resp.GetRun().GetId() + "/ask_1"
	ans, err := surface{tollgatev1.NewApprovalServiceClient(signedIn(t, e, p, "dave"))}.Answer(bg, &tollgatev1.AnswerRequest{AskId: ask, Text: "1"})
	if err != nil {
		t.Fatalf("dave answers 1, through finance-emea: %v", err)
	}
	if ans.GetKind() != tollgatev1.AnswerKind_ANSWER_KIND_SELECTED {
		t.Fatalf("dave's answer: %v", ans)
	}
	e.settle()
	if _, err := (surface{tollgatev1.NewApprovalServiceClient(signedIn(t, e, p, "frank"))}).Decide(bg, approve(ask)); err != nil {
		t.Fatalf("frank, by name: %v", err)
	}
	e.settle()
	got, err := tollgatev1.NewApprovalServiceClient(signedIn(t, e, p, "audrey")).GetAsk(bg, &tollgatev1.GetAskRequest{AskId: ask})
	if err != nil {
		t.Fatal(err)
	}
	if st := got.GetAsk().GetState(); st != tollgatev1.AskState_ASK_STATE_APPROVED && st != tollgatev1.AskState_ASK_STATE_CONSUMED {
		t.Fatalf("dave's answer (through his group) and frank's approval: the ask is %v (dave's vote withdrawn when frank's came?)", st)
	}
}
