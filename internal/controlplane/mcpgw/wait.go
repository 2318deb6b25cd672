package mcpgw

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// RunMetaKey is the _meta key of a result that names the run behind it.
const RunMetaKey = "tollgate/run"

// await waits for run runID to end and returns its outcome, sending
// progress notifications (when the caller asked for them) each time what
// it waits for changes and every Config.Progress. The wait is a read of
// the store each time this replica commits to the run or a poll finds
// another's commit: nothing of it is in memory but the caller's
// connection, so a call cut by a restart is taken up by the same call
// with the same key. With Config.Pending, a run parked for a person
// answers at once (pendingResult).
func (g *Gateway) await(ctx context.Context, req *mcp.CallToolRequest, who, runID string) (*mcp.CallToolResult, error) {
	release, err := g.cfg.Slot(ctx)
	if err != nil {
		return g.errorResult("the call waits for its run, and", err), nil
	}
	defer release()
	if req.Session != nil && req.Extra != nil && req.Extra.TokenInfo != nil {
		// Ended when the client deletes its session (endingWaits).
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(ctx)
		defer stop()
		defer g.waits.add(req.Session.ID(), req.Extra.TokenInfo.UserID, stop)()
	}
	w := g.cfg.Runs.Follow(runID)
	defer w.Stop()
	poll := time.NewTicker(api.WatchPoll)
	defer poll.Stop()
	again := time.NewTicker(g.cfg.Progress)
	defer again.Stop()
	token := req.Params.GetProgressToken()
	said, due, n := "", false, 0.0
	local := false // woken by this replica's commit
	// Questions put to the client (elicit.go), each once per call, on
	// goroutines this wait owns: ended and waited for when it returns.
	asked := map[string]bool{}
	ectx, stopAsking := context.WithCancel(ctx)
	var asking sync.WaitGroup
	defer func() { stopAsking(); asking.Wait() }()
	elicits := canElicit(req.Session)
	for {
		var run *engine.Run
		var m *engine.Machine
		var err error
		if lr := w.Latest(); local && lr != nil && !runner.OpenAsk(lr) {
			// What this replica just committed is durable and the newest
			// it knows: no need to read it back (as WatchRun). A run
			// holding an ask is read through Get, which applies a
			// deadline that has passed (I4).
			run = lr
			m, err = g.cfg.Runs.Machine(ctx, lr.PlanDigest)
		} else {
			run, m, err = g.cfg.Runs.Get(ctx, runID)
		}
		if err != nil {
			return g.errorResult("run "+runID, err), nil
		}
		if run.State.Terminal() {
			return g.outcome(run, m.Plan()), nil
		}
		// A run parked while its ask hook runs may not wait for anyone
		// (a standing approval applies at once): not yet a wait.
		settling := run.State == engine.Parked && g.cfg.Runs.Settling(run.ID)
		if !settling {
			// Parked with no ask open (approved, its facts read again
			// before it is consumed) waits on a machine, not a person.
			if run.State == engine.Parked && g.cfg.Pending && runner.OpenAsk(run) {
				return g.pendingResult(ctx, run), nil
			}
			if run.State == engine.Parked && elicits {
				for _, a := range questionsFor(run, who) {
					if !asked[a.ID] {
						asked[a.ID] = true
						asking.Go(func() { g.elicit(ectx, req, run.ID, a) })
					}
				}
			}
			// Who may decide is asked of policy only for a caller who
			// wants progress, not on every wake of every wait.
			if token != nil {
				if msg := g.waiting(ctx, run); msg != said || due {
					n++
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: n, Message: msg}); err != nil {
						g.cfg.Log.Debug("progress not sent", "run", runID, "error", err)
					}
					said, due = msg, false
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-g.done:
			return toolError("the control plane is shutting down; call again with the same %s to get this call's outcome (run %s)", IdempotencyMetaKey, runID), nil
		case <-w.C():
			local = true
		case <-poll.C:
			local = false
		case <-again.C:
			due, local = true, false
		}
	}
}

