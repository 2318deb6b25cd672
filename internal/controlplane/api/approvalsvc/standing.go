package approvalsvc

import (
	"context"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// approveStanding approves an ask and grants a standing approval over
// its scope (approvals.Desk.GrantStanding).
func (s *Service) approveStanding(ctx context.Context, who string, run *engine.Run, a *engine.AskRun, auth approvals.Verdict, judged engine.Judged, d *tollgatev1.ApproveException) (*tollgatev1.DecideResponse, error) {
	var until time.Time
	if d.GetUntil() != nil {
		until = d.GetUntil().AsTime()
	}
	tr, err := s.cfg.Approvals.GrantStanding(ctx, s.cfg.Runner, who, run, a, auth, judged,
		approvals.StandingGrant{Option: d.GetOptionId(), Scope: d.GetScope(), Until: until, Reason: d.GetReason()})
	if err != nil {
		return nil, err
	}
	return s.decided(ctx, tr, a.ID), nil
}

// ListExceptions lists the standing approvals the caller may see: active
// ones, or all.
func (s *Service) ListExceptions(ctx context.Context, req *tollgatev1.ListExceptionsRequest) (*tollgatev1.ListExceptionsResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	xs, err := s.cfg.Approvals.ListStanding(ctx, req.GetIncludeInactive())
	if err != nil {
		return nil, err
	}
	out := &tollgatev1.ListExceptionsResponse{}
	for _, x := range xs {
		if s.cfg.Readers.SeesStanding(ctx, who, x) {
			out.Exceptions = append(out.Exceptions, standingToProto(x))
		}
	}
	return out, nil
}

// RevokeException revokes a standing approval: its granter may, and so
// may anyone policy lets decide its action.
func (s *Service) RevokeException(ctx context.Context, req *tollgatev1.RevokeExceptionRequest) (*tollgatev1.RevokeExceptionResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	x, err := s.cfg.Approvals.RevokeStanding(ctx, who, req.GetExceptionId(), req.GetReason())
	if err != nil {
		return nil, err
	}
	return &tollgatev1.RevokeExceptionResponse{Exception: standingToProto(x)}, nil
}

func standingToProto(x store.Standing) *tollgatev1.StandingException {
	return &tollgatev1.StandingException{Id: x.ID, AskId: x.AskID, GrantedBy: x.GrantedBy, GrantedAt: wire.Time(x.GrantedAt), Until: wire.Time(x.Until),
		Scope: x.Scope, Revoked: x.Revoked, RevokedBy: x.RevokedBy, RevokedAt: wire.Time(x.RevokedAt), RevokeReason: x.RevokeReason}
}
