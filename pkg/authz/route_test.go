package authz

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func actors(ds []Decision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Actor
		if d.Via != "" {
			out[i] += "(" + d.Via + ")"
		}
	}
	return out
}

func TestRoute(t *testing.T) {
	ex := newAuthz(t, "policy.csv", newClock(t0))   // payments.pay: quorum 1, finance ≤ 500000, controller ≤ 5000000
	rules := newAuthz(t, "rules.csv", newClock(t0)) // payments.pay: quorum 2
	vendor := Matter{Domain: "acme", Action: "payments.pay", Amount: amount(485000), Currency: "INR", Requester: "bob", AgentOwner: "bob"}
	with := func(m Matter, f func(*Matter)) Matter { f(&m); return m }
	notes := Matter{Domain: "acme", Action: "notes.store", Requester: "bob", AgentOwner: "bob"}
	for _, c := range []struct {
		name       string
		a          *Authorizer
		m          Matter
		ask        RecipeAsk
		quorum     int
		eligible   []string
		escalate   bool
		escalateTo []string
		reason     string
	}{
		{name: "vendor-payment: ask finance", a: ex, m: vendor, ask: RecipeAsk{Audience: "finance"}, quorum: 1,
			eligible: []string{"alice", "dave(alice)"}, escalateTo: []string{"alice", "carol", "dave(alice)"}},
		{name: "ask me for a payment: separation of duties escalates", a: ex, m: vendor, ask: RecipeAsk{Audience: AudienceMe}, quorum: 1,
			escalate: true, escalateTo: []string{"alice", "carol", "dave(alice)"}, reason: "0 of the people the recipe asks may decide payments.pay in acme; quorum is 1 (separation of duties: bob is the requester); policy allows alice, carol, dave"},
		{name: "ask me for a note", a: ex, m: notes, ask: RecipeAsk{Audience: AudienceMe}, quorum: 1, eligible: []string{"bob"},
			escalateTo: []string{"alice", "bob", "carol", "dave"}},
		{name: "the recipe's quorum over the policy's", a: ex, m: vendor, ask: RecipeAsk{Approvers: []string{"finance", "controller"}, Quorum: 2}, quorum: 2,
			eligible: []string{"alice", "carol", "dave(alice)"}},
		{name: "a person and their delegate are one authority", a: ex, m: vendor, ask: RecipeAsk{Approvers: []string{"finance"}, Quorum: 2}, quorum: 2,
			eligible: []string{"alice", "dave(alice)"}, escalate: true, escalateTo: []string{"alice", "carol", "dave(alice)"}, reason: "1 of the people the recipe asks"},
		{name: "the policy's quorum over the recipe's", a: rules, m: pay(1), ask: RecipeAsk{Audience: "finance", Quorum: 1}, quorum: 2,
			eligible: []string{"alice", "erin", "frank(erin)", "kim(alice)", "lee(alice)", "sam"}},
		{name: "the limit narrows the set", a: ex, m: with(vendor, func(m *Matter) { m.Amount = amount(600000) }), ask: RecipeAsk{Audience: "finance"}, quorum: 1,
			escalate: true, escalateTo: []string{"carol"}},
		{name: "named people: only those the policy allows", a: ex, m: vendor, ask: RecipeAsk{Approvers: []string{"alice", "bob", "zed"}}, quorum: 1,
			eligible: []string{"alice", "dave(alice)"}},
		{name: "the requester's delegate is not eligible", a: ex, m: with(vendor, func(m *Matter) { m.Requester = "alice" }), ask: RecipeAsk{Audience: "finance"}, quorum: 1,
			escalate: true, escalateTo: []string{"carol"}},
		{name: "the agent owner is not eligible", a: ex, m: with(vendor, func(m *Matter) { m.AgentOwner = "carol" }), ask: RecipeAsk{}, quorum: 1,
			eligible: []string{"alice", "dave(alice)"}},
		{name: "a role the policy lacks", a: ex, m: vendor, ask: RecipeAsk{Audience: "treasury"}, quorum: 1, escalate: true},
		{name: "an action the policy lacks", a: ex, m: with(notes, func(m *Matter) { m.Action = "notes.delete" }), ask: RecipeAsk{Audience: AudienceMe}, quorum: 1,
			escalate: true, reason: "no policy for notes.delete in acme"},
		{name: "nobody at all", a: rules, m: with(pay(1), func(m *Matter) { m.Domain = "globex"; m.Requester = "alice" }), ask: RecipeAsk{}, quorum: 1,
			escalate: true, reason: "policy alone allows 0: escalate beyond the policy's roles"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := c.a.Route(t.Context(), c.m, c.ask)
			if err != nil {
				t.Fatal(err)
			}
			if r.Quorum != c.quorum || r.Escalate != c.escalate {
				t.Errorf("quorum=%d escalate=%v, want %d %v (%s)", r.Quorum, r.Escalate, c.quorum, c.escalate, r.Reason)
			}
			if got := actors(r.Eligible); !slices.Equal(got, c.eligible) {
				t.Errorf("eligible = %v, want %v", got, c.eligible)
			}
			if got := actors(r.EscalateTo); c.escalateTo != nil && !slices.Equal(got, c.escalateTo) {
				t.Errorf("escalate to = %v, want %v", got, c.escalateTo)
			}
			if !strings.Contains(r.Reason, c.reason) || r.Escalate != (r.Reason != "") {
				t.Errorf("reason = %q, want it to contain %q", r.Reason, c.reason)
			}
			if r.PolicyVersion != c.a.Version() {
				t.Errorf("policy version %q", r.PolicyVersion)
			}
			for _, d := range r.Eligible {
				// Each eligible person is allowed by Authorize too, with the same why.
				got, err := c.a.Authorize(t.Context(), Request{Actor: d.Actor, Matter: c.m, Ask: c.ask})
				if err != nil || !got.Allowed || got.Reason != d.Reason || d.Reason == "" {
					t.Errorf("%s is eligible (%q) but Authorize says %+v, %v", d.Actor, d.Reason, got, err)
				}
			}
		})
	}
}

