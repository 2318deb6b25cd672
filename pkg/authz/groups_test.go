package authz

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const groupsPolicy = `p, role:finance, acme, payments.pay, 500000
p, role:controller, acme, payments.pay, 5000000
p2, acme, payments.pay, 1, requester+agent_owner, INR
g, group:finance-emea, role:finance, acme, _, _
g, carol, role:controller, acme, _, _
g, erin, dave, acme, _, _
`

func TestGroupsHoldRoles(t *testing.T) {
	a, err := New(Config{PolicyPath: writeFile(t, filepath.Join(t.TempDir(), "p.csv"), groupsPolicy), Now: newClock(t0).Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	m := pay(120000) // requester bob, owner olga
	for _, tc := range []struct {
		name   string
		actor  string
		groups []string
		m      Matter
		allow  bool
		reason string
	}{
		{"in the group", "dave", []string{"staff", "finance-emea"}, m, true, "role finance in acme through the identity provider's group finance-emea; limit 500000 ≥ 120000 INR"},
		{"not in the group", "dave", []string{"staff"}, m, false, "dave holds no role in acme that may decide payments.pay (roles that may: controller, finance); nor do dave's groups at the identity provider (staff)"},
		{"no groups", "dave", nil, m, false, "dave holds no role in acme"},
		{"over the group's limit", "dave", []string{"finance-emea"}, pay(500001), false, "through the identity provider's group finance-emea: amount 500001 INR is over what group:finance-emea may approve (finance: limit 500000)"},
		{"the requester is in the group", "bob", []string{"finance-emea"}, m, false, "separation of duties: bob is the requester"},
		{"the agent's owner is in the group", "olga", []string{"finance-emea"}, m, false, "separation of duties: olga is the agent owner"},
		{"a delegate of the requester is in the group", "erin", []string{"finance-emea"}, func() Matter { x := m; x.Requester = "dave"; return x }(), false, "separation of duties: erin acts for the requester dave"},
	} {
		d, err := a.Authorize(ctx, Request{Actor: tc.actor, Groups: tc.groups, Matter: tc.m})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if d.Allowed != tc.allow || !strings.Contains(d.Reason, tc.reason) {
			t.Errorf("%s: allowed %v (%q), want %v (%q)", tc.name, d.Allowed, d.Reason, tc.allow, tc.reason)
		}
	}
	// A recipe's `ask finance` admits a holder through a group.
	if d, _ := a.Authorize(ctx, Request{Actor: "dave", Groups: []string{"finance-emea"}, Matter: m, Ask: RecipeAsk{Audience: "finance"}}); !d.Allowed {
		t.Fatalf("ask finance, dave in finance-emea: %q", d.Reason)
	}
	if !a.Holds("dave", "finance", "acme", "finance-emea") || a.Holds("dave", "finance", "acme") {
		t.Fatal("Holds through a group")
	}
	if got := a.RolesOf("dave", "acme", "finance-emea"); !slices.Equal(got, []string{"finance"}) {
		t.Fatalf("RolesOf through a group: %v", got)
	}
	// A group is no actor, and an actor's group is a bare name.
	for _, req := range []Request{{Actor: "group:finance-emea", Matter: m}, {Actor: "dave", Groups: []string{"group:finance-emea"}, Matter: m}} {
		if d, err := a.Authorize(ctx, req); !errors.Is(err, ErrInvalidRequest) || d.Allowed {
			t.Errorf("%+v: allowed %v, err %v; want ErrInvalidRequest", req, d.Allowed, err)
		}
	}
	// Routing lists people named in policy; a group is nobody in particular.
	r, err := a.Route(ctx, m, RecipeAsk{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range r.Eligible {
		if strings.HasPrefix(d.Actor, GroupPrefix) {
			t.Fatalf("route lists a group as a person: %+v", r.Eligible)
		}
	}
}

func TestPolicyRefusesGroupMembershipRows(t *testing.T) {
	for _, row := range []string{"g, dave, group:finance-emea, acme, _, _", "g, group:finance-emea, erin, acme, _, _"} {
		_, err := New(Config{PolicyPath: writeFile(t, filepath.Join(t.TempDir(), "p.csv"), groupsPolicy+row+"\n"), Now: newClock(t0).Now})
		if err == nil {
			t.Errorf("%s: accepted", row)
		}
	}
}