// isCall reports whether p is the recipe of one MCP call (callRecipe).
func isCall(p *plan.Plan) bool {
	if !strings.HasPrefix(p.Name, callPlanPrefix) {
		return false
	}
	for _, st := range p.AllSteps() {
		if st.ID == callStep && st.Kind == plan.KindTool {
			return true
		}
	}
	return false
}

// callPlanPrefix starts the name of a call's plan.
const callPlanPrefix = "mcp "

// outcome is what an ended run answers its call with: for a call, the
// tool's result, or why it did not run as a tool error; for a skill, its
// steps' outputs.
func (g *Gateway) outcome(run *engine.Run, p *plan.Plan) *mcp.CallToolResult {
	var res *mcp.CallToolResult
	if isCall(p) {
		res = callOutcome(run)
	} else {
		res = runOutcome(run)
	}
	res.Meta = mcp.Meta{RunMetaKey: run.ID}
	return res
}

// callOutcome is a call run's answer.
func callOutcome(run *engine.Run) *mcp.CallToolResult {
	st := run.Steps[callStep]
	if st != nil && st.Status == engine.StatusSucceeded && (run.State == engine.Complete || run.State == engine.Partial) {
		return toolResult(st.Output)
	}
	if why := decidedAgainst(run); why != "" {
		return toolError("%s; the call did not run", why)
	}
	switch {
	case st != nil && st.Error != "":
		return toolError("the tool failed: %s", st.Error)
	case run.Reason != "":
		return toolError("the call did not complete (%s): %s", run.State, run.Reason)
	}
	return toolError("the call did not complete: its run ended %s", run.State)
}

// decidedAgainst says who rejected the run's gate and why, or that its
// deadline passed; "" when no gate ended it.
func decidedAgainst(run *engine.Run) string {
	for _, id := range slices.Sorted(maps.Keys(run.Asks)) {
		a := run.Asks[id]
		switch a.State {
		case engine.AskRejected:
			for i := len(a.Decisions) - 1; i >= 0; i-- {
				if d := a.Decisions[i]; d.Kind == engine.DecisionReject {
					if d.Reason != "" {
						return fmt.Sprintf("rejected by %s: %s", d.Actor, d.Reason)
					}
					return "rejected by " + d.Actor
				}
			}
			return "rejected"
		case engine.AskExpired:
			return fmt.Sprintf("nobody decided %q before its deadline (%s)", a.Title, a.ExpiresAt.UTC().Format(time.RFC3339))
		}
	}
	return ""
}

// toolResult is a tool's output as an MCP result: a string as text; an
// object as structured content and its JSON as text (what MCP asks of a
// tool that returns structure).
func toolResult(out json.RawMessage) *mcp.CallToolResult {
	var s string
	if json.Unmarshal(out, &s) == nil {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}}
	if len(out) > 0 && out[0] == '{' {
		res.StructuredContent = json.RawMessage(out)
	}
	return res
}

// runView is a run as the agent reads it (run_status, a skill's outcome).
type runView struct {
	Run     string                     `json:"run"`
	Plan    string                     `json:"plan"`
	State   string                     `json:"state"`
	Reason  string                     `json:"reason,omitempty"`
	Outputs map[string]json.RawMessage `json:"outputs,omitempty"`
	Errors  map[string]string          `json:"errors,omitempty"`
	Waiting []askView                  `json:"waiting,omitempty"`
}

// askView is an open ask as the agent reads it.
type askView struct {
	Ask        string    `json:"ask"`
	Title      string    `json:"title"`
	WaitingFor string    `json:"waiting_for"`
	Deadline   time.Time `json:"deadline"`
	Answer     string    `json:"answer,omitempty"` // the command that answers it
	Link       string    `json:"link,omitempty"`   // its page in the web inbox
}

// view is run as the agent reads it.
func (g *Gateway) view(ctx context.Context, run *engine.Run, name string) runView {
	v := stepsView(run)
	v.Plan, v.Waiting = name, g.openAsks(ctx, run)
	return v
}

