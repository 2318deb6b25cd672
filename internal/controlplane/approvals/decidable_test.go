package approvals

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Issue 16, hostile: a gate from code only its requester could decide is
// refused when it opens, whatever the policy's separation says — a gate
// is someone else's check on a script, so choosing an action (or a policy
// row without separation) cannot turn it into a self-approval.
func TestIssue16_GateOnlyTheRequesterCouldDecideIsRefused(t *testing.T) {
	d := deskWith(t, "p, role:reviewer, acme, gate.*, -\np2, acme, gate.*, 1, none, -\np, role:member, acme, notes.store, -\np2, acme, notes.store, 1, none, -\n"+
		"g, alice, role:reviewer, acme, _, _\ng, alice, role:member, acme, _, _\ng, dave, alice, acme, _, _\n")
	for _, also := range [][]string{nil, {"notes.store"}} {
		_, _, err := d.RouteGate(context.Background(), GateRequest{Gate: "g", Requester: "alice", Action: "gate.g", Also: also, Args: plan.Object(`{}`)})
		if err == nil || !strings.Contains(err.Error(), "only its requester, alice, could decide it") || !strings.Contains(err.Error(), "p2, acme, gate.g, 1, requester, -") {
			t.Errorf("also %v: %v, want refused: only the requester (or her delegate dave) could decide it", also, err)
		}
	}
}

// A gate from code is decided by someone other than its requester at
// decision time too, whatever separation its policy row sets: with
// `none`, the gate opens (bob could decide it), but alice, who opened it,
// may not approve it, nor dave acting for her.
func TestGateRequesterNeverDecidesHerOwnGate(t *testing.T) {
	d := deskWith(t, "p, role:reviewer, acme, gate.*, -\np2, acme, gate.*, 1, none, -\n"+
		"g, alice, role:reviewer, acme, _, _\ng, bob, role:reviewer, acme, _, _\ng, dave, alice, acme, _, _\n")
	audience, _, err := d.RouteGate(context.Background(), GateRequest{Gate: "g", Requester: "alice", Action: "gate.g", Args: plan.Object(`{}`)})
	if err != nil {
		t.Fatalf("bob could decide it, so it opens: %v", err)
	}
	a := &engine.AskRun{ID: "g", Type: engine.Gate, State: engine.AskPending, Audience: audience,
		Payload: []engine.Payload{{Step: "g", Server: "gate", Tool: "g", Args: plan.Object(`{}`)}}}
	run := &engine.Run{ID: "r1", Requester: "alice", Asks: map[string]*engine.AskRun{"g": a}}
	for who, want := range map[string]bool{"alice": false, "dave": false, "bob": true} {
		v, err := d.Authorize(context.Background(), who, run, a, Approve)
		if err != nil || v.OK != want {
			t.Errorf("%s approves alice's gate: %+v %v, want allowed=%v", who, v, err, want)
		}
	}
}

// deskWith is a Desk over the policy text pol (a file of its own).
func deskWith(t *testing.T, pol string) *Desk {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.csv")
	if err := os.WriteFile(path, []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	az, err := authz.New(authz.Config{PolicyPath: path})
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{Policy: az, Domain: "acme", PolicyFile: path})
}
