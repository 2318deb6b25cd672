package runsvc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/controlplane/skills"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/limits"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// StartRun compiles (a skill or a recipe) and starts a run. A repeated
// request_id returns the run it first created, with created = false, if
// the request is the same (Runner.Start); ALREADY_EXISTS if not.
func (s *Service) StartRun(ctx context.Context, req *tollgatev1.StartRunRequest) (*tollgatev1.StartRunResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(req.GetRequestId(), ReservedRequestPrefix) {
		return nil, fmt.Errorf("request_id %q: ids starting %q are the schedules' own; use another: %w", limits.Short(req.GetRequestId()), ReservedRequestPrefix, errkind.Invalid)
	}
	if strings.HasPrefix(req.GetRequestId(), MCPRequestPrefix) {
		// A key an agent gave the MCP gateway names the call's run; a
		// start through the API must not take (or answer for) it.
		return nil, fmt.Errorf("request_id %q: ids starting %q are the MCP gateway's own; use another: %w", limits.Short(req.GetRequestId()), MCPRequestPrefix, errkind.Invalid)
	}
	run, m, created, err := s.Start(ctx, who, Start{RequestID: req.GetRequestId(), Skill: req.GetSkill(), SkillVersion: req.GetSkillVersion(),
		Recipe: req.GetRecipe(), Name: req.GetName(), Inputs: req.GetInputs(), ExpectedPlanDigest: req.GetExpectedPlanDigest()})
	if err != nil {
		return nil, err
	}
	return &tollgatev1.StartRunResponse{Run: s.cfg.Views.Run(run, m), Created: created}, nil
}

// ReservedRequestPrefix starts the request ids of the runs schedules
// start (schedules.RequestID): a caller may not take a future tick's id.
const ReservedRequestPrefix = "schedule:"

// MCPRequestPrefix starts the request ids of the runs the MCP gateway
// starts for calls (mcpgw.RequestID).
const MCPRequestPrefix = "mcp:"

// Start is a run to start: a saved skill (a version of it, or its
// latest) or a recipe, and, for a schedule's tick, the schedule.
type Start struct {
	RequestID          string
	Skill              string
	SkillVersion       int64
	Recipe, Name       string
	Inputs             map[string]string
	ExpectedPlanDigest string
	// Schedule and Tick: the schedule whose tick starts it (the caller
	// is then the schedule's RunAs).
	Schedule string
	Tick     time.Time
}

// Start is the one way a run starts, for every caller of StartRun and
// for schedules: compiled with the one compiler, judged by policy as who
// (who may decide its gates; whether who may approve its unasked steps
// by starting it), and started through the runner with its origin.
func (s *Service) Start(ctx context.Context, who string, in Start) (*engine.Run, *engine.Machine, bool, error) {
	if err := api.InputsTooLarge(in.Inputs); err != nil {
		return nil, nil, false, err
	}
	src, name := in.Recipe, in.Name
	origin := engine.Origin{Schedule: in.Schedule, Tick: in.Tick}
	// Who vouches for the steps a start approves: the caller, who sees
	// what she starts. A schedule that follows a skill's latest version
	// starts whatever was published last, so only a version its identity
	// published, or the operator's skills directory, or one it pinned,
	// may have its unasked steps approved in that identity's name.
	unaskedBy := ""
	if in.Skill != "" {
		v, err := s.cfg.Skills.Runnable(ctx, in.Skill, in.SkillVersion)
		if err != nil {
			return nil, nil, false, err
		}
		src, name = v.Source, v.Name
		origin.Skill, origin.SkillVersion = v.Name, v.Version
		if in.Schedule != "" && in.SkillVersion == 0 && v.Author != who && v.Origin != skills.OriginDir {
			unaskedBy = v.Author
		}
	} else if in.SkillVersion != 0 {
		return nil, nil, false, fmt.Errorf("start: skill_version without a skill: %w", errkind.Invalid)
	}
	if strings.TrimSpace(src) == "" {
		return nil, nil, false, fmt.Errorf("start: give a skill or a recipe: %w", errkind.Invalid)
	}
	if name == "" {
		name = "recipe"
	}
	if err := checkInputNames(in.Inputs); err != nil {
		return nil, nil, false, err
	}
	res := s.compile(src, name, in.Inputs)
	if res.Plan == nil {
		return nil, nil, false, fmt.Errorf("the recipe does not compile:\n%s%w", compiler.FormatDiagnostics("", res.Diagnostics), errkind.Invalid)
	}
	if err := s.checkInputArgs(res.Plan, in.Inputs); err != nil {
		return nil, nil, false, err
	}
	if d := in.ExpectedPlanDigest; d != "" && d != res.Digest {
		return nil, nil, false, fmt.Errorf("the plan is now %s, not the %s you reviewed: %w", res.Digest, d, errkind.StalePayload)
	}
	// Policy's judgement of a new run: a retry of one already started is
	// answered with it (Runner.Start), whatever policy says now.
	admit := func(ctx context.Context) error {
		for _, st := range res.Plan.AllSteps() {
			if st.SideEffect && st.WithoutAsking && unaskedBy != "" {
				return fmt.Errorf("the schedule %s follows the latest version of %s, and version %d was published by %s, not %s, whom it runs as: a schedule starts `without asking` steps only of a version its identity published or pinned (approvectl schedules add … --skill %s@%d --replace, once %s has read it): %w",
					in.Schedule, origin.Skill, origin.SkillVersion, unaskedBy, who, origin.Skill, origin.SkillVersion, who, errkind.Denied)
			}
			if st.SideEffect && st.WithoutAsking {
				// Judged on the args it will run with: the compiler lets its
				// args read only the run's inputs, which are known now.
				if why, ok := s.cfg.Approvals.MayStartUnasked(ctx, who, res.Plan, st, in.Inputs); !ok {
					if in.Schedule != "" {
						return fmt.Errorf("%s, whom the schedule %s runs as, may not approve %s (%s·%s) by starting the run (%s); a schedule approves nothing on anyone's behalf: remove `without asking` so it asks first: %w", who, in.Schedule, st.ID, st.Server, st.Tool, why, errkind.Denied)
					}
					return fmt.Errorf("%s may not approve %s (%s·%s) by starting the run (%s); remove `without asking` so it asks first: %w", who, st.ID, st.Server, st.Tool, why, errkind.Denied)
				}
			}
		}
		// A gate nobody could decide is refused now, with the rows to add,
		// never parked for the first approver to find (issue 16).
		if err := s.cfg.Approvals.CheckStart(ctx, who, res.Plan); err != nil {
			return err
		}
		return nil
	}
	run, created, err := s.cfg.Runner.Start(ctx, runner.StartRequest{Plan: res.Plan, Digest: res.Digest, Origin: origin, Requester: who, RequestID: in.RequestID, Inputs: in.Inputs, Admit: admit})
	if err != nil {
		return nil, nil, false, err
	}
	m, err := s.cfg.Runner.Machine(ctx, run.PlanDigest)
	if err != nil {
		return nil, nil, false, err
	}
	return run, m, created, nil
}

