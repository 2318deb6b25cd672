package controlplane

import (
	"cmp"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// decisionOf is the kind of decision req makes on a (approvals.Kind, by
// which the desk judges it); "" for a decision this control plane does
// not know (then nobody may make it).
func decisionOf(req *tollgatev1.DecideRequest, a *engine.AskRun) approvals.Kind {
	switch d := req.GetDecision().(type) {
	case *tollgatev1.DecideRequest_Approve:
		return approvals.OptionKind(a, cmp.Or(d.Approve.GetOptionId(), "1"))
	case *tollgatev1.DecideRequest_Reject:
		if a.Type == engine.InDoubt {
			return approvals.Stop
		}
		return approvals.Reject
	case *tollgatev1.DecideRequest_Amend:
		return approvals.Amend
	case *tollgatev1.DecideRequest_RequestEvidence:
		return approvals.RequestEvidence
	case *tollgatev1.DecideRequest_Delegate:
		return approvals.Delegate
	case *tollgatev1.DecideRequest_ApproveException:
		return approvals.GrantStanding
	case *tollgatev1.DecideRequest_Revoke:
		return approvals.Revoke
	case *tollgatev1.DecideRequest_TextAnswer:
		return approvals.TextAnswer
	}
	return ""
}
