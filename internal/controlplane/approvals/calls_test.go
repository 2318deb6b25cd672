package approvals

import (
	"context"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Who may call a tool through the MCP gateway is policy's call.SERVER.TOOL
// (examples/policy.csv: the agent and members call slack, only the agent
// payments; nobody test.*).
func TestMayCall(t *testing.T) {
	d := devDesk(t)
	for _, tc := range []struct {
		who, server, tool string
		ok                bool
	}{
		{"alice-agent", "slack", "slack_post_message", true},
		{"alice-agent", "payments", "pay", true},
		{"alice", "slack", "slack_post_message", true},
		{"alice", "payments", "pay", false}, // members call no payments
		{"mallory", "mcp-monitor", "get_cpu_info", false},
		{"alice-agent", "test", "mark", false}, // no row governs call.test.*
		{"alice-agent", "slackx", "slack_post_message", false},
	} {
		ctx := identity.WithPrincipal(context.Background(), identity.Principal{Subject: tc.who, Kind: identity.KindPerson})
		if why, ok := d.MayCall(ctx, tc.who, tc.server, tc.tool); ok != tc.ok {
			t.Errorf("MayCall(%s, %s.%s) = %v (%s), want %v", tc.who, tc.server, tc.tool, ok, why, tc.ok)
		}
	}
}

// A call's gate asks the role whose limit covers its amount: a payment
// of 5,000 finance-100k, one of 500,000 finance-1m (whom the first role
// could not approve), one over every limit the first role (the start then
// refuses it as undecidable); an action without amounts its first role.
func TestGateRoleCoversTheAmount(t *testing.T) {
	d := devDesk(t)
	for _, tc := range []struct {
		server, tool, args, want string
	}{
		{"payments", "pay", `{"amount": 5000, "currency": "INR"}`, "finance-100k"},
		{"payments", "pay", `{"amount": 500000, "currency": "INR"}`, "finance-1m"},
		{"payments", "pay", `{"amount": 5000000000, "currency": "INR"}`, "finance-100k"},
		{"payments", "pay", ``, "finance-100k"},
		{"slack", "slack_post_message", `{"channel": "#daily"}`, "member"},
		{"nothing", "here", `{}`, ""},
	} {
		var args plan.Object
		if tc.args != "" {
			args = plan.Object(tc.args)
		}
		if got := d.GateRole("alice-agent", tc.server, tc.tool, args); got != tc.want {
			t.Errorf("GateRole(%s.%s, %s) = %q, want %q", tc.server, tc.tool, tc.args, got, tc.want)
		}
	}
	if got := New(Config{}).GateRole("a", "payments", "pay", nil); got != "" {
		t.Errorf("without a policy: %q", got)
	}
}
