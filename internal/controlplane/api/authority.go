package api

import (
	"context"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// AuthorityRequired says who may decide the ask now, as policy routes it
// (approvals.Desk.Requirement): what an ask and a gate show.
func AuthorityRequired(ctx context.Context, desk *approvals.Desk, run *engine.Run, a *engine.AskRun) *tollgatev1.AuthorityRequirement {
	r := desk.Requirement(ctx, run, a)
	return &tollgatev1.AuthorityRequirement{Description: r.Description, Roles: r.Roles, Principals: r.Principals,
		Quorum: int32(r.Quorum), Excluded: r.Excluded, PolicyRule: r.PolicyRule}
}
