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
