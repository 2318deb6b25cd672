package approvals

import (
	"context"
	"fmt"

	"github.com/tollgate-dev/tollgate/pkg/decidable"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// SkillAction is the policy action that lets its holders publish, change
// and delete the skill name: `skill.NAME`. A policy row may name a
// pattern (`skill.*`, `skill.morning-*`); skill names hold no dot, so
// every name is one action of the reserved server `skill`.
func SkillAction(name string) string { return "skill." + name }

// MayPublishSkill reports whether policy lets who publish, change or
// delete the skill name: who holds a role the policy's rows for
// SkillAction(name) name, judged with who's own groups. Without a policy
// anyone may (a dev control plane with no policy file); with one, only a
// role holder: a name no row covers is nobody's.
func (d *Desk) MayPublishSkill(ctx context.Context, who, name string) (string, bool) {
	if d.cfg.Policy == nil {
		return "", true
	}
	action := SkillAction(name)
	ruled, ok := d.holdsRoleFor(ctx, who, action)
	switch {
	case !ruled:
		return fmt.Sprintf("no policy row in %s gives anyone %s (add one such as `p, role:ROLE, %s, skill.*, -`)", d.cfg.Domain, action, d.cfg.Domain), false
	case !ok:
		return fmt.Sprintf("%s holds no role policy gives %s", who, action), false
	}
	return "", true
}

// UndecidableGates are the gates of p that nobody could decide if
// requester started it now (CheckStart's finding, gate by gate, so a
// caller can point at each one in the source); none without a policy.
func (d *Desk) UndecidableGates(ctx context.Context, requester string, p *plan.Plan) ([]decidable.GateAuthority, error) {
	gates, err := d.check.PlanAuthority(ctx, requester, p)
	if err != nil {
		return nil, err
	}
	var bad []decidable.GateAuthority
	for _, g := range gates {
		if g.Problem != nil {
			bad = append(bad, g)
		}
	}
	return bad, nil
}