// checkInputArgs refuses a start whose inputs make a tool call's args
// ones its input schema refuses: the compiler checked the literal args, and
// a call whose args are then all known (literals and inputs) would only
// fail when its ask opens. Args that read earlier steps are checked
// before their ask opens (engine.Config.CheckArgs).
func (s *Service) checkInputArgs(p *plan.Plan, inputs map[string]string) error {
	if len(p.Inputs) == 0 {
		return nil
	}
	cat := s.cfg.Catalog()
	for _, st := range p.AllSteps() {
		if st.Kind != plan.KindTool {
			continue
		}
		refs, _ := plan.ObjectRefs(st.Args)
		if len(refs) == 0 {
			continue // literal only: the compiler checked it
		}
		if slices.ContainsFunc(refs, func(r plan.Ref) bool { return !slices.Contains(p.Inputs, r.ID) }) {
			continue // reads an earlier step: checked before its ask opens
		}
		// An input's value is data, braces and all.
		args := engine.ResolveInputs(p, st.Args, inputs)
		if err := cat.CheckArgs(st.Server, st.Tool, args); err != nil {
			return fmt.Errorf("`%s` (%s·%s) cannot run with the inputs given (%v), so no run was started: %w", st.ID, st.Server, st.Tool, err, errkind.Invalid)
		}
	}
	return nil
}

// GetRun returns a run; deadlines that passed are applied first (I4).
func (s *Service) GetRun(ctx context.Context, req *tollgatev1.GetRunRequest) (*tollgatev1.GetRunResponse, error) {
	_, run, m, err := s.cfg.Readers.CallersRun(ctx, req.GetRunId())
	if err != nil {
		return nil, err
	}
	return &tollgatev1.GetRunResponse{Run: s.cfg.Views.Run(run, m)}, nil
}

// ListRuns lists the runs the caller may see, newest first; a page may
// hold fewer runs than asked for (api/readers.go).
func (s *Service) ListRuns(ctx context.Context, req *tollgatev1.ListRunsRequest) (*tollgatev1.ListRunsResponse, error) {
	who, err := api.Caller(ctx)
	if err != nil {
		return nil, err
	}
	q := store.RunQuery{Requester: req.GetRequester(), Limit: int(req.GetPageSize()), PageToken: req.GetPageToken()}
	for _, st := range req.GetStates() {
		es, ok := wire.RunStateFromProto(st)
		if !ok {
			return nil, fmt.Errorf("state %v: %w", st, errkind.Invalid)
		}
		q.States = append(q.States, string(es))
	}
	runs, next, err := s.cfg.Store.ListRuns(ctx, q)
	if err != nil {
		return nil, err
	}
	out := &tollgatev1.ListRunsResponse{NextPageToken: next}
	for _, sr := range runs {
		if req.GetSkill() != "" && sr.Skill != req.GetSkill() {
			continue
		}
		run, m, err := s.cfg.Runner.Get(ctx, sr.ID)
		if err != nil {
			return nil, err
		}
		if req.GetSchedule() != "" && run.Origin.Schedule != req.GetSchedule() {
			continue
		}
		if !s.cfg.Readers.Sees(ctx, who, run) {
			continue
		}
		out.Runs = append(out.Runs, wire.RunSummary(sr, run, m.Plan().Name))
	}
	return out, nil
}

// CancelRun cancels a run and closes its asks in the same commit (I3).
// Only the requester may cancel.
func (s *Service) CancelRun(ctx context.Context, req *tollgatev1.CancelRunRequest) (*tollgatev1.CancelRunResponse, error) {
	who, run, _, err := s.cfg.Readers.CallersRun(ctx, req.GetRunId())
	if err != nil {
		return nil, err
	}
	if run.Requester != who {
		return nil, fmt.Errorf("only the requester (%s) may cancel run %s: %w", run.Requester, run.ID, errkind.Denied)
	}
	tr, err := s.cfg.Runner.Event(ctx, run.ID, func(now time.Time) engine.Event {
		return engine.Cancel{Actor: who, Reason: req.GetReason(), At: now}
	})
	if err != nil {
		return nil, err
	}
	m, err := s.cfg.Runner.Machine(ctx, tr.Run.PlanDigest)
	if err != nil {
		return nil, err
	}
	return &tollgatev1.CancelRunResponse{Run: s.cfg.Views.Run(tr.Run, m), Report: wire.CancellationReport(m, run, tr.Run)}, nil
}
