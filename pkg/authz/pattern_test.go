package authz

import (
	"context"
	"path/filepath"
	"testing"
)

// Item 1: a policy row may cover a family of actions with a pattern
// (gate.* for every gate): an action without its own row falls under the
// longest pattern that covers it, its own row always wins, and the
// pattern's floor (separation of duties) holds for every action under it.
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
		{"alice", "gate.scratch-1", "gate.scratch-*", true},            // the longer pattern
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
