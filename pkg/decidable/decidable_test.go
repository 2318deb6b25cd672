package decidable

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// devPolicy is the dev policy of examples/policy.csv: alice requests and
// holds finance (so separation of duties refuses her), bob may approve up
// to 100000, dave up to 1000000, carol acts for dave within a window.
func devPolicy(t testing.TB) *authz.Authorizer {
	t.Helper()
	a, err := authz.New(authz.Config{PolicyPath: "../../examples/policy.csv"})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Issue 16: the plan's gates with who may decide each under the policy
// in force, as the card and the start check see them; an amount known
// only later is judged at the least it could be, and again when the ask
// opens.
func TestIssue16_PlanAuthority(t *testing.T) {
	d := New(Config{Policy: devPolicy(t), Domain: "acme"}) // real time: carol acts for dave (her window runs to 2030)
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

// A governed action as policy reads it: the agent's owner by Owners (a
// principal not listed owns itself), the amount exact in minor units and
// its currency; an amount that is not exactly an integer is an error
// naming the step, never rounded.
func TestMatter(t *testing.T) {
	c := New(Config{Domain: "acme", Owners: map[string]string{"bot": "erin"}}) // no policy: Matter needs none
	m, err := c.Matter("bot", plan.Step{ID: "pay", Server: "payments", Tool: "pay", Args: plan.Object(`{"amount":9007199254740993,"currency":"INR"}`)})
	if err != nil || m.Domain != "acme" || m.Action != "payments.pay" || m.Requester != "bot" || m.AgentOwner != "erin" ||
		m.Amount == nil || *m.Amount != 9007199254740993 || m.Currency != "INR" {
		t.Errorf("agent's payment: %+v %v", m, err)
	}
	if m, err := c.Matter("alice", plan.Step{ID: "save", Server: "notes", Tool: "store", Args: plan.Object(`{}`)}); err != nil || m.AgentOwner != "alice" || m.Amount != nil {
		t.Errorf("a person's step without amount: %+v %v", m, err)
	}
	if _, err := c.Matter("alice", plan.Step{ID: "pay", Server: "payments", Tool: "pay", Args: plan.Object(`{"amount":"400000.5"}`)}); err == nil || !strings.HasPrefix(err.Error(), "amount of pay: ") {
		t.Errorf("fractional amount: %v, want refused naming the step", err)
	}
}

// A refusal names whom policy lets decide, but not all of them: a role
// thousands hold would make a run's failure reason (stored with the run
// and its journal) and a refusal as long as the policy.
func TestUndecidableNamesFewDeciders(t *testing.T) {
	var b strings.Builder
	b.WriteString("p, role:finance, acme, payments.pay, unlimited\np2, acme, payments.pay, 1, requester, INR\n")
	for i := range 3000 {
		fmt.Fprintf(&b, "g, person%04d, role:finance, acme, _, _\n", i)
	}
	path := filepath.Join(t.TempDir(), "policy.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	pol, err := authz.New(authz.Config{PolicyPath: path})
	if err != nil {
		t.Fatal(err)
	}
	c := New(Config{Policy: pol, Domain: "acme"})
	m, err := c.Matter("alice", plan.Step{ID: "pay", Server: "payments", Tool: "pay", Args: plan.Object(`{"amount":10,"currency":"INR"}`)})
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.Judge(context.Background(), []authz.Matter{m}, authz.RecipeAsk{Audience: plan.AudienceRequester}, "", "")
	if err != nil || j.Problem == nil {
		t.Fatalf("asking the requester, who may not: %+v %v", j, err)
	}
	text := j.Problem.Text()
	if len(text) > 1000 || !strings.Contains(text, "person0000") || !strings.Contains(text, "2990 more") {
		t.Fatalf("%d bytes: %.400s…", len(text), text)
	}
	// Over every one's limit: each is kept out for a reason, and the
	// reason says so for a few.
	m.Amount = new(int64)
	*m.Amount = 1 << 62
	if err := os.WriteFile(path, []byte(strings.Replace(b.String(), "unlimited", "5", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := pol.Reload(); err != nil {
		t.Fatal(err)
	}
	j, err = c.Judge(context.Background(), []authz.Matter{m}, authz.RecipeAsk{Audience: "finance"}, "", "")
	if err != nil || j.Problem == nil {
		t.Fatalf("over every limit: %+v %v", j, err)
	}
	if text := j.Problem.Text(); len(text) > 2000 || !strings.Contains(text, "person0000") || !strings.Contains(text, "2990 more") {
		t.Fatalf("over every limit, %d bytes: %.600s…", len(text), text)
	}
}
