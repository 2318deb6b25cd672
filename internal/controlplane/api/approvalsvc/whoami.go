package approvalsvc

import (
	"context"
	"slices"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// WhoAmI is who the server takes the caller for, and the roles policy
// gives them now (approvals.Desk.RolesOf: directly or through a group).
func (s *Service) WhoAmI(ctx context.Context, _ *tollgatev1.WhoAmIRequest) (*tollgatev1.WhoAmIResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	p, _ := identity.FromContext(ctx)
	roles, domain := s.cfg.Approvals.RolesOf(ctx, who)
	return &tollgatev1.WhoAmIResponse{Subject: who, Kind: p.Kind, Issuer: p.Issuer, Groups: slices.Clone(p.Groups), Roles: roles, Domain: domain}, nil
}
