package approvals

import (
	"context"
	"fmt"
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

// GateRole is the role a gate over action asks when its recipe names
// none: the first role policy gives the action ("" without a policy, or
// when no row governs it — then nobody could decide it, which the start
// refuses with the rows to add).
func (d *Desk) GateRole(action string) string {
	if d.cfg.Policy == nil {
		return ""
	}
	role, _ := d.gateAudience(action, nil)
	return role
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
