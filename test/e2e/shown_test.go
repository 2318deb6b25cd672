package e2e

import (
	"context"
	"testing"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// approveAsShown approves an ask as an approver's surface does: with the
// payload and evidence digests of the ask as read just before (I6).
func approveAsShown(t *testing.T, ctx context.Context, approvals tollgatev1.ApprovalServiceClient, askID string) error {
	t.Helper()
	shown, err := approvals.GetAsk(ctx, &tollgatev1.GetAskRequest{AskId: askID})
	if err != nil {
		return err
	}
	_, err = approvals.Decide(ctx, &tollgatev1.DecideRequest{AskId: askID, ExpectedPayloadDigest: shown.GetAsk().GetPayloadDigest(),
		ExpectedEvidenceDigest: shown.GetAsk().GetEvidenceDigest(), Decision: &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{}}})
	return err
}
