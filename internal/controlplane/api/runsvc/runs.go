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
	if err := api.InputsTooLarge(req.GetInputs()); err != nil {
		return nil, err
	}
	src, name := req.GetRecipe(), req.GetName()
	if sk := req.GetSkill(); sk != "" {
		text, ok := s.cfg.Skills.Skill(sk)
		if !ok {
			return nil, fmt.Errorf("no skill named %q: %w", limits.Short(sk), errkind.NotFound)
		}
		src, name = text, sk
	}
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("start: give a skill or a recipe: %w", errkind.Invalid)
	}
	if name == "" {
		name = "recipe"
	}
	if err := checkInputNames(req.GetInputs()); err != nil {
		return nil, err
	}
	res := s.compile(src, name, req.GetInputs())
	if res.Plan == nil {
		return nil, fmt.Errorf("the recipe does not compile:\n%s%w", compiler.FormatDiagnostics("", res.Diagnostics), errkind.Invalid)
	}
	if err := s.checkInputArgs(res.Plan, req.GetInputs()); err != nil {
		return nil, err
	}
	if d := req.GetExpectedPlanDigest(); d != "" && d != res.Digest {
		return nil, fmt.Errorf("the plan is now %s, not the %s you reviewed: %w", res.Digest, d, errkind.StalePayload)
	}
	// Policy's judgement of a new run: a retry of one already started is
	// answered with it (Runner.Start), whatever policy says now.
	admit := func(ctx context.Context) error {
		for _, st := range res.Plan.AllSteps() {
			if st.SideEffect && st.WithoutAsking {
				// Judged on the args it will run with: the compiler lets its
				// args read only the run's inputs, which are known now.
				if why, ok := s.cfg.Approvals.MayStartUnasked(ctx, who, res.Plan, st, req.GetInputs()); !ok {
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
	run, created, err := s.cfg.Runner.Start(ctx, runner.StartRequest{Plan: res.Plan, Digest: res.Digest, Skill: req.GetSkill(), Requester: who, RequestID: req.GetRequestId(), Inputs: req.GetInputs(), Admit: admit})
	if err != nil {
		return nil, err
	}
	m, err := s.cfg.Runner.Machine(ctx, run.PlanDigest)
	if err != nil {
		return nil, err
	}
	return &tollgatev1.StartRunResponse{Run: s.cfg.Views.Run(run, m, req.GetSkill()), Created: created}, nil
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
	sr, err := s.cfg.Store.GetRun(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	return &tollgatev1.GetRunResponse{Run: s.cfg.Views.Run(run, m, sr.Skill)}, nil
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
	return &tollgatev1.CancelRunResponse{Run: s.cfg.Views.Run(tr.Run, m, ""), Report: wire.CancellationReport(m, run, tr.Run)}, nil
}
