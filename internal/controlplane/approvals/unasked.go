package approvals

import (
	"context"
	"fmt"

	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// MayStartUnasked decides whether starting the run may approve a
// `without asking` step (I1): only where policy lets the starter approve
// that action themselves, as if the recipe asked them, and one person is
// enough. Args that depend on earlier steps cannot be judged before they
// run, so they are refused. It returns why not.
func (d *Desk) MayStartUnasked(ctx context.Context, who string, st plan.Step) (string, bool) {
	if d.cfg.Policy == nil {
		return "no policy is loaded", false
	}
	if refs, _ := plan.ObjectRefs(st.Args); len(refs) > 0 {
		return "its args depend on earlier steps, so what it would do is not known at the start", false
	}
	// Judged as an approval the recipe asked of the starter (`ask me`).
	run := &engine.Run{Requester: who}
	a := &engine.AskRun{Type: plan.StopMenu, Audience: plan.AudienceRequester, Payload: []engine.Payload{{Step: st.ID, Server: st.Server, Tool: st.Tool, Args: st.Args}}}
	v, err := d.Authorize(ctx, who, run, a, Approve)
	if err != nil || !v.OK {
		return v.Why, false
	}
	if v.Quorum > 1 {
		// Starting the run is one person's approval; policy wins (I9).
		return fmt.Sprintf("policy needs %d distinct people to approve %s.%s, and starting the run is one", v.Quorum, st.Server, st.Tool), false
	}
	return "", true
}
