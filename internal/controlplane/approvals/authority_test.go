package approvals

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Item 2 at the function: on an in-doubt ask about a payment alice
// requested (finance, separated from the requester), retrying needs the
// approvers' authority — alice may not, bob (finance up to 100,000) may,
// mallory (in no policy row) may not — while "it ran" and "stop" are the
// requester's to say as well.
func TestItem2_InDoubtAuthorityAtDecisionTime(t *testing.T) {
	d := devDesk(t)
	run := &engine.Run{ID: "r", Requester: "alice"}
	args := plan.Object(`{"vendor":"V-1","invoice":"I-1","amount":5000,"currency":"INR","bank_account":"X"}`)
	a := &engine.AskRun{ID: "doubt_pay_1", Type: engine.InDoubt, Step: "pay", Audience: "finance",
		Payload: []engine.Payload{{Step: "pay", Server: "payments", Tool: "pay", Args: args}}}
	cases := []struct {
		who  string
		kind Kind
		ok   bool
	}{
		{"alice", Retry, false}, {"bob", Retry, true}, {"mallory", Retry, false},
		{"alice", ItRan, true}, {"alice", Stop, true}, {"bob", ItRan, true}, {"mallory", ItRan, false},
		{"alice", Approve, false},
	}
	for _, c := range cases {
		v, err := d.Authorize(context.Background(), c.who, run, a, c.kind)
		if err != nil || v.OK != c.ok {
			t.Errorf("%s %s: ok=%v (%s) err=%v, want ok=%v", c.who, c.kind, v.OK, v.Why, err, c.ok)
		}
	}
}

// Item 1 at the function: a gate is judged under gate.NAME, and an action
// its requester adds must hold as well — never instead.
func TestItem1_GateActionOnlyRaisesTheBar(t *testing.T) {
	d := devDesk(t)
	run := &engine.Run{ID: "r", Requester: "alice", External: true}
	args := plan.Object(`{"artifacts":{}}`)
	gate := func(also ...string) *engine.AskRun {
		return &engine.AskRun{ID: "claims", Type: engine.Gate, Audience: "reviewer", Also: also,
			Payload: []engine.Payload{{Step: "claims", Server: "gate", Tool: "claims", Args: args}}}
	}
	for _, c := range []struct {
		who  string
		also []string
		ok   bool
	}{
		{"alice", nil, false}, {"alice", []string{"notes.store"}, false}, {"bob", nil, true}, {"bob", []string{"notes.store"}, true},
		{"bob", []string{"payments.pay"}, false}, // bob is a reviewer, but payments.pay needs an amount he can approve
	} {
		v, err := d.Authorize(context.Background(), c.who, run, gate(c.also...), Approve)
		if v.OK != c.ok {
			t.Errorf("%s on claims also %v: ok=%v (%s) %v, want %v", c.who, c.also, v.OK, v.Why, err, c.ok)
		}
	}
}

// Item 1: a policy pattern (gate.*) covers gates without rows of their
// own, and the gate is still decided under it, not under what the
// requester names.
func TestItem1_GatePolicyByPattern(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.csv")
	pol := "p, role:reviewer, acme, gate.*, -\np2, acme, gate.*, 1, requester, -\np, role:member, acme, notes.store, -\np2, acme, notes.store, 1, none, -\n" +
		"g, alice, role:reviewer, acme, _, _\ng, bob, role:reviewer, acme, _, _\ng, alice, role:member, acme, _, _\ng, bob, role:member, acme, _, _\n"
	if err := os.WriteFile(path, []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	az, err := authz.New(authz.Config{PolicyPath: path})
	if err != nil {
		t.Fatal(err)
	}
	d := New(Config{Policy: az, Domain: "acme"})
	// What the control plane's gateEvent asks for release-42 opened with
	// --action notes.store.
	also := []string{"notes.store"}
	audience, _, err := d.RouteGate(context.Background(), GateRequest{Gate: "release-42", Requester: "alice", Action: "gate.release-42", Also: also, Args: plan.Object(`{}`)})
	if err != nil || audience != "reviewer" {
		t.Fatalf("a gate under gate.*: audience %q, %v", audience, err)
	}
	run := &engine.Run{ID: "r", Requester: "alice", External: true}
	a := &engine.AskRun{ID: "release-42", Type: engine.Gate, Audience: audience, Also: also,
		Payload: []engine.Payload{{Step: "release-42", Server: "gate", Tool: "release-42", Args: plan.Object(`{}`)}}}
	if v, _ := d.Authorize(context.Background(), "alice", run, a, Approve); v.OK {
		t.Fatalf("alice approved her own gate under gate.*: %s", v.Why)
	}
	if v, err := d.Authorize(context.Background(), "bob", run, a, Approve); !v.OK {
		t.Fatalf("bob, a reviewer, under gate.*: %s %v", v.Why, err)
	}
}
