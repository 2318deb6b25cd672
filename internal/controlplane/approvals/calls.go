package approvals

import (
	"context"
	"fmt"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// CallAction is the policy action that lets its holders call server.tool
// through the MCP gateway (internal/controlplane/mcpgw): `call.SERVER.TOOL`.
// A row may name a pattern for a server's tools (`call.slack.*`; a '*'
// never matches past a dot, so each server needs its own). Holding it
// lets an agent ask for the call; a side-effecting call still waits for
// whoever policy gives the tool's own action (SERVER.TOOL) to.
func CallAction(server, tool string) string { return "call." + server + "." + tool }

// MayCall reports whether policy lets who call server.tool through the
// MCP gateway, and if not, why. Without a policy anyone may (a dev
// control plane with no policy file); with one, only a holder of a role
// the rows for CallAction name: a tool no row covers is nobody's to call.
func (d *Desk) MayCall(ctx context.Context, who, server, tool string) (string, bool) {
	if d.cfg.Policy == nil {
		return "", true
	}
	action := CallAction(server, tool)
	ruled, ok := d.holdsRoleFor(ctx, who, action)
	switch {
	case !ruled:
		return fmt.Sprintf("no policy row in %s lets anyone call %s.%s (add one such as `p, role:ROLE, %s, call.%s.*, -`)", d.cfg.Domain, server, tool, d.cfg.Domain, server), false
	case !ok:
		return fmt.Sprintf("%s holds no role policy gives %s", who, action), false
	}
	return "", true
}

// GateRole is the role a gate over server.tool with args asks when its
// recipe names none: of the roles policy gives the action, the first
// whose limit covers the amount the args carry (any, for an action
// without amounts, or when no limit covers it: the start then refuses
// the gate nobody could decide, with the rows to add). "" without a
// policy, or when no row governs the action. requester starts the run
// (whose owner the amount's matter names); args may be nil.
func (d *Desk) GateRole(requester, server, tool string, args plan.Object) string {
	if d.cfg.Policy == nil {
		return ""
	}
	f, ok := d.cfg.Policy.Floor(d.cfg.Domain, server+"."+tool)
	if !ok || len(f.Rules) == 0 {
		return ""
	}
	if args != nil {
		if m, err := d.check.Matter(requester, plan.Step{ID: "call", Server: server, Tool: tool, Args: args}); err == nil && m.Amount != nil {
			for _, r := range f.Rules {
				if r.Limit == nil || *r.Limit >= *m.Amount {
					return r.Role
				}
			}
		}
	}
	return f.Rules[0].Role
}

// Governed reports whether a policy is loaded: without one only a
// requester decides, so a surface that asks on an agent's behalf must not
// open gates its own caller would answer.
func (d *Desk) Governed() bool { return d.cfg.Policy != nil }

// OwnerOf is the person who owns the agent principal who (Config.Owners),
// or who itself: separation of duties keeps both out of who's runs.
func (d *Desk) OwnerOf(who string) string {
	if o, ok := d.cfg.Owners[who]; ok {
		return o
	}
	return who
}

// holdsRoleFor reports whether any policy row governs action (ruled) and
// whether who, judged with their own groups, holds a role one of those
// rows names (ok): the one test of "may who do action at all", for
// skills, standing approvals and calls.
func (d *Desk) holdsRoleFor(ctx context.Context, who, action string) (ruled, ok bool) {
	f, found := d.cfg.Policy.Floor(d.cfg.Domain, action)
	if !found {
		return false, false
	}
	for _, r := range f.Rules {
		if d.cfg.Policy.Holds(who, r.Role, d.cfg.Domain, callerGroups(ctx, who)...) {
			return true, true
		}
	}
	return true, false
}
