package gatesvc

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/pkg/authz"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
)

// Item 1 at the handler: a gate is opened under gate.NAME whatever the
// request says; an action the request names is added (Also), to raise
// the bar (approvals' TestItem1_GateActionOnlyRaisesTheBar judges it).
func TestItem1_GateOpensUnderItsOwnAction(t *testing.T) {
	s := New(Config{Approvals: approvals.New(approvals.Config{Policy: devPolicy(t), Domain: "acme"})})
	ev, err := s.gateEvent(context.Background(), "alice", &tollgatev1.OpenGateRequest{Gate: "claims", Summary: "s", Action: "notes.store"})
	if err != nil || ev.Server+"."+ev.Tool != "gate.claims" || fmt.Sprint(ev.Also) != "[notes.store]" {
		t.Fatalf("open claims naming notes.store: %s.%s also %v, %v", ev.Server, ev.Tool, ev.Also, err)
	}
	// gate.* covers every gate one level down; deploy.prod is below it.
	if _, err := s.gateEvent(context.Background(), "alice", &tollgatev1.OpenGateRequest{Gate: "deploy.prod", Summary: "s", Action: "notes.store"}); err == nil || !strings.Contains(err.Error(), "gate.deploy.prod") {
		t.Fatalf("a gate no policy names, opened under notes.store: %v", err)
	}
}

// Issue 16: a gate from code under the dev policy's gate.* is routed to a
// reviewer, even when its requester adds an action she could decide
// herself (notes.store: members approve their own notes); a refusal names
// the policy file to edit and the rows to add.
func TestIssue16_GateFromCodeUnderDevPolicy(t *testing.T) {
	const file = "/home/dev/.tollgate/dev/policy.csv"
	s := New(Config{Approvals: approvals.New(approvals.Config{Policy: devPolicy(t), Domain: "acme", PolicyFile: file})})
	ev, err := s.gateEvent(context.Background(), "alice", &tollgatev1.OpenGateRequest{Gate: "my-own-gate", Summary: "s", Action: "notes.store"})
	if err != nil || ev.Audience != "reviewer" {
		t.Fatalf("my-own-gate --action notes.store: audience %q, %v", ev.Audience, err)
	}
	_, err = s.gateEvent(context.Background(), "alice", &tollgatev1.OpenGateRequest{Gate: "my-own-gate", Summary: "s", Action: "notes.store", Approvers: []string{"alice"}})
	if err == nil || !strings.Contains(err.Error(), "cannot be decided by anyone") || !strings.Contains(err.Error(), "(bob)") {
		t.Fatalf("alice routing her own gate to herself: %v", err)
	}
	_, err = s.gateEvent(context.Background(), "alice", &tollgatev1.OpenGateRequest{Gate: "deploy.prod", Summary: "s"})
	for _, want := range []string{file, "p, role:ROLE, acme, gate.deploy.prod, -", "p2, acme, gate.deploy.prod, 1, requester, -"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("refusal lacks %q: %v", want, err)
		}
	}
}

// devPolicy is the example policy the dev plane loads.
func devPolicy(t testing.TB) *authz.Authorizer {
	t.Helper()
	a, err := authz.New(authz.Config{PolicyPath: "../../../../examples/policy.csv"})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
