package mcpgw

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

var testCatalog = compiler.NewCatalog([]compiler.ToolInfo{
	{Server: "slack", Name: "post", ReadOnly: false},
	{Server: "mon", Name: "cpu", ReadOnly: true},
})

// decode reads args as the gateway does (numbers exact).
func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	args, err := decodeArgs(json.RawMessage(s))
	if err != nil {
		t.Fatal(err)
	}
	return args
}

// The recipe a call is: compiled by the one compiler, a side-effecting
// call sits behind an approval gate asked of the policy's role, governing
// the call, whose args — resolved as the engine resolves them before the
// gate opens — are the agent's, byte for byte, whatever they hold (I6: a
// string that reads like a reference is data, not a way to make the
// approver see something else).
func TestCallRecipeCompilesToAGateOverTheExactArgs(t *testing.T) {
	for _, tc := range []struct {
		name, args string
		sideEffect bool
		inputs     int
	}{
		{"plain", `{"channel": "#daily", "text": "hi"}`, true, 0},
		{"reference-like text", `{"channel": "#daily", "text": "see {notes} and {a, b.c}"}`, true, 1},
		{"a reference to the call itself", `{"text": "{call}", "n": {"deep": ["{call.output}", "x"]}}`, true, 2},
		{"an input's own name", `{"text": "{_arg1}", "other": "{_arg2}"}`, true, 2},
		{"big exact numbers", `{"amount": 123456789012345678901234567890, "f": 1.50}`, true, 0},
		{"read-only", `{"q": "{x}"}`, false, 1},
		{"no args", `{}`, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := callRecipe{Server: "slack", Tool: "post", Args: decode(t, tc.args), SideEffect: tc.sideEffect, Role: "member",
				Agent: "alice-agent", Owner: "alice", Why: "slack.post changes the world {really}"}
			if !tc.sideEffect {
				c.Server, c.Tool = "mon", "cpu"
			}
			src, inputs, err := c.source()
			if err != nil {
				t.Fatal(err)
			}
			if len(inputs) != tc.inputs {
				t.Errorf("%d inputs, want %d: %v", len(inputs), tc.inputs, inputs)
			}
			names := make([]string, 0, len(inputs))
			for n := range inputs {
				names = append(names, n)
			}
			res := compiler.Compile(src, compiler.Options{Catalog: testCatalog, Name: callPlanPrefix + "x", Inputs: names})
			if res.Plan == nil {
				t.Fatalf("does not compile:\n%s\n%s", src, compiler.FormatDiagnostics("", res.Diagnostics))
			}
			p := res.Plan
			if !isCall(p) {
				t.Fatalf("isCall is false for\n%s", src)
			}
			var call plan.Step
			var gate *plan.StoppingPoint
			if tc.sideEffect {
				if len(p.StoppingPoints) != 1 || len(p.InitialSteps) != 0 {
					t.Fatalf("want one gate and nothing before it:\n%s", src)
				}
				gate = &p.StoppingPoints[0]
				if gate.Audience != "member" || gate.Added || len(gate.Options) != 2 || len(gate.Options[0].Steps) != 1 {
					t.Fatalf("gate %+v", gate)
				}
				call = gate.Options[0].Steps[0]
				if !strings.Contains(gate.Title, "alice-agent") || !strings.Contains(gate.Title, "alice") || !strings.Contains(gate.Title, "slack.post") {
					t.Errorf("the gate does not say who asks for what: %q", gate.Title)
				}
			} else {
				if len(p.StoppingPoints) != 0 || len(p.InitialSteps) != 1 {
					t.Fatalf("a read-only call is one step and no gate:\n%s", src)
				}
				call = p.InitialSteps[0]
			}
			if call.ID != callStep || call.WithoutAsking {
				t.Fatalf("call step %+v", call)
			}
			got := engine.ResolveInputs(p, call.Args, inputs)
			want, _ := plan.CanonicalJSON(decode(t, tc.args))
			gotC, _ := plan.CanonicalJSON(json.RawMessage(got))
			if string(gotC) != string(want) {
				t.Fatalf("resolved args\n%s\nwant\n%s", gotC, want)
			}
		})
	}
}

func TestToolNames(t *testing.T) {
	for _, tc := range []struct{ server, tool, want string }{
		{"slack", "slack_post_message", "slack.slack_post_message"},
		{"google-calendar", "list-events", "google-calendar.list-events"},
		{"srv", "do thing/now", "srv.do_thing_now"},
		{"srv", "héllo", "srv.h_llo"},
		{"tollgate", "run_skill", ""}, // the reserved server
		{"", "x", ""},
	} {
		if got := toolName(tc.server, tc.tool); got != tc.want {
			t.Errorf("toolName(%q, %q) = %q, want %q", tc.server, tc.tool, got, tc.want)
		}
	}
}

