package authz

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

func TestAuthorizeRules(t *testing.T) {
	a := newAuthz(t, "rules.csv", newClock(t0))
	with := func(m Matter, f func(*Matter)) Matter { f(&m); return m }
	big := func(v int64) Matter {
		m := pay(v)
		m.Action = "payments.big"
		return m
	}
	notes := Matter{Domain: "acme", Action: "notes.store", Requester: "bob", AgentOwner: "bob"}
	glob := func(v int64) Matter { m := pay(v); m.Domain = "globex"; return m }
	cases := []struct {
		name    string
		actor   string
		m       Matter
		ask     RecipeAsk
		allow   bool
		role    string
		via     string
		reason  string // substring
		wantErr error
	}{
		// roles and limits
		{name: "role within limit", actor: "alice", m: pay(120000), allow: true, role: "finance", reason: "role finance in acme; limit 500000 ≥ 120000 INR"},
		{name: "exactly at the limit", actor: "alice", m: pay(500000), allow: true, role: "finance"},
		{name: "one over the limit", actor: "alice", m: pay(500001), reason: "amount 500001 INR is over what alice may approve (finance: limit 500000)"},
		{name: "zero amount", actor: "alice", m: pay(0), allow: true},
		{name: "unlimited role", actor: "carol", m: pay(1 << 62), allow: true, role: "controller", reason: "no limit"},
		{name: "role hierarchy", actor: "sam", m: pay(120000), allow: true, role: "finance"},
		{name: "2^53 at a limit of 2^53", actor: "gina", m: big(1 << 53), allow: true, role: "big"},
		{name: "2^53+1 at a limit of 2^53", actor: "gina", m: big(1<<53 + 1)},
		{name: "max int64 at a limit of 2^53", actor: "gina", m: big(1<<63 - 1)},
		{name: "no role", actor: "zed", m: pay(1), reason: "zed holds no role in acme that may decide payments.pay (roles that may: controller, finance)"},
		{name: "role of another action", actor: "bob", m: with(pay(1), func(m *Matter) { m.Requester = "zoe" }), reason: "bob holds no role"},
		{name: "role in another domain only", actor: "carol", m: glob(1)},
		{name: "own domain's limit", actor: "alice", m: glob(100), allow: true},
		{name: "own domain's limit, one over", actor: "alice", m: glob(101)},
		{name: "self-approval allowed where the floor separates nothing", actor: "bob", m: notes, allow: true, role: "member"},
		// windows
		{name: "role window ended at exactly now", actor: "tess", m: pay(1)},
		{name: "role window starts a second from now", actor: "uma", m: pay(1)},
		{name: "delegation inside its window", actor: "frank", m: pay(120000), allow: true, role: "finance", via: "erin", reason: "by delegation from erin (frank → erin → role:finance)"},
		{name: "delegation outside its window", actor: "hank", m: pay(120000)},
		{name: "multi-hop chain with an expired second hop", actor: "ivan", m: pay(1)},
		{name: "multi-hop chain in force", actor: "kim", m: pay(1), allow: true, via: "alice"},
		{name: "delegation is per domain", actor: "frank", m: glob(1)},
		// separation of duties
		{name: "self-approval", actor: "alice", m: with(pay(1), func(m *Matter) { m.Requester = "alice" }), reason: "separation of duties: alice is the requester"},
		{name: "self-approval through a delegate", actor: "frank", m: with(pay(1), func(m *Matter) { m.Requester = "erin" }), reason: "separation of duties: frank acts for the requester erin by delegation"},
		{name: "self-approval through a two-hop delegate", actor: "kim", m: with(pay(1), func(m *Matter) { m.Requester = "alice" })},
		{name: "agent owner", actor: "alice", m: with(pay(1), func(m *Matter) { m.AgentOwner = "alice" }), reason: "alice is the agent owner"},
		{name: "agent owner through a delegate", actor: "frank", m: with(pay(1), func(m *Matter) { m.AgentOwner = "erin" })},
		{name: "expired delegation does not separate", actor: "hank", m: with(big(1), func(m *Matter) { m.Requester = "erin" })},
		{name: "floor separating the requester only", actor: "gina", m: with(big(1), func(m *Matter) { m.AgentOwner = "gina" }), allow: true},
		// malformed or unknown requests
		{name: "missing actor", actor: "", m: pay(1), wantErr: ErrInvalidRequest},
		{name: "missing domain", actor: "alice", m: with(pay(1), func(m *Matter) { m.Domain = "" }), wantErr: ErrInvalidRequest},
		{name: "missing action", actor: "alice", m: with(pay(1), func(m *Matter) { m.Action = "" }), wantErr: ErrInvalidRequest},
		{name: "action not server.tool", actor: "alice", m: with(pay(1), func(m *Matter) { m.Action = "pay" }), wantErr: ErrInvalidRequest},
		{name: "missing requester", actor: "alice", m: with(pay(1), func(m *Matter) { m.Requester = "" }), wantErr: ErrInvalidRequest},
		{name: "missing agent owner", actor: "alice", m: with(pay(1), func(m *Matter) { m.AgentOwner = "" }), wantErr: ErrInvalidRequest},
		{name: "missing amount", actor: "alice", m: with(pay(1), func(m *Matter) { m.Amount, m.Currency = nil, "" }), wantErr: ErrInvalidRequest},
		{name: "missing currency", actor: "alice", m: with(pay(1), func(m *Matter) { m.Currency = "" }), wantErr: ErrInvalidRequest},
		{name: "negative amount", actor: "alice", m: pay(-1), wantErr: ErrInvalidRequest},
		{name: "other currency", actor: "alice", m: with(pay(1), func(m *Matter) { m.Currency = "USD" }), reason: "amount is in USD"},
		{name: "amount on an action without one", actor: "bob", m: with(notes, func(m *Matter) { m.Amount, m.Currency = amount(1), "INR" }), reason: "carries no amount"},
		{name: "unknown action", actor: "alice", m: with(pay(1), func(m *Matter) { m.Action = "payments.refund" }), reason: "no policy for payments.refund in acme"},
		{name: "unknown domain", actor: "alice", m: with(pay(1), func(m *Matter) { m.Domain = "initech" })},
		{name: "role name as actor", actor: "role:finance", m: pay(1), wantErr: ErrInvalidRequest},
		{name: "role name as requester", actor: "alice", m: with(pay(1), func(m *Matter) { m.Requester = "role:member" }), wantErr: ErrInvalidRequest},
		{name: "role name as agent owner", actor: "alice", m: with(pay(1), func(m *Matter) { m.AgentOwner = "role:x" }), wantErr: ErrInvalidRequest},
		{name: "bare role name as actor is a stranger", actor: "finance", m: pay(1)},
		{name: "negative recipe quorum", actor: "alice", m: pay(1), ask: RecipeAsk{Quorum: -1}, wantErr: ErrInvalidRequest},
		// what the recipe asked narrows, never widens
		{name: "ask finance: a finance holder", actor: "alice", m: pay(1), ask: RecipeAsk{Audience: "finance"}, allow: true},
		{name: "ask finance: a finance delegate", actor: "frank", m: pay(1), ask: RecipeAsk{Audience: "finance"}, allow: true, via: "erin"},
		{name: "ask finance: the controller", actor: "carol", m: pay(1), ask: RecipeAsk{Audience: "finance"}, reason: "the recipe asks finance; carol does not hold it in acme"},
		{name: "ask a role the policy lacks", actor: "alice", m: pay(1), ask: RecipeAsk{Audience: "treasury"}},
		{name: "ask me: the requester", actor: "bob", m: notes, ask: RecipeAsk{Audience: AudienceMe}, allow: true},
		{name: "ask me: someone else", actor: "alice", m: notes, ask: RecipeAsk{Audience: AudienceMe}, reason: "the recipe asks the requester (bob)"},
		{name: "ask me cannot widen the floor", actor: "bob", m: pay(1), ask: RecipeAsk{Audience: AudienceMe}, reason: "separation of duties: bob is the requester"},
		{name: "approvers: a named person", actor: "alice", m: pay(1), ask: RecipeAsk{Approvers: []string{"zed", "alice"}}, allow: true},
		{name: "approvers: the delegate of a named person", actor: "frank", m: pay(1), ask: RecipeAsk{Approvers: []string{"erin"}}, allow: true, via: "erin"},
		{name: "approvers: someone unnamed", actor: "frank", m: pay(1), ask: RecipeAsk{Approvers: []string{"alice"}}, reason: "the recipe's approvers are alice; frank is none of them"},
		{name: "approvers: a named role", actor: "carol", m: pay(1), ask: RecipeAsk{Approvers: []string{"controller"}}, allow: true},
		{name: "approvers cannot widen the floor", actor: "zed", m: pay(1), ask: RecipeAsk{Approvers: []string{"zed"}}},
		{name: "audience and approvers both narrow", actor: "alice", m: pay(1), ask: RecipeAsk{Audience: "finance", Approvers: []string{"erin"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := a.Authorize(t.Context(), Request{Actor: c.actor, Matter: c.m, Ask: c.ask})
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err = %v, want %v", err, c.wantErr)
				}
			} else if err != nil {
				t.Fatalf("err = %v", err)
			}
			if d.Allowed != c.allow {
				t.Fatalf("allowed = %v, want %v (%s)", d.Allowed, c.allow, d.Reason)
			}
			if c.role != "" && d.Role != c.role {
				t.Errorf("role = %q, want %q", d.Role, c.role)
			}
			if d.Via != c.via && (c.via != "" || d.Allowed && d.Via != "") {
				t.Errorf("via = %q, want %q", d.Via, c.via)
			}
			if !strings.Contains(d.Reason, c.reason) || d.Reason == "" {
				t.Errorf("reason = %q, want it to contain %q", d.Reason, c.reason)
			}
			if d.PolicyVersion != a.Version() || d.Actor != c.actor {
				t.Errorf("decision = %+v: version or actor missing", d)
			}
		})
	}
}

