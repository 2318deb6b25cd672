package approvals

import (
	"context"
	"fmt"
	"slices"

	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// MayDelegate checks that to may decide the ask in who's place: policy
// must allow to now, as the recipe would ask them after the hand-over
// (separation of duties holds through delegation: a delegate who is the
// requester is refused like the requester).
func (d *Desk) MayDelegate(ctx context.Context, who, to string, run *engine.Run, a *engine.AskRun) error {
	if to == "" || to == who {
		return fmt.Errorf("delegate to whom? give --to: %w", errkind.Invalid)
	}
	after := *a
	if i := slices.Index(a.Approvers, who); i >= 0 {
		after.Approvers = slices.Clone(a.Approvers)
		after.Approvers[i] = to
	}
	v, err := d.MayDecide(ctx, to, run, &after)
	if err != nil || !v.OK {
		return fmt.Errorf("%s may not decide it: %s: %w", to, v.Why, errkind.Denied)
	}
	return nil
}
