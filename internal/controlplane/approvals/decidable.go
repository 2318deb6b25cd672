package approvals

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Before anyone is asked (issue 16): an approval nobody could decide is
// refused where it is found — when a run starts, for what is known then;
// when the ask would open, for what only earlier steps could tell (the
// run then fails with the reason: an ask nobody can answer is never
// parked to expire unseen); when a script opens a gate — never found by
// the first approver who tries. Who "could decide" is pkg/decidable's
// answer (d.check), the one `approvectl plan --policy` shows offline;
// the desk refuses with it.

// CheckStart refuses a plan with an approval gate nobody could decide
// when requester starts it (errkind.Precondition): the reasons, and the
// rows to add or the recipe's fix. Gates whose amounts are known only
// later are judged again when they open (Undecidable). With no policy
// loaded, nothing is refused here (only the requester decides).
func (d *Desk) CheckStart(ctx context.Context, requester string, p *plan.Plan) error {
	gates, err := d.check.PlanAuthority(ctx, requester, p)
	if err != nil {
		return err
	}
	var bad []string
	for _, g := range gates {
		if g.Problem != nil {
			bad = append(bad, fmt.Sprintf("%q (%s) cannot be decided by anyone: %s", g.Title, g.Gate, g.Problem.Text()))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("the run was not started: %s: %w", strings.Join(bad, "\n"), errkind.Precondition)
}

// Undecidable is the engine's check as a recipe's approval ask opens
// (engine.Config.Undecidable): why nobody could decide a as it is now,
// its payload resolved, or "". It reads policy in memory only.
func (d *Desk) Undecidable(run *engine.Run, a *engine.AskRun) string {
	if d.cfg.Policy == nil || len(a.Payload) == 0 {
		return ""
	}
	var ms []authz.Matter
	for _, m := range d.matters(run, a) {
		if m.err != nil {
			return m.err.Error()
		}
		ms = append(ms, m.Matter)
	}
	j, err := d.check.Judge(context.Background(), ms, recipeAsk(a), cmp.Or(a.EscalateTo, d.cfg.EscalateTo), "")
	if err != nil {
		return err.Error()
	}
	if j.Problem != nil {
		return j.Problem.Text()
	}
	return ""
}
