package authz

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// Item 1: a policy row may cover a family of actions with a pattern
// (gate.* for every gate): an action without its own row falls under the
// longest pattern that covers it, its own row says which roles decide,
// and the broader pattern's separation of duties holds for every action
// under it (issue 16: a narrower row cannot take it away).
func TestItem1_PolicyPatternsCoverGates(t *testing.T) {
	pol := `p, role:reviewer, acme, gate.*, -
p2, acme, gate.*, 1, requester, -
p, role:member, acme, gate.scratch-*, -
p2, acme, gate.scratch-*, 1, none, -
p, role:member, acme, gate.scratch-claims, -
p2, acme, gate.scratch-claims, 1, requester, -
g, alice, role:reviewer, acme, _, _
g, bob, role:reviewer, acme, _, _
g, alice, role:member, acme, _, _
`
	a, err := New(Config{PolicyPath: writeFile(t, filepath.Join(t.TempDir(), "p.csv"), pol), Now: newClock(t0).Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		actor, action, floor string
		ok                   bool
	}{
		{"bob", "gate.anything", "gate.*", true},
		{"alice", "gate.anything", "gate.*", false},                    // separated from the requester
		{"alice", "gate.scratch-1", "gate.scratch-*", false},           // the longer pattern's roles, gate.*'s separation
		{"alice", "gate.scratch-claims", "gate.scratch-claims", false}, // its own row wins
		{"bob", "notes.store", "", false},
	} {
		d, err := a.Authorize(context.Background(), Request{Actor: c.actor, Matter: Matter{Domain: "acme", Action: c.action, Requester: "alice", AgentOwner: "alice"}})
		if err != nil || d.Allowed != c.ok {
			t.Errorf("%s on %s: %v (%s) %v, want %v", c.actor, c.action, d.Allowed, d.Reason, err, c.ok)
		}
		f, ok := a.Floor("acme", c.action)
		if ok != (c.floor != "") || f.Action != c.floor {
			t.Errorf("floor of %s: %q %v, want %q", c.action, f.Action, ok, c.floor)
		}
	}
	if _, err := New(Config{PolicyPath: writeFile(t, filepath.Join(t.TempDir(), "bad.csv"), "p, role:r, acme, gate.*x, -\np2, acme, gate.*x, 1, none, -\n")}); err == nil {
		t.Error("a '*' that is not last is refused")
	}
	if _, err := a.Authorize(context.Background(), Request{Actor: "bob", Matter: Matter{Domain: "acme", Action: "gate.*", Requester: "alice", AgentOwner: "alice"}}); err == nil {
		t.Error("a request naming a pattern is malformed")
	}
}

// Issue 16, hostile: pattern rows cannot be used to let the requester
// decide her own gate. A narrower pattern or an exact row that says
// `none` inherits the broader pattern's separation and quorum; a '*'
// never matches past a dot (gate.* does not cover gate.deploy.prod), so
// a pattern written for one level cannot reach actions below it; and
// the matcher compares the row as written (no casbin keyMatch, whose '*'
// would match "gate.*" against anything).
func TestIssue16_PatternsCannotWidenSeparation(t *testing.T) {
	pol := `p, role:reviewer, acme, gate.*, -
p2, acme, gate.*, 2, requester, -
p, role:member, acme, gate.self-*, -
p2, acme, gate.self-*, 1, none, -
p, role:member, acme, gate.self-review, -
p2, acme, gate.self-review, 1, none, -
p, role:member, acme, gate.deploy.*, -
p2, acme, gate.deploy.*, 1, none, -
g, alice, role:reviewer, acme, _, _
g, alice, role:member, acme, _, _
g, bob, role:reviewer, acme, _, _
g, bob, role:member, acme, _, _
g, dave, alice, acme, _, _
`
	a, err := New(Config{PolicyPath: writeFile(t, filepath.Join(t.TempDir(), "p.csv"), pol), Now: newClock(t0).Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		actor, action, floor string
		ok                   bool
		quorum               int
	}{
		{"alice", "gate.self-approve", "gate.self-*", false, 2}, // a longer pattern: gate.*'s separation and quorum stay
		{"dave", "gate.self-approve", "gate.self-*", false, 2},  // nor through a delegate of the requester
		{"alice", "gate.self-review", "gate.self-review", false, 2},
		{"bob", "gate.self-review", "gate.self-review", true, 2},
		{"bob", "gate.deploy", "gate.*", true, 2},
		{"alice", "gate.deploy.prod", "gate.deploy.*", false, 2}, // gate.deploy.* decides, but gate.*'s bars reach every level below it
		{"bob", "gate.deploy.prod", "gate.deploy.*", true, 2},
		{"bob", "gate.deployer.x", "", false, 0}, // no pattern covers two levels down from gate.
	} {
		d, err := a.Authorize(context.Background(), Request{Actor: c.actor, Matter: Matter{Domain: "acme", Action: c.action, Requester: "alice", AgentOwner: "alice"}})
		if err != nil || d.Allowed != c.ok || d.Quorum != c.quorum {
			t.Errorf("%s on %s: allowed %v quorum %d (%s) %v, want %v quorum %d", c.actor, c.action, d.Allowed, d.Quorum, d.Reason, err, c.ok, c.quorum)
		}
		f, ok := a.Floor("acme", c.action)
		if ok != (c.floor != "") || f.Action != c.floor {
			t.Errorf("floor of %s: %q %v, want %q", c.action, f.Action, ok, c.floor)
		}
	}
	if f, _ := a.Floor("acme", "gate.self-approve"); fmt.Sprint(f.SeparateFrom) != "[requester]" || f.Quorum != 2 {
		t.Errorf("the floor shown is the one enforced: %+v", f)
	}
	// A pattern never matches a pattern-shaped request, nor a server
	// prefix: `gat*` or `*.x` do not load.
	for _, bad := range []string{"gat*", "*.x", "gate.**", "gate*.x"} {
		if _, err := New(Config{PolicyPath: writeFile(t, filepath.Join(t.TempDir(), "bad.csv"), "p, role:r, acme, "+bad+", -\np2, acme, "+bad+", 1, none, -\n")}); err == nil {
			t.Errorf("%q loaded as a policy action", bad)
		}
	}
}

// Issue 16: Deciders says who could decide an ask's matters together, and
// when nobody could, why and the rows to add — before anyone is asked.
func TestIssue16_Deciders(t *testing.T) {
	a, err := New(Config{PolicyPath: "../../examples/policy.csv", Now: newClock(t0).Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	amt := func(v int64) *int64 { return &v }
	pay := func(v int64, cur string) Matter {
		return Matter{Domain: "acme", Action: "payments.pay", Amount: amt(v), Currency: cur, Requester: "alice", AgentOwner: "alice"}
	}
	names := func(ds []Decision) string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Actor)
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		what    string
		ms      []Matter
		ask     RecipeAsk
		allowed string
		asked   string
		gap     []string // substrings of Reason, Rows and Fix
	}{
		{what: "a payment finance may decide", ms: []Matter{pay(90000, "INR")}, ask: RecipeAsk{Audience: "finance"}, allowed: "bob,dave", asked: "bob,dave"},
		{what: "args without a currency", ms: []Matter{pay(90000, "")}, gap: []string{"missing currency for amount 90000", `add "currency": "INR"`}},
		{what: "over every limit", ms: []Matter{pay(5000000, "INR")}, gap: []string{"no role's limit reaches 5000000", "p, role:finance-1m, acme, payments.pay, 5000000",
			"alice is the requester", "over what bob may approve (finance-100k: limit 100000)"}},
		{what: "an action no row covers", ms: []Matter{{Domain: "acme", Action: "bank.wire", Requester: "alice", AgentOwner: "alice"}},
			gap: []string{"no policy row covers bank.wire in acme", "p, role:ROLE, acme, bank.wire, -", "p2, acme, bank.wire, 1, requester+agent_owner, -"}},
		{what: "a gate by pattern", ms: []Matter{{Domain: "acme", Action: "gate.my-own-gate", Requester: "alice", AgentOwner: "alice"}}, ask: RecipeAsk{Audience: "reviewer"}, allowed: "bob", asked: "bob"},
		{what: "a gate and notes.store together: the gate's separation holds", ms: []Matter{
			{Domain: "acme", Action: "gate.my-own-gate", Requester: "alice", AgentOwner: "alice"},
			{Domain: "acme", Action: "notes.store", Requester: "alice", AgentOwner: "alice"}}, allowed: "bob", asked: "bob"},
		{what: "a gate bob requests", ms: []Matter{{Domain: "acme", Action: "gate.my-own-gate", Requester: "bob", AgentOwner: "bob"}}, allowed: "alice", asked: "alice"},
		{what: "quorum beyond the people", ms: []Matter{pay(90000, "INR")}, ask: RecipeAsk{Quorum: 4}, gap: []string{"policy lets 2 distinct people decide payments.pay (90000 INR) in acme; 4 must",
			"g, PERSON, role:finance-100k, acme, _, _", "PERSON: anyone but alice"}},
	} {
		d, err := a.Deciders(ctx, c.ms, c.ask)
		if err != nil {
			t.Errorf("%s: %v", c.what, err)
			continue
		}
		if c.gap == nil {
			if d.Gap != nil || names(d.Allowed) != c.allowed || names(d.Asked) != c.asked {
				t.Errorf("%s: allowed %s asked %s gap %+v; want %s / %s", c.what, names(d.Allowed), names(d.Asked), d.Gap, c.allowed, c.asked)
			}
			continue
		}
		if d.Gap == nil {
			t.Errorf("%s: no gap (allowed %s)", c.what, names(d.Allowed))
			continue
		}
		all := d.Gap.Reason + "\n" + strings.Join(d.Gap.Rows, "\n") + "\n" + d.Gap.Fix
		for _, w := range c.gap {
			if !strings.Contains(all, w) {
				t.Errorf("%s: gap lacks %q:\n%s", c.what, w, all)
			}
		}
	}
}
