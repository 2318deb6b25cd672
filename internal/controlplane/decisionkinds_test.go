package controlplane

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Every decision the API accepts (each field of DecideRequest's oneof,
// and each in-doubt option) maps to a decision kind: a new one added to
// the proto without a kind fails here (Decide refuses what it cannot
// judge).
func TestItem3_EveryDecideRequestHasAKind(t *testing.T) {
	oneof := (&tollgatev1.DecideRequest{}).ProtoReflect().Descriptor().Oneofs().ByName("decision")
	if oneof == nil {
		t.Fatal("DecideRequest has no oneof decision")
	}
	asks := []*engine.AskRun{
		{Type: plan.StopMenu, Options: []plan.Option{{ID: "1", Label: "Yes"}, {ID: "2", Label: "No"}}},
		{Type: engine.InDoubt, Options: []plan.Option{{ID: engine.DoubtRetry, Label: "retry"}, {ID: engine.DoubtRan, Label: "it ran"}, {ID: engine.DoubtStop, Label: "stop"}}},
	}
	fields := oneof.Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		typed := &tollgatev1.DecideRequest{}
		m := typed.ProtoReflect()
		m.Set(f, m.NewField(f))
		for _, a := range asks {
			if k := decisionOf(typed, a); k == "" {
				t.Errorf("DecideRequest.%s on a %s ask has no decision kind", f.Name(), a.Type)
			}
		}
	}
}

// Item 1 at the handler: a gate is opened under gate.NAME whatever the
// request says; an action the request names is added (Also), to raise
// the bar (approvals' TestItem1_GateActionOnlyRaisesTheBar judges it).
func TestItem1_GateOpensUnderItsOwnAction(t *testing.T) {
	s := NewServices(ServiceConfig{Approvals: approvals.New(approvals.Config{Policy: devPolicy(t), Domain: "acme"})})
	ev, err := s.gateEvent(context.Background(), "alice", &tollgatev1.OpenGateRequest{Gate: "claims", Summary: "s", Action: "notes.store"})
	if err != nil || ev.Server+"."+ev.Tool != "gate.claims" || fmt.Sprint(ev.Also) != "[notes.store]" {
		t.Fatalf("open claims naming notes.store: %s.%s also %v, %v", ev.Server, ev.Tool, ev.Also, err)
	}
	if _, err := s.gateEvent(context.Background(), "alice", &tollgatev1.OpenGateRequest{Gate: "anything", Summary: "s", Action: "notes.store"}); err == nil || !strings.Contains(err.Error(), "gate.anything") {
		t.Fatalf("a gate no policy names, opened under notes.store: %v", err)
	}
}

// Item 5: every approving decision binds the evidence its decider was
// shown. On vendor-payment (evidence: the vendor record), dave approving
// with an all-zero evidence digest, or with none, is refused in the style
// of the payload check — by Decide approve, by approve with a standing
// approval, and by an Answer that selects Yes; with the digest he was
// shown it is approved. Rejecting needs no digest.
func TestItem5_ApprovalsBindTheEvidenceShown(t *testing.T) {
	e := newEnv(t, nil, echoTools())
	r := e.start("alice", "vendor-payment")
	askID := r.GetId() + "/ask_1"
	dave := e.rawApprovals("dave")
	packet, err := dave.GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID})
	if err != nil {
		t.Fatal(err)
	}
	shown := packet.GetAsk().GetEvidenceDigest()
	if shown == "" {
		t.Fatal("vendor-payment's ask shows evidence")
	}
	zero := "sha256:" + strings.Repeat("0", 64)
	pd := packet.GetAsk().GetPayloadDigest() // the payload as shown: this test is of the evidence
	until := timestamppb.New(time.Now().Add(24 * time.Hour))
	for name, req := range map[string]*tollgatev1.DecideRequest{
		"approve, zero evidence": {AskId: askID, ExpectedPayloadDigest: pd, ExpectedEvidenceDigest: zero, Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}},
		"approve, no evidence":   {AskId: askID, ExpectedPayloadDigest: pd, Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}},
		"exception, zero evidence": {AskId: askID, ExpectedPayloadDigest: pd, ExpectedEvidenceDigest: zero, Decision: &tollgatev1.DecideRequest_ApproveException{ApproveException: &tollgatev1.ApproveException{
			Until: until, Scope: "payments.pay vendor=V-1187 amount<=500000", Reason: "monthly"}}},
	} {
		_, err := dave.Decide(bg, req)
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "the ask now shows "+shown) {
			t.Fatalf("%s: %v, want FAILED_PRECONDITION naming %s", name, err, shown)
		}
	}
	if _, err := dave.Answer(bg, &tollgatev1.AnswerRequest{AskId: askID, Text: "1", ExpectedPayloadDigest: pd, ExpectedEvidenceDigest: zero}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("an answer selecting Yes with a zero evidence digest: %v", err)
	}
	if a, _ := dave.GetAsk(bg, &tollgatev1.GetAskRequest{AskId: askID}); a.GetAsk().GetState() != tollgatev1.AskState_ASK_STATE_PENDING {
		t.Fatalf("refused approvals left it %v", a.GetAsk().GetState())
	}
	if _, err := dave.Decide(bg, &tollgatev1.DecideRequest{AskId: askID, ExpectedPayloadDigest: pd, ExpectedEvidenceDigest: shown, Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}}); err != nil {
		t.Fatalf("the evidence dave was shown: %v", err)
	}
}
