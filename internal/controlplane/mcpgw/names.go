package mcpgw

import (
	"strings"
)

// OwnPrefix starts the names of Tollgate's own tools; an executor's
// server named "tollgate" is not listed (its names would collide).
const OwnPrefix = "tollgate."

// Tollgate's own tools.
const (
	ToolRunSkill    = OwnPrefix + "run_skill"
	ToolRunStatus   = OwnPrefix + "run_status"
	ToolPendingAsks = OwnPrefix + "pending_asks"
)

// maxToolName is MCP's bound on a tool name.
const maxToolName = 128

// toolName is the MCP name of server.tool: the recipe's own name where
// MCP's naming rules (1–128 of A-Z a-z 0-9 _ - .) allow it, else with each
// other character replaced by '_'; "" when no name fits (too long, or the
// reserved server). Names are mapped back through the listing, never
// parsed, so a replaced character cannot make one tool another.
func toolName(server, tool string) string {
	if server == "tollgate" || server == "" || tool == "" {
		return ""
	}
	n := server + "." + tool
	if len(n) > maxToolName {
		return ""
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			return r
		}
		return '_'
	}, n)
}
