package mcpgw

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// callStep is the id of the one tool step a call's recipe holds.
const callStep = "call"

// callRecipe is the recipe one MCP call is: the tool step with the call's
// args (literalized: see literalize), behind an approval gate asked of
// role when the tool is side-effecting. The gate's text is the decision
// packet's words: who asks, for whom, what, and why it needs approval;
// its payload (the args) is the engine's. Names are cleaned of what the
// recipe grammar reads (braces, newlines).
type callRecipe struct {
	Server, Tool string
	Args         map[string]any
	SideEffect   bool
	Role         string // the gate's audience: the role policy gives the tool's action
	Agent, Owner string
	Why          string // why it needs approval
}

// source returns the recipe text and the run inputs the literalized args
// read.
func (c callRecipe) source() (string, map[string]string, error) {
	args, inputs := literalize(c.Args)
	js, err := json.Marshal(args)
	if err != nil {
		return "", nil, fmt.Errorf("args: %w", err)
	}
	var b strings.Builder
	if c.SideEffect {
		who := clean(c.Agent)
		if o := clean(c.Owner); o != "" && o != who {
			who += " (an agent " + o + " owns)"
		}
		fmt.Fprintf(&b, "ask %s:\n  %s asks through MCP to call %s.%s with these exact args. Approve?\n", c.Role, who, c.Server, c.Tool)
		if c.Why != "" {
			fmt.Fprintf(&b, "  summary: %s\n", clean(c.Why))
		}
	}
	fmt.Fprintf(&b, "%s: %s.%s %s\n", callStep, c.Server, c.Tool, js)
	return b.String(), inputs, nil
}

// clean makes s safe inside a recipe line: no braces (a reference), no
// line breaks, bounded.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		switch r {
		case '{', '}', '\n', '\r':
			return ' '
		}
		return r
	}, s)
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.TrimSpace(s)
}

// literalize returns args with every string value that holds something
// the recipe language would read as a reference ({id}, {a, b}) replaced
// by a reference to a run input holding that string, and those inputs.
// An input's value is data to the engine (engine.ResolveInputs): the tool
// gets the agent's string byte for byte, and the approver sees it so in
// the payload, which is resolved before the gate opens. Keys are never
// references and are left alone.
func literalize(args map[string]any) (map[string]any, map[string]string) {
	inputs := map[string]string{}
	var walk func(v any) any
	walk = func(v any) any {
		switch t := v.(type) {
		case string:
			if len(plan.ScanRefs(t)) == 0 {
				return t
			}
			name := "_arg" + strconv.Itoa(len(inputs)+1)
			inputs[name] = t
			return "{" + name + "}"
		case map[string]any:
			out := make(map[string]any, len(t))
			for _, k := range slices.Sorted(maps.Keys(t)) { // numbered in a stable order
				out[k] = walk(t[k])
			}
			return out
		case []any:
			out := make([]any, len(t))
			for i, e := range t {
				out[i] = walk(e)
			}
			return out
		}
		return v
	}
	out, _ := walk(args).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	if len(inputs) == 0 {
		inputs = nil
	}
	return out, inputs
}
