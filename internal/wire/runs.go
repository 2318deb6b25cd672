package wire

import (
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

// Run renders a run with its plan card and, for each step and ask, what
// happened, as recorded. m is the run's machine; the saved skill it was
// started from is its own record's (engine.Origin). The
// plan part is the one view of the plan v holds, shared with every other
// response that carries it: callers must not modify it.
func (v *Views) Run(run *engine.Run, m *engine.Machine) *tollgatev1.Run {
	skill := run.Origin.Skill
	pv := v.of(m)
	out := &tollgatev1.Run{
		Id: run.ID, PlanDigest: run.PlanDigest, Plan: pv.plan, PlanCard: pv.card,
		Skill: skill, Requester: run.Requester, State: RunState(run.State), StateReason: run.Reason, Version: uint64(run.Version),
		CreatedAt: Time(run.CreatedAt), UpdatedAt: Time(run.UpdatedAt), ResumeCommand: resumeCommand(run), External: run.External,
		Inputs: run.Inputs, SkillVersion: run.Origin.SkillVersion, Schedule: run.Origin.Schedule,
	}
	if !run.Origin.Tick.IsZero() {
		out.ScheduleTick = Time(run.Origin.Tick)
	}
	if run.State.Terminal() {
		out.FinishedAt = Time(run.UpdatedAt)
	}
	order := stepOrder(run, m)
	for _, id := range order {
		s := run.Steps[id]
		ps := &tollgatev1.StepState{StepId: id, State: stepStatusToProto[s.Status], ApprovedByStarter: s.Grant == engine.GrantStart,
			BranchTime: durationpb.New(engine.BranchTime(s))}
		if p, ok := m.Place(id); ok {
			ps.Phase, ps.ParallelGroup = p.Phase, p.Group
		}
		if s.Grant != "" && s.Grant != engine.GrantStart {
			ps.GoverningAskId = store.AskID(run.ID, s.Grant)
		}
		for i, a := range s.Attempts {
			pa := &tollgatev1.Attempt{N: int32(a.N), Executor: a.Executor, LeaseId: a.LeaseID, QueuedAt: Time(a.QueuedAt), LeasedAt: Time(a.LeasedAt),
				StartedAt: Time(a.StartedAt), FinishedAt: Time(a.FinishedAt)}
			if a.Error != "" {
				pa.Error = &tollgatev1.StepError{Kind: tollgatev1.StepErrorKind_STEP_ERROR_KIND_TOOL, Message: a.Error}
			}
			if i == len(s.Attempts)-1 && s.Status == engine.StatusSucceeded {
				pa.OutputJson = string(s.Output)
			}
			ps.Attempts = append(ps.Attempts, pa)
		}
		out.Steps = append(out.Steps, ps)
	}
	for _, id := range slices.Sorted(maps.Keys(run.Asks)) {
		out.Asks = append(out.Asks, AskSummary(run, run.Asks[id]))
	}
	out.Fans = fanTimings(run, m, order)
	if run.State == engine.Blocked {
		var execs []Executor
		if v.Connected != nil {
			execs = v.Connected()
		}
		out.Blocked = blockedSteps(run, m, order, execs)
		if len(out.Blocked) > 0 {
			out.Executors = executorsProto(execs)
		}
		if out.StateReason == "" {
			out.StateReason = blockedSummary(run, m)
		}
	}
	return out
}

// stepOrder lists the run's steps in plan order, phase by phase in the
// order the run reached them; steps no phase lists (an ask's freshness
// probe) follow, by id.
func stepOrder(run *engine.Run, m *engine.Machine) []string {
	ids := make([]string, 0, len(run.Steps))
	for _, ph := range run.Phases {
		for _, id := range m.PhaseSteps(ph) {
			if _, ok := run.Steps[id]; ok {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == len(run.Steps) {
		return ids
	}
	listed := make(map[string]bool, len(ids))
	for _, id := range ids {
		listed[id] = true
	}
	rest := slices.Sorted(maps.Keys(run.Steps))
	if run.External {
		// A script's steps, in the order it first ran them.
		first := func(id string) time.Time {
			if at := run.Steps[id].Attempts; len(at) > 0 {
				return at[0].StartedAt
			}
			return time.Time{}
		}
		slices.SortStableFunc(rest, func(x, y string) int { return first(x).Compare(first(y)) })
	}
	for _, id := range rest {
		if !listed[id] {
			ids = append(ids, id)
		}
	}
	return ids
}

// fanTimings is the figures of every fan of the run whose branches are
// all done, in the order of steps: the engine's one computation (m.Fan),
// the same that traces and metrics report.
func fanTimings(run *engine.Run, m *engine.Machine, steps []string) []*tollgatev1.FanTiming {
	var out []*tollgatev1.FanTiming
	var seen []engine.Place
	for _, id := range steps {
		p, ok := m.Place(id)
		if !ok || p.Group == "" || slices.Contains(seen, p) {
			continue
		}
		seen = append(seen, p)
		f, done := m.Fan(run, p.Phase, p.Group)
		if !done {
			continue
		}
		out = append(out, &tollgatev1.FanTiming{Phase: f.Phase, Group: f.Group, Branches: int32(f.Branches), Steps: f.Steps,
			Wall: durationpb.New(f.Wall), BranchSum: durationpb.New(f.BranchSum), BranchMax: durationpb.New(f.BranchMax),
			Start: Time(f.Start), End: Time(f.End)})
	}
	return out
}

// resumeCommand says how to move a run that waits on people.
func resumeCommand(run *engine.Run) string {
	var cmds []string
	for _, id := range slices.Sorted(maps.Keys(run.Asks)) {
		if c := AnswerCommand(run, run.Asks[id]); c != "" {
			cmds = append(cmds, c)
		}
	}
	return strings.Join(cmds, "\n")
}

// RunSummary is one line of a run list: the stored row sr, its run as
// decoded, and the name of its plan.
func RunSummary(sr store.Run, run *engine.Run, planName string) *tollgatev1.RunSummary {
	open := 0
	for _, a := range run.Asks {
		if a.State == engine.AskPending {
			open++
		}
	}
	return &tollgatev1.RunSummary{Id: sr.ID, Skill: sr.Skill, PlanName: planName, PlanDigest: sr.PlanDigest, Requester: sr.Requester,
		State: RunState(run.State), StateReason: run.Reason, OpenAsks: int32(open), CreatedAt: Time(sr.CreatedAt), UpdatedAt: Time(sr.UpdatedAt),
		SkillVersion: run.Origin.SkillVersion, Schedule: run.Origin.Schedule}
}
