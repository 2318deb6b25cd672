package wire

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/grant"
)

// Grant is g's wire form. Grants cross the wire in leases and in
// gate decisions; the control plane, executors, client/gates and
// approvectl all convert them here.
func Grant(g *grant.Grant) *tollgatev1.Grant {
	if g == nil {
		return nil
	}
	return &tollgatev1.Grant{RunId: g.RunID, StepId: g.StepID, Action: g.Action, AskId: g.AskID, PayloadDigest: g.PayloadDigest, Fence: g.Fence,
		ExpiresAt: timestamppb.New(g.ExpiresAt), KeyId: g.KeyID, Signature: g.Signature}
}

// GrantFromProto is the grant pg carries; nil for nil (a verifier then
// says grant.ErrMissing).
func GrantFromProto(pg *tollgatev1.Grant) *grant.Grant {
	if pg == nil {
		return nil
	}
	return &grant.Grant{RunID: pg.GetRunId(), StepID: pg.GetStepId(), Action: pg.GetAction(), AskID: pg.GetAskId(), PayloadDigest: pg.GetPayloadDigest(),
		Fence: pg.GetFence(), ExpiresAt: pg.GetExpiresAt().AsTime(), KeyID: pg.GetKeyId(), Signature: pg.GetSignature()}
}
