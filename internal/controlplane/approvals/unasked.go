package approvals

import (
	"context"
	"fmt"
	"slices"

	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// MayStartUnasked decides whether starting a run of p with inputs may
// approve its `without asking` step st (I1): only where policy lets the
// starter approve that action themselves, as if the recipe asked them,
// and one person is enough. It is judged on the args the step will run
// with, the run's inputs put in (engine.ResolveInputs). Args that read
// anything else (an earlier step, an answer) cannot be judged before they
// run, so they are refused; what an input's value holds is data, braces
// and all. It returns why not.
func (d *Desk) MayStartUnasked(ctx context.Context, who string, p *plan.Plan, st plan.Step, inputs map[string]string) (string, bool) {
	if d.cfg.Policy == nil {
		return "no policy is loaded", false
	}
	refs, err := plan.ObjectRefs(st.Args)
	if err != nil {
		return fmt.Sprintf("its args cannot be read (%v)", err), false
	}
	for _, r := range refs {
		if !slices.Contains(p.Inputs, r.ID) {
			return "its args depend on earlier steps, so what it would do is not known at the start", false
		}
	}
	st.Args = engine.ResolveInputs(p, st.Args, inputs)
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