// stepsView is run's state and its steps' outputs and errors.
func stepsView(run *engine.Run) runView {
	v := runView{Run: run.ID, State: string(run.State), Reason: run.Reason, Outputs: map[string]json.RawMessage{}, Errors: map[string]string{}}
	for id, st := range run.Steps {
		switch {
		case st.Status == engine.StatusSucceeded && len(st.Output) > 0:
			v.Outputs[id] = st.Output
		case st.Error != "":
			v.Errors[id] = st.Error
		}
	}
	return v
}

// runOutcome is a skill run's answer: its view; a tool error unless it
// completed.
func runOutcome(run *engine.Run) *mcp.CallToolResult {
	res := jsonResult(stepsView(run))
	if why := decidedAgainst(run); why != "" {
		res.Content = append([]mcp.Content{&mcp.TextContent{Text: why}}, res.Content...)
	}
	res.IsError = run.State != engine.Complete && run.State != engine.Partial
	return res
}

// jsonResult is v as structured content and as its JSON text.
func jsonResult(v any) *mcp.CallToolResult {
	b, err := json.Marshal(v)
	if err != nil {
		return toolError("the result does not encode: %v", err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}
}

// openAsks are run's open asks, each with who may decide it now, its
// deadline, and how to answer it.
func (g *Gateway) openAsks(ctx context.Context, run *engine.Run) []askView {
	var out []askView
	for _, id := range slices.Sorted(maps.Keys(run.Asks)) {
		a := run.Asks[id]
		if !a.State.Open() {
			continue
		}
		r := g.cfg.Policy.Requirement(ctx, run, a)
		who := r.Description
		if len(r.Principals) > 0 {
			who += " (" + strings.Join(r.Principals, ", ") + ")"
		}
		if len(r.Excluded) > 0 {
			who += ", not " + strings.Join(r.Excluded, " or ")
		}
		v := askView{Ask: store.AskID(run.ID, a.ID), Title: a.Title, WaitingFor: who, Deadline: a.ExpiresAt.UTC(), Answer: wire.AnswerCommand(run, a)}
		if g.cfg.AskURL != nil {
			v.Link = g.cfg.AskURL(v.Ask)
		}
		out = append(out, v)
	}
	return out
}

// waiting says in one line what the run waits for.
func (g *Gateway) waiting(ctx context.Context, run *engine.Run) string {
	switch run.State {
	case engine.Parked:
		var parts []string
		for _, a := range g.openAsks(ctx, run) {
			s := fmt.Sprintf("waiting for %s to decide %q · deadline %s · %s", a.WaitingFor, a.Title, a.Deadline.Format("2006-01-02 15:04 UTC"), a.Answer)
			if a.Link != "" {
				s += " · " + a.Link
			}
			parts = append(parts, s)
		}
		if len(parts) > 0 {
			return strings.Join(parts, "; ")
		}
		return "waiting for a person"
	case engine.Blocked:
		return "blocked: no connected executor offers what the next step needs; it runs when one does"
	}
	return "running"
}

// pendingResult answers a call that waits for a person at once: not done,
// the asks it waits on, and how to read its outcome later.
func (g *Gateway) pendingResult(ctx context.Context, run *engine.Run) *mcp.CallToolResult {
	asks := g.openAsks(ctx, run)
	v := struct {
		Pending bool      `json:"pending"`
		Run     string    `json:"run"`
		Asks    []askView `json:"asks"`
		Then    string    `json:"then"`
	}{true, run.ID, asks, fmt.Sprintf("call %s {\"run\": %q} for the outcome, or repeat this call with the same %s", ToolRunStatus, run.ID, IdempotencyMetaKey)}
	res := jsonResult(v)
	res.Content = append([]mcp.Content{&mcp.TextContent{Text: "PENDING APPROVAL, NOT DONE: " + g.waiting(ctx, run) + ". " + v.Then + "."}}, res.Content...)
	res.Meta = mcp.Meta{RunMetaKey: run.ID}
	return res
}
