package controlplane

import (
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/client/gates"
	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/authz"
)

// quorumPolicy is the example policy edited by edit, at a path the test
// may rewrite (then Reload) to change policy under an open ask.
func quorumPolicy(t *testing.T, edit func(string) string) (*authz.Authorizer, string) {
	t.Helper()
	b, err := os.ReadFile("../../examples/policy.csv")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "policy.csv")
	if err := os.WriteFile(p, []byte(edit(string(b))), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := authz.New(authz.Config{PolicyPath: p})
	if err != nil {
		t.Fatal(err)
	}
	return a, p
}

func storeQuorum(n string) func(string) string {
	return func(s string) string {
		return strings.Replace(s, "p2, acme, notes.store, 1, none, -", "p2, acme, notes.store, "+n+", none, -", 1)
	}
}

const storeRecipe = `a: notes.search {"q": "x"}
ask member:
  store it?
b: notes.store {"text": "{a}"}
`

// startStore starts storeRecipe as alice and returns the run and its ask.
func startStore(t *testing.T, e *env) (string, string) {
	t.Helper()
	resp, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: storeRecipe}})
	if err != nil {
		t.Fatal(err)
	}
	e.settle()
	id := resp.GetRun().GetId()
	return id, id + "/ask_1"
}

// Policy says notes.store needs 2 distinct approvers; the recipe says
// nothing. The ask needs two people, says so, and one approval runs
// nothing.
func TestPolicyQuorumIsEnforcedForRecipes(t *testing.T) {
	az, _ := quorumPolicy(t, storeQuorum("2"))
	e := newEnvOn(t, nil, az, echoTools())
	id, askID := startStore(t, e)
	g, err := e.approvals("bob").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID})
	if err != nil {
		t.Fatal(err)
	}
	if q := g.GetAsk().GetQuorum(); q != 2 {
		t.Fatalf("the ask's quorum is %d; policy says 2", q)
	}
	if q := g.GetAsk().GetAuthorityRequired().GetQuorum(); q != 2 {
		t.Fatalf("authority_required shows quorum %d; policy says 2", q)
	}
	if _, err := e.approvals("bob").Decide(bg, approve(askID)); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if n := e.exec.calls(id + "/b"); n != 0 {
		t.Fatalf("policy quorum 2: one approval by bob ran notes.store (%d calls), run %v", n, e.get("alice", id).GetState())
	}
	if _, err := e.approvals("carol").Decide(bg, approve(askID)); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if n := e.exec.calls(id + "/b"); n != 1 {
		t.Fatalf("two approvals (bob, carol): notes.store ran %d times, run %v", n, e.get("alice", id).GetState())
	}
}

// A policy that raises the quorum after the ask opened still wins: the
// approval that would have completed the old quorum is one vote of the
// new one.
func TestPolicyQuorumRaisedAfterOpen(t *testing.T) {
	az, path := quorumPolicy(t, storeQuorum("1"))
	e := newEnvOn(t, nil, az, echoTools())
	id, askID := startStore(t, e)
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(storeQuorum("2")(string(b))), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := az.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.approvals("bob").Decide(bg, approve(askID)); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if n := e.exec.calls(id + "/b"); n != 0 {
		t.Fatalf("policy raised notes.store to quorum 2 after the ask opened; bob alone ran it (%d calls)", n)
	}
	g, err := e.approvals("carol").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID})
	if err != nil {
		t.Fatal(err)
	}
	if q := g.GetAsk().GetQuorum(); q != 2 {
		t.Fatalf("the ask's quorum is %d after the raise; want 2", q)
	}
	if _, err := e.approvals("carol").Decide(bg, approve(askID)); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if n := e.exec.calls(id + "/b"); n != 1 {
		t.Fatalf("bob and carol approved: notes.store ran %d times", n)
	}
}