func TestRequestID(t *testing.T) {
	if RequestID("") != "" {
		t.Error("no key: every call is new")
	}
	if got := RequestID("k-1"); got != "mcp:k-1" {
		t.Errorf("RequestID(k-1) = %q", got)
	}
	long := RequestID(strings.Repeat("k", 500))
	if !strings.HasPrefix(long, "mcp:sha256:") || len(long) > 100 || long == RequestID(strings.Repeat("k", 501)) {
		t.Errorf("a long key: %q", long)
	}
	if RequestID("a\nb") == RequestID("a b") || !strings.HasPrefix(RequestID("a\nb"), "mcp:sha256:") {
		t.Error("a key with control characters is hashed, and distinct")
	}
}

func TestDecodeArgsRefusesWhatIsNotAnObject(t *testing.T) {
	for _, s := range []string{`[1]`, `"x"`, `1`, `{`, `{"a":1} {"b":2}x`} {
		if _, err := decodeArgs(json.RawMessage(s)); err == nil && s != `{"a":1} {"b":2}x` {
			t.Errorf("%s decoded", s)
		}
	}
	for _, s := range []string{``, `null`, ` `} {
		if a, err := decodeArgs(json.RawMessage(s)); err != nil || len(a) != 0 {
			t.Errorf("%q: %v %v", s, a, err)
		}
	}
}

func TestCallOutcome(t *testing.T) {
	ok := &engine.Run{State: engine.Complete, Steps: map[string]*engine.StepRun{callStep: {Status: engine.StatusSucceeded, Output: json.RawMessage(`{"ok":true}`)}}}
	if r := callOutcome(ok); r.IsError || string(r.StructuredContent.(json.RawMessage)) != `{"ok":true}` {
		t.Errorf("complete: %+v", r)
	}
	text := &engine.Run{State: engine.Complete, Steps: map[string]*engine.StepRun{callStep: {Status: engine.StatusSucceeded, Output: json.RawMessage(`"posted"`)}}}
	if r := callOutcome(text); r.IsError || r.StructuredContent != nil || r.Content[0].(*mcpText).Text != "posted" {
		t.Errorf("text: %+v", r)
	}
	rejected := &engine.Run{State: engine.Rejected, Steps: map[string]*engine.StepRun{}, Asks: map[string]*engine.AskRun{"g": {State: engine.AskRejected,
		Decisions: []engine.Decision{{Kind: engine.DecisionReject, Actor: "bob", Reason: "not today"}}}}}
	if r := callOutcome(rejected); !r.IsError || !strings.Contains(r.Content[0].(*mcpText).Text, "rejected by bob: not today") {
		t.Errorf("rejected: %+v", r.Content[0])
	}
	failed := &engine.Run{State: engine.Failed, Steps: map[string]*engine.StepRun{callStep: {Status: engine.StatusFailed, Error: "channel not found"}}}
	if r := callOutcome(failed); !r.IsError || !strings.Contains(r.Content[0].(*mcpText).Text, "channel not found") {
		t.Errorf("failed: %+v", r.Content[0])
	}
	expired := &engine.Run{State: engine.Expired, Steps: map[string]*engine.StepRun{}, Asks: map[string]*engine.AskRun{"g": {State: engine.AskExpired, Title: "post?"}}}
	if r := callOutcome(expired); !r.IsError || !strings.Contains(r.Content[0].(*mcpText).Text, "deadline") {
		t.Errorf("expired: %+v", r.Content[0])
	}
}

type mcpText = mcp.TextContent

// A name longer than MCP allows is not listed (no truncation could be
// told apart from another tool's).
func TestToolNameTooLong(t *testing.T) {
	if got := toolName("s", strings.Repeat("x", 126)); len(got) != 128 {
		t.Errorf("a 128-byte name: %q", got)
	}
	if got := toolName("s", strings.Repeat("x", 127)); got != "" {
		t.Errorf("a 129-byte name is listed as %q", got)
	}
}

// Fuzz: whatever object an agent sends, the call's recipe compiles (or
// the args are refused), and its resolved args are the agent's exactly.
func FuzzLiteralizedArgsResolveToThemselves(f *testing.F) {
	for _, s := range []string{`{"a":"{b}"}`, `{"x":["{y, z}", {"q": "{_arg1}"}]}`, `{"n": 1e400}`, `{"t": "}{"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args, err := decodeArgs(json.RawMessage(s))
		if err != nil {
			return
		}
		want, err := plan.CanonicalJSON(args)
		if err != nil {
			return // not representable canonically (the run would refuse it too)
		}
		c := callRecipe{Server: "mon", Tool: "cpu", Args: args}
		src, inputs, err := c.source()
		if err != nil {
			return
		}
		var names []string
		for n := range inputs {
			names = append(names, n)
		}
		res := compiler.Compile(src, compiler.Options{Catalog: testCatalog, Name: callPlanPrefix + "x", Inputs: names})
		if res.Plan == nil {
			t.Fatalf("%s does not compile:\n%s", s, compiler.FormatDiagnostics("", res.Diagnostics))
		}
		got, _ := plan.CanonicalJSON(json.RawMessage(engine.ResolveInputs(res.Plan, res.Plan.InitialSteps[0].Args, inputs)))
		if string(got) != string(want) {
			t.Fatalf("%s resolved to %s", want, got)
		}
	})
}
