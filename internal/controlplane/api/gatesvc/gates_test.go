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
	if _, err := s.gateEvent(context.Background(), "alice", &tollgatev1.OpenGateRequest{Gate: "anything", Summary: "s", Action: "notes.store"}); err == nil || !strings.Contains(err.Error(), "gate.anything") {
		t.Fatalf("a gate no policy names, opened under notes.store: %v", err)
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