func TestRouteErrorsEscalate(t *testing.T) {
	a := newAuthz(t, "rules.csv", newClock(t0))
	m := pay(1)
	m.Requester = ""
	r, err := a.Route(t.Context(), m, RecipeAsk{Audience: "finance"})
	if !errors.Is(err, ErrInvalidRequest) || !r.Escalate || len(r.Eligible) != 0 {
		t.Fatalf("route = %+v, %v", r, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r, err = a.Route(ctx, pay(1), RecipeAsk{Audience: "finance"})
	if !errors.Is(err, context.Canceled) || !r.Escalate || len(r.Eligible) != 0 {
		t.Fatalf("cancelled: route = %+v, %v", r, err)
	}
	if r, err := a.Route(t.Context(), pay(1), RecipeAsk{Quorum: -2}); !errors.Is(err, ErrInvalidRequest) || !r.Escalate {
		t.Fatalf("negative quorum: route = %+v, %v", r, err)
	}
}

// Authorize says the quorum its decision counts toward: the policy's,
// raised (never lowered) by the recipe's, as Route does (I9: policy
// wins). A caller that counts approvals toward the recipe's number alone
// would let one person decide a two-person action.
func TestAuthorizeSaysThePolicyQuorum(t *testing.T) {
	a := newAuthz(t, "rules.csv", newClock(t0)) // payments.pay: quorum 2
	m := Matter{Domain: "acme", Action: "payments.pay", Amount: amount(400000), Currency: "INR", Requester: "bob", AgentOwner: "bob"}
	for _, c := range []struct {
		recipe, want int
	}{{0, 2}, {1, 2}, {3, 3}} {
		d, err := a.Authorize(context.Background(), Request{Actor: "alice", Matter: m, Ask: RecipeAsk{Quorum: c.recipe}})
		if err != nil || !d.Allowed {
			t.Fatalf("alice: %v %+v", err, d)
		}
		r, _ := a.Route(context.Background(), m, RecipeAsk{Quorum: c.recipe})
		if d.Quorum != c.want || r.Quorum != c.want {
			t.Fatalf("recipe quorum %d: Authorize says %d, Route %d; want %d", c.recipe, d.Quorum, r.Quorum, c.want)
		}
	}
}
