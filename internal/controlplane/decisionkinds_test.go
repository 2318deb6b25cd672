package controlplane

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

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
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), shown) {
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
