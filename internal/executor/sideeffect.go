package executor

import (
	"fmt"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// sideEffect decides for this executor whether running l may change the
// world (I2). A tool call is read-only only when this executor's own host
// lists the tool with readOnlyHint true; a tool it does not list, or lists
// without that hint, is side-effecting whatever the lease says. The
// lease's flag can make a call stricter, never laxer: the stricter of the
// two wins. Prose steps go by the lease (a model call changes nothing
// outside it). When the host's view is the stricter one, why says what the
// host said, for a refusal that names it.
func (c *conn) sideEffect(l *tollgatev1.Lease) (se bool, why string) {
	if l.GetKind() == tollgatev1.StepKind_STEP_KIND_PROSE || l.GetSideEffect() {
		return l.GetSideEffect(), ""
	}
	name := l.GetServer() + "." + l.GetTool()
	if c.cfg.Host != nil {
		for _, t := range c.cfg.Host.Tools() {
			if t.Server != l.GetServer() || t.Name != l.GetTool() {
				continue
			}
			if t.ReadOnly {
				return false, ""
			}
			return true, fmt.Sprintf("%s is side-effecting on executor %s (its MCP server does not declare it read-only: no readOnlyHint), but the lease calls it read-only", name, c.cfg.ID)
		}
	}
	return true, fmt.Sprintf("%s is side-effecting on executor %s (its MCP host does not list the tool), but the lease calls it read-only", name, c.cfg.ID)
}

// ungranted is the refusal of a call this executor considers
// side-effecting whose lease carries no valid grant; why, when set, is the
// host's view that overrode the lease's.
func (c *conn) ungranted(l *tollgatev1.Lease, why string, reason tollgatev1.RefusalReason, err error) *tollgatev1.Result {
	msg := err.Error()
	if why != "" {
		msg = fmt.Sprintf("refused: %s; a side effect runs only under a valid grant: %v", why, err)
	}
	c.cfg.Log.Warn("refused a side-effecting lease", "lease", l.GetLeaseId(), "tool", l.GetServer()+"."+l.GetTool(),
		"lease_side_effect", l.GetSideEffect(), "why", msg)
	return refusal(reason, msg)
}