// A window is judged by the clock at the moment of the decision.
func TestAuthorizeWindowsFollowTheClock(t *testing.T) {
	c := newClock(t0)
	a := newAuthz(t, "rules.csv", c)
	for _, step := range []struct {
		at                     time.Time
		frank, uma, tess, ivan bool
	}{
		{t0.Add(-time.Second), true, false, true, false},
		{t0, true, false, false, false},
		{t0.Add(time.Second), true, true, false, false},
		{time.Date(2026, 8, 20, 0, 0, 0, 0, time.UTC), false, false, false, true}, // judy→erin in force, frank's not yet
		{time.Date(2026, 9, 15, 0, 0, 0, 0, time.UTC), false, true, false, false},
	} {
		c.Set(step.at)
		for actor, want := range map[string]bool{"frank": step.frank, "uma": step.uma, "tess": step.tess, "ivan": step.ivan} {
			d, err := a.Authorize(t.Context(), Request{Actor: actor, Matter: pay(1)})
			if err != nil || d.Allowed != want {
				t.Errorf("at %s %s: allowed=%v err=%v, want %v (%s)", step.at, actor, d.Allowed, err, want, d.Reason)
			}
		}
	}
}

func TestAuthorizeCancelledContextDenies(t *testing.T) {
	a := newAuthz(t, "rules.csv", newClock(t0))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	d, err := a.Authorize(ctx, Request{Actor: "alice", Matter: pay(1)})
	if !errors.Is(err, context.Canceled) || d.Allowed {
		t.Fatalf("allowed=%v err=%v, want a denial with context.Canceled", d.Allowed, err)
	}
}

