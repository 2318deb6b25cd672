package approvals

import (
	"context"

	"github.com/tollgate-dev/tollgate/internal/identity"
)

// callerGroups is who's groups at the identity provider, when who is the
// authenticated caller of ctx (a person whose token the OpenID provider
// signed; see identity.OIDCVerifier), or the groups an earlier decision of
// who's was judged with (judgedWith), else none.
//
// The control plane learns a person's groups only from that person's own
// token, so they count only where the caller is judged — their decision
// (Authorize, the one authority check), their inbox and what they may see
// — and where a decision of theirs is judged again (an earlier voter
// re-checked when the next vote comes, a standing approval's granter each
// time it applies), with the groups recorded with it. Judging someone
// ahead of time (routing, a delegate) sees the people policy names,
// without groups.
func callerGroups(ctx context.Context, who string) []string {
	if j, ok := ctx.Value(judgedKey{}).(judged); ok && j.who == who {
		return j.groups
	}
	p, ok := identity.FromContext(ctx)
	if !ok || p.Subject != who || p.Kind != identity.KindPerson {
		return nil
	}
	return p.Groups
}

// CallerGroups is callerGroups, for the decision record (engine.Decide's
// Groups): the groups who's decision is judged with now.
func CallerGroups(ctx context.Context, who string) []string { return callerGroups(ctx, who) }

type judgedKey struct{}

type judged struct {
	who    string
	groups []string
}

// judgedWith is ctx in which who is judged with groups, whoever the
// caller is: a vote re-checked is judged with the membership it was given
// under (the provider's word then), against the policy in force now.
func judgedWith(ctx context.Context, who string, groups []string) context.Context {
	return context.WithValue(ctx, judgedKey{}, judged{who: who, groups: groups})
}
