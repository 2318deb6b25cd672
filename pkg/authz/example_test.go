package authz_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/authz"
)

// The vendor-payment skill asks finance to approve paying 485000 INR
// (minor units) that bob requested through his own agent.
func Example() {
	ctx := context.Background()
	now := time.Date(2026, 9, 5, 12, 0, 0, 0, time.UTC)
	a, err := authz.New(authz.Config{PolicyPath: "testdata/policy.csv", Now: func() time.Time { return now }})
	if err != nil {
		fmt.Println(err)
		return
	}
	// The control plane runs a.Watch(ctx) in a goroutine it owns.
	amount := int64(485000)
	pay := authz.Matter{Domain: "acme", Action: "payments.pay", Amount: &amount, Currency: "INR", Requester: "bob", AgentOwner: "bob"}

	// Routing, when the ask is opened: whom to show it to.
	r, _ := a.Route(ctx, pay, authz.RecipeAsk{Audience: "finance"})
	for _, d := range r.Eligible {
		fmt.Printf("eligible: %s: %s\n", d.Actor, d.Reason)
	}
	// An `ask me` for the same payment cannot be answered by bob.
	me, _ := a.Route(ctx, pay, authz.RecipeAsk{Audience: authz.AudienceMe})
	fmt.Println("ask me escalates:", me.Escalate)

	// Authority again, at decision time.
	for _, actor := range []string{"alice", "bob"} {
		d, err := a.Authorize(ctx, authz.Request{Actor: actor, Matter: pay, Ask: authz.RecipeAsk{Audience: "finance"}})
		fmt.Println(actor, d.Allowed, d.Reason, err)
	}
	// Output:
	// eligible: alice: role finance in acme; limit 500000 ≥ 485000 INR; not the requester or the agent owner, nor acting for them
	// eligible: dave: role finance in acme by delegation from alice (dave → alice → role:finance); limit 500000 ≥ 485000 INR; not the requester or the agent owner, nor acting for them
	// ask me escalates: true
	// alice true role finance in acme; limit 500000 ≥ 485000 INR; not the requester or the agent owner, nor acting for them <nil>
	// bob false separation of duties: bob is the requester <nil>
}
