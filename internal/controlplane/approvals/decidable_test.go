package approvals

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Issue 16, hostile: a gate from code only its requester could decide is
// refused when it opens, whatever the policy's separation says — a gate
// is someone else's check on a script, so choosing an action (or a policy
// row without separation) cannot turn it into a self-approval.
func TestIssue16_GateOnlyTheRequesterCouldDecideIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.csv")
	pol := "p, role:reviewer, acme, gate.*, -\np2, acme, gate.*, 1, none, -\np, role:member, acme, notes.store, -\np2, acme, notes.store, 1, none, -\n" +
		"g, alice, role:reviewer, acme, _, _\ng, alice, role:member, acme, _, _\ng, dave, alice, acme, _, _\n"
	if err := os.WriteFile(path, []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	az, err := authz.New(authz.Config{PolicyPath: path})
	if err != nil {
		t.Fatal(err)
	}
	d := New(Config{Policy: az, Domain: "acme", PolicyFile: path})
	for _, also := range [][]string{nil, {"notes.store"}} {
		_, _, err := d.RouteGate(context.Background(), GateRequest{Gate: "g", Requester: "alice", Action: "gate.g", Also: also, Args: plan.Object(`{}`)})
		if err == nil || !strings.Contains(err.Error(), "only its requester, alice, could decide it") || !strings.Contains(err.Error(), "p2, acme, gate.g, 1, requester, -") {
			t.Errorf("also %v: %v, want refused: only the requester (or her delegate dave) could decide it", also, err)
		}
	}
}

// Issue 16: the plan's gates with who may decide each under the policy
// in force, as the card and the start check see them; an amount known
// only later is judged at the least it could be, and again when the ask
// opens.
func TestIssue16_PlanAuthority(t *testing.T) {
	d := devDesk(t) // real time: carol acts for dave (her window runs to 2030)
	p := &plan.Plan{Name: "p", InitialSteps: []plan.Step{{ID: "inv", Kind: plan.KindTool, Server: "erp", Tool: "get_invoice", Args: plan.Object(`{}`)}},
		StoppingPoints: []plan.StoppingPoint{
			{ID: "ask_1", Type: plan.StopMenu, Title: "pay?", Audience: "finance", After: []string{"inv"}, Options: []plan.Option{{ID: "1", Label: "Yes", Steps: []plan.Step{
				{ID: "pay", Kind: plan.KindTool, Server: "payments", Tool: "pay", SideEffect: true, Args: plan.Object(`{"amount":90000,"currency":"INR"}`)}}}}},
			{ID: "ask_2", Type: plan.StopMenu, Title: "pay later?", Audience: "finance", After: []string{"inv"}, Options: []plan.Option{{ID: "1", Label: "Yes", Steps: []plan.Step{
				{ID: "pay2", Kind: plan.KindTool, Server: "payments", Tool: "pay", SideEffect: true, Args: plan.Object(`{"amount":"{inv.amount}"}`)}}}}},
			{ID: "ask_3", Type: plan.StopMenu, Title: "store?", After: []string{"inv"}, Options: []plan.Option{{ID: "1", Label: "Yes", Steps: []plan.Step{
				{ID: "save", Kind: plan.KindTool, Server: "notes", Tool: "store", SideEffect: true, Args: plan.Object(`{}`)}}}}},
		}}
	gates, err := d.PlanAuthority(context.Background(), "alice", p)
	if err != nil || len(gates) != 3 {
		t.Fatalf("gates %+v %v", gates, err)
	}
	if g := gates[0]; g.Problem != nil || strings.Join(g.Deciders, ", ") != "bob (finance-100k), carol (finance-1m, for dave), dave (finance-1m)" || g.Actions[0] != "payments.pay (90000 INR)" {
		t.Errorf("ask_1: %+v", g)
	}
	if g := gates[1]; !g.Deferred || g.Problem != nil || !strings.Contains(g.Actions[0], "known when the ask opens") {
		t.Errorf("ask_2, amount known later: %+v", g)
	}
	if g := gates[2]; g.Problem != nil || strings.Join(g.Deciders, ", ") != "alice (member)" {
		t.Errorf("ask_3, ask me: %+v", g)
	}
	// Asked of the requester, a payment separation of duties keeps from
	// her: without an escalation role nobody could decide it; with one,
	// it goes there.
	p.StoppingPoints[0].Audience = plan.AudienceRequester
	gates, _ = d.PlanAuthority(context.Background(), "alice", p)
	if g := gates[0]; g.Problem == nil || !strings.Contains(g.Problem.Text(), "escalates to nobody") || !strings.Contains(g.Problem.Text(), "(bob, carol, dave)") {
		t.Errorf("ask me to pay, no escalation: %+v", g.Problem)
	}
	d = New(Config{Policy: devPolicy(t), Domain: "acme", EscalateTo: "finance"})
	gates, _ = d.PlanAuthority(context.Background(), "alice", p)
	if g := gates[0]; g.Problem != nil || g.Escalates != "finance" || len(g.Deciders) != 3 {
		t.Errorf("ask me to pay, escalating to finance: %+v", g)
	}
}
