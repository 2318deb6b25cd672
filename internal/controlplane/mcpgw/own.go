package mcpgw

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/internal/controlplane/api/runsvc"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// maxPendingRuns bounds the parked runs pending_asks reads.
const maxPendingRuns = 100

// addOwnTools lists Tollgate's own tools on s: every caller may use them,
// on their own runs (or those policy lets them see).
func (g *Gateway) addOwnTools(s *mcp.Server) {
	s.AddTool(&mcp.Tool{Name: ToolRunSkill, Title: "Run a Tollgate skill",
		Description: "Start a run of a saved skill by name (optionally a version, and named string inputs) and wait for it: its gates wait for the people policy names, as any run's do. Returns each step's output, or why it did not complete.",
		InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["skill"],"properties":{` +
			`"skill":{"type":"string","description":"the skill's name"},` +
			`"version":{"type":"integer","minimum":1,"description":"a version to run (default: the latest)"},` +
			`"inputs":{"type":"object","additionalProperties":{"type":"string"},"description":"the run's named inputs"}}}`),
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)}}, g.runSkill)
	s.AddTool(&mcp.Tool{Name: ToolRunStatus, Title: "A Tollgate run's status",
		Description: "Read a run you started (or may see): its state, its steps' outputs, and who each open ask waits for. For a call that answered 'pending approval', an ended run returns the call's own outcome. Accepts a run id or an ask id (RUN/ASK).",
		InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["run"],"properties":{"run":{"type":"string","description":"a run id, or an ask id RUN/ASK"}}}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}}, g.runStatus)
	s.AddTool(&mcp.Tool{Name: ToolPendingAsks, Title: "Your pending Tollgate asks",
		Description: "List the asks your runs wait on: what each asks, who may decide it, its deadline, and where it is answered.",
		InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{}}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}}, g.pendingAsks)
}

func ptr[T any](v T) *T { return &v }

// runSkill starts a skill's run as the caller and waits for it.
func (g *Gateway) runSkill(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, p, err := caller(ctx, req)
	if err != nil {
		return nil, err
	}
	var in struct {
		Skill   string            `json:"skill"`
		Version int64             `json:"version"`
		Inputs  map[string]string `json:"inputs"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.Skill == "" {
		return toolError(`give {"skill": NAME}, and optionally "version" (an integer) and "inputs" (names to strings)`), nil
	}
	key, err := idempotencyKey(req)
	if err != nil {
		return toolError("%v", err), nil
	}
	run, _, _, err := g.cfg.Starter.Start(ctx, p.Subject, runsvc.Start{RequestID: RequestID(key), Skill: in.Skill, SkillVersion: in.Version, Inputs: in.Inputs})
	if err != nil {
		return g.errorResult("the skill "+in.Skill+" was not started", err), nil
	}
	return g.await(ctx, req, p.Subject, run.ID)
}

// runStatus reads a run the caller may see: an ended one's outcome, or
// what it waits for.
func (g *Gateway) runStatus(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, p, err := caller(ctx, req)
	if err != nil {
		return nil, err
	}
	var in struct {
		Run string `json:"run"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.Run == "" {
		return toolError(`give {"run": RUN_ID}`), nil
	}
	id, _, _ := strings.Cut(in.Run, "/")
	run, m, err := g.cfg.Runs.Get(ctx, id)
	if err == nil && !g.cfg.Readers.Sees(ctx, p.Subject, run) {
		err = fmt.Errorf("run %s: %w", id, store.ErrNotFound) // as for a run never made
	}
	if err != nil {
		return g.errorResult("run "+id, err), nil
	}
	if run.State.Terminal() {
		return g.outcome(run, m.Plan()), nil
	}
	v := g.view(ctx, run, m.Plan().Name)
	res := jsonResult(v)
	res.Content = append([]mcp.Content{&mcp.TextContent{Text: "NOT DONE: " + g.waiting(ctx, run)}}, res.Content...)
	return res, nil
}

// pendingAsks lists the open asks of the caller's parked runs.
func (g *Gateway) pendingAsks(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, p, err := caller(ctx, req)
	if err != nil {
		return nil, err
	}
	runs, _, err := g.cfg.Lister.ListRuns(ctx, store.RunQuery{Requester: p.Subject, States: []string{string(engine.Parked)}, Limit: maxPendingRuns})
	if err != nil {
		return g.errorResult("your runs", err), nil
	}
	asks := []askView{}
	for _, sr := range runs {
		run, _, err := g.cfg.Runs.Get(ctx, sr.ID) // deadlines applied
		if err != nil {
			return g.errorResult("run "+sr.ID, err), nil
		}
		asks = append(asks, g.openAsks(ctx, run)...)
	}
	return jsonResult(struct {
		Asks []askView `json:"asks"`
	}{asks}), nil
}