// An enforcement error denies, even under a matcher that would otherwise
// allow everything.
func TestEnforceErrorDenies(t *testing.T) {
	a := newAuthz(t, "rules.csv", newClock(t0))
	broken := strings.Replace(defaultModel, "m = r.dom == p.dom", "m = withinLimit(r.sub, p.limit) || r.dom == p.dom", 1)
	if broken == defaultModel {
		t.Fatal("matcher not found in the default model")
	}
	s := a.cur.Load()
	bs, err := newSnapshot([]byte(broken), s.pol, s.now)
	if err != nil {
		t.Fatal(err)
	}
	a.cur.Store(bs) // bypasses the self-check on purpose
	d, err := a.Authorize(t.Context(), Request{Actor: "alice", Matter: pay(1)})
	if !errors.Is(err, ErrEnforce) || d.Allowed {
		t.Fatalf("allowed=%v err=%v, want a denial with ErrEnforce", d.Allowed, err)
	}
}

func TestAudienceMeIsThePlansRequester(t *testing.T) {
	if AudienceMe != plan.AudienceRequester {
		t.Fatalf("AudienceMe = %q, plan.AudienceRequester = %q", AudienceMe, plan.AudienceRequester)
	}
}

func TestDistinct(t *testing.T) {
	d := func(actor, via string) Decision { return Decision{Allowed: true, Actor: actor, Via: via} }
	for _, c := range []struct {
		name string
		in   []Decision
		want int
	}{
		{"none", nil, 0},
		{"two people", []Decision{d("alice", ""), d("carol", "")}, 2},
		{"the same person twice", []Decision{d("alice", ""), d("alice", "")}, 1},
		{"a person and their delegate", []Decision{d("erin", ""), d("frank", "erin")}, 1},
		{"a delegate first", []Decision{d("frank", "erin"), d("erin", "")}, 1},
		{"two delegates of one person", []Decision{d("frank", "erin"), d("hank", "erin")}, 1},
		{"a delegate and someone else", []Decision{d("frank", "erin"), d("alice", "")}, 2},
	} {
		if got := Distinct(c.in); got != c.want {
			t.Errorf("%s: Distinct = %d, want %d", c.name, got, c.want)
		}
	}
}
