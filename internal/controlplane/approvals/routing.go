package approvals

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Requirement is who may decide an ask now, as policy routes it: what
// the API shows as the ask's authority_required. It informs; Authorize
// decides, at decision time.
type Requirement struct {
	Description string
	Roles       []string
	// Principals are the people the route finds eligible now.
	Principals []string
	Quorum     int
	// Excluded are those separation of duties keeps out.
	Excluded []string
	// PolicyRule is the route's reason.
	PolicyRule string
}

// Requirement says who may decide the ask now, as policy routes it: the
// roles, the people, the quorum and who separation of duties keeps out.
func (d *Desk) Requirement(ctx context.Context, run *engine.Run, a *engine.AskRun) Requirement {
	req := Requirement{Quorum: max(a.Quorum, 1)}
	switch {
	case a.Audience == "" || a.Audience == plan.AudienceRequester:
		req.Description = "the requester, " + run.Requester
	default:
		req.Description = "the role " + a.Audience
		req.Roles = []string{a.Audience}
	}
	if d.cfg.Policy == nil || len(a.Payload) == 0 {
		return req
	}
	if a.Type == engine.InDoubt {
		req.Description += " (it ran, stop); a retry needs what approving it did"
	}
	seen := map[string]bool{}
	for _, p := range a.Payload {
		m, err := d.matter(run, p)
		if err != nil {
			continue
		}
		rt, _ := d.cfg.Policy.RouteAsked(ctx, m, recipeAsk(a))
		req.Quorum = max(req.Quorum, rt.Quorum)
		req.PolicyRule = rt.Reason
		for _, e := range rt.Eligible {
			if !seen[e.Actor] {
				seen[e.Actor] = true
				req.Principals = append(req.Principals, e.Actor)
			}
		}
		for _, f := range rt.Floor.SeparateFrom {
			switch f {
			case "requester":
				req.Excluded = append(req.Excluded, m.Requester)
			case "agent_owner":
				req.Excluded = append(req.Excluded, m.AgentOwner)
			}
		}
	}
	slices.Sort(req.Excluded)
	req.Excluded = slices.Compact(req.Excluded)
	return req
}

// unroutable reports whether nobody may decide the ask as asked, and
// where it should go instead: the recipe's `escalate … to`, else the
// control plane's configured role (I5: an ask nobody may answer is moved
// on, not left to expire unseen; it is never approved by default).
func (d *Desk) unroutable(ctx context.Context, run *engine.Run, a *engine.AskRun) (to, why string, ok bool) {
	if d.cfg.Policy == nil || a.Type != plan.StopMenu || len(a.Payload) == 0 || a.EscalatedTo != "" {
		return "", "", false
	}
	for _, p := range a.Payload {
		m, err := d.matter(run, p)
		if err != nil {
			return "", "", false
		}
		// Whom it asks and whether it escalates: RouteAsked costs what
		// those it asks cost (the requester, for `ask me`), not everyone
		// policy lets decide. It is asked as each ask opens.
		rt, _ := d.cfg.Policy.RouteAsked(ctx, m, recipeAsk(a))
		if !rt.Escalate {
			continue
		}
		to = a.EscalateTo
		if to == "" {
			to = d.cfg.EscalateTo
		}
		if to == "" || to == a.Audience {
			d.log().Warn("nobody may decide this ask and no escalation role is configured; it waits", "ask", a.ID, "why", rt.Reason)
			return "", "", false
		}
		return to, "nobody eligible: " + rt.Reason, true
	}
	return "", "", false
}

// GateRequest is a gate a script asks to open, as policy routes it.
type GateRequest struct {
	Gate      string
	Requester string
	// Action is the one the gate is decided under (gate.NAME: fixed by
	// policy for the gate, not chosen by its requester); Also are the
	// actions the requester added, each of which policy must govern and
	// the same people must be allowed — they raise the bar, never
	// replace it.
	Action    string
	Also      []string
	Approvers []string
	Quorum    int
	Args      plan.Object // the gate's payload
}

// RouteGate is whom a gate asks, as policy routes it. Of the requested
// approvers, the first that is a role is the audience and the rest narrow
// it; with none, the first role the policy allows for the action. With no
// policy only the requester decides (`ask me`). A gate nobody could
// decide — an action no policy floor governs, one the same people may not
// decide together with the actions added, or one only its requester
// could decide (a gate from code is someone else's check, so separation
// of duties cannot be dodged by choosing the action) — is refused here
// (errkind.Precondition) with the rows to add, not left waiting.
func (d *Desk) RouteGate(ctx context.Context, g GateRequest) (audience string, people []string, err error) {
	audience, people = d.gateAudience(g.Action, g.Approvers)
	if d.cfg.Policy == nil {
		if len(g.Also) > 0 {
			return "", nil, fmt.Errorf("gate %s: --action %s needs a policy to judge it, and none is loaded: %w", g.Gate, g.Also[0], errkind.Precondition)
		}
		return audience, people, nil
	}
	run := &engine.Run{Requester: g.Requester}
	var ms []authz.Matter
	for _, act := range append([]string{g.Action}, g.Also...) {
		srv, tool, _ := strings.Cut(act, ".")
		m, err := d.matter(run, engine.Payload{Step: g.Gate, Server: srv, Tool: tool, Args: g.Args})
		if err != nil {
			return "", nil, fmt.Errorf("gate %s: %w: %w", g.Gate, err, errkind.Invalid)
		}
		ms = append(ms, m)
	}
	ask := authz.RecipeAsk{Audience: audience, Approvers: people, Quorum: g.Quorum}
	j, err := d.check.Judge(ctx, ms, ask, "", g.Requester)
	if err != nil {
		return "", nil, fmt.Errorf("gate %s: %w", g.Gate, err)
	}
	if j.Problem != nil {
		return "", nil, fmt.Errorf("gate %s cannot be decided by anyone: %s: %w", g.Gate, j.Problem.Text(), errkind.Precondition)
	}
	return audience, people, nil
}

// gateAudience is whom a gate asks under action (RouteGate): the first
// requested role, else the first role policy allows for the action, and
// the people named.
func (d *Desk) gateAudience(action string, names []string) (string, []string) {
	var cleaned []string
	for _, n := range names {
		for _, part := range strings.Split(n, ",") {
			if part = strings.TrimSpace(part); part != "" {
				cleaned = append(cleaned, part)
			}
		}
	}
	if d.cfg.Policy == nil {
		// No policy: only the requester decides (`ask me`).
		return "", cleaned
	}
	audience := ""
	var people []string
	for _, n := range cleaned {
		if audience == "" && d.cfg.Policy.IsRole(n, d.cfg.Domain) {
			audience = strings.TrimPrefix(n, "role:")
			continue
		}
		people = append(people, n)
	}
	if floor, ok := d.cfg.Policy.Floor(d.cfg.Domain, action); audience == "" && ok && len(floor.Rules) > 0 {
		audience = floor.Rules[0].Role
	}
	return audience, people
}
