package approvals

import (
	"context"

	"github.com/tollgate-dev/tollgate/internal/identity"
)

// callerGroups is who's groups at the identity provider, when who is the
// authenticated caller of ctx (a person whose token the OpenID provider
// signed; see identity.OIDCVerifier), else none.
//
// The control plane learns a person's groups only from that person's own
// token, so they count only where the caller is judged: their decision
// (Authorize, the one authority check), their inbox and what they may see.
// Judging someone else (routing ahead of time, a delegate, an earlier
// voter re-checked when the next vote comes, a standing approval's
// granter when it applies) sees the people policy names, without groups.
func callerGroups(ctx context.Context, who string) []string {
	p, ok := identity.FromContext(ctx)
	if !ok || p.Subject != who || p.Kind != identity.KindPerson {
		return nil
	}
	return p.Groups
}
