package mcpgw

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Answerer decides asks as the caller in ctx (api.Local, the one
// decision path every surface takes).
type Answerer interface {
	Decide(ctx context.Context, req *tollgatev1.DecideRequest) (*tollgatev1.DecideResponse, error)
}

// Elicitation (DESIGN.md §9b): the gateway may put a question to the
// agent's client — its person, who owns the agent — through MCP
// elicitation, and answer it as the agent, through the one decision path.
// Only a question (a choice or free text, governing no action) addressed
// to the run's requester, who is the caller: never an approval gate, and
// never an ask policy gives to anyone else. Those are decided by their
// people, elsewhere; the agent's client is never asked to stand in.
func elicitable(run *engine.Run, a *engine.AskRun, who string) bool {
	return run.Requester == who && a.State == engine.AskPending && (a.Type == plan.StopChoice || a.Type == plan.StopText) &&
		(a.Audience == "" || a.Audience == plan.AudienceRequester) && len(a.Payload) == 0
}

// canElicit reports whether the session's client takes elicitation
// requests during a call (the protocol versions before 2026-07-28, which
// moved them into the call's result).
func canElicit(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil && ip.ProtocolVersion != "" && ip.ProtocolVersion < "2026-07-28"
}

// questionsFor are run's open questions the caller's client may be asked.
func questionsFor(run *engine.Run, who string) []*engine.AskRun {
	var out []*engine.AskRun
	for _, id := range slices.Sorted(maps.Keys(run.Asks)) {
		if a := run.Asks[id]; elicitable(run, a, who) {
			out = append(out, a)
		}
	}
	return out
}

// elicit asks the client question a and, if its person answers, answers
// it as who through the one decision path. A decline, a cancel, or a
// question already answered elsewhere changes nothing.
func (g *Gateway) elicit(ctx context.Context, req *mcp.CallToolRequest, runID string, a *engine.AskRun) {
	msg := a.Title
	if a.Summary != "" {
		msg += "\n\n" + a.Summary
	}
	var schema map[string]any
	labels := map[string]string{}
	if a.Type == plan.StopText {
		schema = map[string]any{"type": "object", "required": []string{"answer"},
			"properties": map[string]any{"answer": map[string]any{"type": "string", "title": a.Title}}}
	} else {
		var enum []string
		for _, o := range a.Options {
			enum = append(enum, o.Label)
			labels[o.Label] = o.ID
		}
		schema = map[string]any{"type": "object", "required": []string{"answer"},
			"properties": map[string]any{"answer": map[string]any{"type": "string", "title": a.Title, "enum": enum}}}
	}
	res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: msg, RequestedSchema: schema})
	if err != nil || res.Action != "accept" {
		g.cfg.Log.Debug("question not answered by elicitation", "ask", a.ID, "error", err)
		return
	}
	answer, _ := res.Content["answer"].(string)
	d := &tollgatev1.DecideRequest{AskId: store.AskID(runID, a.ID)}
	if a.Type == plan.StopText {
		if strings.TrimSpace(answer) == "" {
			return
		}
		d.Decision = &tollgatev1.DecideRequest_TextAnswer{TextAnswer: &tollgatev1.TextAnswer{Text: answer}}
	} else {
		id, ok := labels[answer]
		if !ok {
			return
		}
		d.Decision = &tollgatev1.DecideRequest_Approve{Approve: &tollgatev1.Approve{OptionId: id, Reason: "answered through MCP elicitation"}}
	}
	if _, err := g.cfg.Answers.Decide(ctx, d); err != nil {
		g.cfg.Log.Info("an elicited answer was not taken", "ask", d.AskId, "error", err)
	}
}