// Policy says gate.claims needs 2 reviewers; the script asks quorum 0.
// One reviewer's approval yields no grant; a second distinct one does.
func TestPolicyQuorumIsEnforcedForGates(t *testing.T) {
	az, _ := quorumPolicy(t, func(s string) string {
		s = strings.Replace(s, "p2, acme, gate.claims, 1, requester, -", "p2, acme, gate.claims, 2, requester, -", 1)
		return s + "g, carol, role:reviewer, acme, _, _\n"
	})
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	e := newEnvOn(t, nil, az, nil, func(c *Config) { c.SigningKey, c.KeyID = priv, "grant" })
	alice := gates.New(e.conn("alice"))
	d, err := alice.Gate(bg, "", "claims", gates.Options{Summary: "claims?", RunName: "x", NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	askID := d.RunID + "/claims"
	g, err := e.approvals("bob").GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID})
	if err != nil {
		t.Fatal(err)
	}
	if q := g.GetAsk().GetQuorum(); q != 2 {
		t.Fatalf("the gate's quorum is %d; policy says 2", q)
	}
	if _, err := e.approvals("bob").Decide(bg, approve(askID)); err != nil {
		t.Fatal(err)
	}
	got, err := alice.Get(bg, d.RunID, "claims")
	if err != nil {
		t.Fatal(err)
	}
	if got.Outcome == gates.Approved || got.Grant != nil {
		t.Fatalf("policy quorum 2 for gate.claims: one reviewer approved it; grant=%v", got.Grant != nil)
	}
	if _, err := e.approvals("carol").Decide(bg, approve(askID)); err != nil {
		t.Fatal(err)
	}
	if got, err = alice.Get(bg, d.RunID, "claims"); err != nil {
		t.Fatal(err)
	}
	if got.Outcome != gates.Approved || got.Grant == nil {
		t.Fatalf("bob and carol approved: outcome %v, grant=%v", got.Outcome, got.Grant != nil)
	}
}

// The action a gate raises with --action brings its policy's quorum too.
func TestPolicyQuorumIsEnforcedForGateAlso(t *testing.T) {
	az, _ := quorumPolicy(t, func(s string) string {
		return storeQuorum("2")(s) + "g, carol, role:reviewer, acme, _, _\n"
	})
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	e := newEnvOn(t, nil, az, nil, func(c *Config) { c.SigningKey, c.KeyID = priv, "grant" })
	alice := gates.New(e.conn("alice"))
	d, err := alice.Gate(bg, "", "claims", gates.Options{Summary: "claims?", RunName: "x", NoWait: true, Action: "notes.store"})
	if err != nil {
		t.Fatal(err)
	}
	askID := d.RunID + "/claims"
	if _, err := e.approvals("bob").Decide(bg, approve(askID)); err != nil {
		t.Fatal(err)
	}
	got, err := alice.Get(bg, d.RunID, "claims")
	if err != nil {
		t.Fatal(err)
	}
	if got.Outcome == gates.Approved || got.Grant != nil {
		t.Fatalf("the gate raised notes.store (quorum 2): one reviewer approved it; grant=%v", got.Grant != nil)
	}
}

// Starting a run approves its `without asking` steps: one person. Where
// policy needs two, the start is refused and nothing runs.
func TestPolicyQuorumRefusesWithoutAsking(t *testing.T) {
	az, _ := quorumPolicy(t, storeQuorum("2"))
	e := newEnvOn(t, nil, az, echoTools())
	_, err := e.runs("alice").StartRun(bg, &tollgatev1.StartRunRequest{Source: &tollgatev1.StartRunRequest_Recipe{Recipe: `w: notes.store {"text":"x"} without asking` + "\n"}})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "2 distinct people") {
		t.Fatalf("policy quorum 2 for notes.store: alice alone started it unasked: %v", err)
	}
	if runs, _, _ := e.store.ListRuns(bg, store.RunQuery{}); len(runs) != 0 {
		t.Fatal("a run was created")
	}
}
