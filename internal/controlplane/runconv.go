package controlplane

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/runner"
	"github.com/tollgate-dev/tollgate/internal/lru"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/compiler"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

var runStateToProto = map[engine.State]tollgatev1.RunState{
	engine.Running: tollgatev1.RunState_RUN_STATE_RUNNING, engine.Parked: tollgatev1.RunState_RUN_STATE_PARKED,
	engine.Blocked: tollgatev1.RunState_RUN_STATE_BLOCKED, engine.Complete: tollgatev1.RunState_RUN_STATE_COMPLETE,
	engine.Partial: tollgatev1.RunState_RUN_STATE_PARTIAL, engine.Failed: tollgatev1.RunState_RUN_STATE_FAILED,
	engine.Cancelled: tollgatev1.RunState_RUN_STATE_CANCELLED, engine.Rejected: tollgatev1.RunState_RUN_STATE_REJECTED,
	engine.Expired: tollgatev1.RunState_RUN_STATE_EXPIRED,
}

var runStateFromProto = invert(runStateToProto)

var stepStatusToProto = map[engine.StepStatus]tollgatev1.StepStatus{
	engine.StatusWaiting: tollgatev1.StepStatus_STEP_STATUS_WAITING, engine.StatusQueued: tollgatev1.StepStatus_STEP_STATUS_RUNNABLE,
	engine.StatusLeased: tollgatev1.StepStatus_STEP_STATUS_LEASED, engine.StatusStarted: tollgatev1.StepStatus_STEP_STATUS_STARTED,
	engine.StatusSucceeded: tollgatev1.StepStatus_STEP_STATUS_SUCCEEDED, engine.StatusFailed: tollgatev1.StepStatus_STEP_STATUS_FAILED,
	engine.StatusCancelled: tollgatev1.StepStatus_STEP_STATUS_CANCELLED, engine.StatusInDoubt: tollgatev1.StepStatus_STEP_STATUS_IN_DOUBT,
}

var askStateToProto = map[engine.AskState]tollgatev1.AskState{
	engine.AskPending: tollgatev1.AskState_ASK_STATE_PENDING, engine.AskApproved: tollgatev1.AskState_ASK_STATE_APPROVED,
	engine.AskConsumed: tollgatev1.AskState_ASK_STATE_CONSUMED, engine.AskAnswered: tollgatev1.AskState_ASK_STATE_ANSWERED,
	engine.AskRejected: tollgatev1.AskState_ASK_STATE_REJECTED, engine.AskExpired: tollgatev1.AskState_ASK_STATE_EXPIRED,
	engine.AskCancelled: tollgatev1.AskState_ASK_STATE_CANCELLED, engine.AskStale: tollgatev1.AskState_ASK_STATE_STALE,
	engine.AskEvidenceRequested: tollgatev1.AskState_ASK_STATE_EVIDENCE_REQUESTED,
}

var askStateFromProto = invert(askStateToProto)

var askKindToProto = map[plan.StopType]tollgatev1.AskKind{
	plan.StopMenu: tollgatev1.AskKind_ASK_KIND_APPROVAL, plan.StopChoice: tollgatev1.AskKind_ASK_KIND_CHOICE, plan.StopText: tollgatev1.AskKind_ASK_KIND_TEXT,
	engine.InDoubt: tollgatev1.AskKind_ASK_KIND_IN_DOUBT, engine.Gate: tollgatev1.AskKind_ASK_KIND_GATE,
}

var decisionKindToProto = map[string]tollgatev1.DecisionKind{
	"approve": tollgatev1.DecisionKind_DECISION_KIND_APPROVE, "reject": tollgatev1.DecisionKind_DECISION_KIND_REJECT,
	"answer": tollgatev1.DecisionKind_DECISION_KIND_ANSWER, "amend": tollgatev1.DecisionKind_DECISION_KIND_AMEND,
	"revoke": tollgatev1.DecisionKind_DECISION_KIND_REVOKE, "request_evidence": tollgatev1.DecisionKind_DECISION_KIND_REQUEST_EVIDENCE,
	"delegate": tollgatev1.DecisionKind_DECISION_KIND_DELEGATE, "expire": tollgatev1.DecisionKind_DECISION_KIND_EXPIRE,
	"cancel": tollgatev1.DecisionKind_DECISION_KIND_CANCEL, "stale": tollgatev1.DecisionKind_DECISION_KIND_STALE,
	"escalate": tollgatev1.DecisionKind_DECISION_KIND_ESCALATE, "evidence": tollgatev1.DecisionKind_DECISION_KIND_EVIDENCE_ATTACHED,
}

// quorum is how many distinct approvals the ask needs (at least one).
func quorum(a *engine.AskRun) int32 { return int32(max(a.Quorum, 1)) }

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// runToProto renders a run with its plan card and, for each step and ask,
// what happened.
func runToProto(run *engine.Run, m *engine.Machine, skill string) *tollgatev1.Run {
	pv := planViewOf(m)
	out := &tollgatev1.Run{
		Id: run.ID, PlanDigest: run.PlanDigest, Plan: pv.plan, PlanCard: pv.card,
		Skill: skill, Requester: run.Requester, State: runStateToProto[run.State], StateReason: run.Reason, Version: uint64(run.Version),
		CreatedAt: ts(run.CreatedAt), UpdatedAt: ts(run.UpdatedAt), ResumeCommand: resumeCommand(run), External: run.External,
		Inputs: run.Inputs,
	}
	if run.State.Terminal() {
		out.FinishedAt = ts(run.UpdatedAt)
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
			pa := &tollgatev1.Attempt{N: int32(a.N), Executor: a.Executor, LeaseId: a.LeaseID, QueuedAt: ts(a.QueuedAt), LeasedAt: ts(a.LeasedAt),
				StartedAt: ts(a.StartedAt), FinishedAt: ts(a.FinishedAt)}
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
		out.Asks = append(out.Asks, askSummary(run, run.Asks[id], skill))
	}
	out.Fans = fanTimings(run, m, order)
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
			Start: ts(f.Start), End: ts(f.End)})
	}
	return out
}

// planView is a plan as every run of it shows it. It is built once per
// plan and shared by the responses that carry it, which only read it.
type planView struct {
	plan *tollgatev1.Plan
	card string
}

// planViews caches plan views by digest (plans are immutable), least
// recently used evicted. It is the one cache of the package not owned by a
// Runner or Services (the views are pure functions of a plan, shared by
// every server in the process), so its bound is fixed: DefaultPlanCache.
var planViews = lru.New[string, planView](runner.DefaultPlanCache)

func planViewOf(m *engine.Machine) planView {
	if v, ok := planViews.Get(m.Digest()); ok {
		return v
	}
	v := planView{plan: planToProto(m.Plan(), m.Digest()), card: compiler.Card(m.Plan(), m.Digest(), nil)}
	planViews.Add(m.Digest(), v)
	return v
}

func askSummary(run *engine.Run, a *engine.AskRun, skill string) *tollgatev1.AskSummary {
	s := &tollgatev1.AskSummary{Id: store.AskID(run.ID, a.ID), RunId: run.ID, StoppingPointId: a.ID, Kind: askKindToProto[a.Type],
		State: askStateToProto[a.State], Title: a.Title, Requester: run.Requester, Skill: skill, Consequence: consequence(a),
		Quorum: quorum(a), CreatedAt: ts(a.OpenedAt), ExpiresAt: ts(a.ExpiresAt), ClosedAt: ts(a.Closed), PayloadDigest: a.PayloadDigest(),
		AnswerCommand: answerCommand(run, a)}
	if a.State == engine.AskPending {
		s.Approvals = int32(len(a.Votes))
	} else if a.State == engine.AskApproved || a.State == engine.AskConsumed || a.State == engine.AskAnswered {
		s.Approvals = quorum(a)
	}
	return s
}

// consequence says in plain words what approving does.
func consequence(a *engine.AskRun) string {
	switch a.Type {
	case plan.StopChoice:
		return "your choice is passed to the steps that follow"
	case plan.StopText:
		return "your answer is passed to the steps that follow"
	case engine.InDoubt:
		return "retry runs " + a.Step + " again (it may then have happened twice); it ran treats it as done; stop ends the run"
	}
	if len(a.Payload) == 0 {
		return "approving lets the run continue; No ends it rejected"
	}
	var acts []string
	for _, p := range a.Payload {
		acts = append(acts, fmt.Sprintf("%s·%s %s", p.Server, p.Tool, string(p.Args)))
	}
	return "approving runs " + strings.Join(acts, " and ") + " exactly as shown; No ends the run rejected"
}

// askToProto renders the whole decision packet.
func askToProto(run *engine.Run, a *engine.AskRun, skill string) *tollgatev1.Ask {
	out := &tollgatev1.Ask{Id: store.AskID(run.ID, a.ID), RunId: run.ID, StoppingPointId: a.ID, Kind: askKindToProto[a.Type],
		State: askStateToProto[a.State], Title: a.Title, Consequence: consequence(a), Requester: run.Requester,
		PayloadDigest: a.PayloadDigest(), CreatedAt: ts(a.OpenedAt), ExpiresAt: ts(a.ExpiresAt), OnExpiry: expiryToProto[a.OnExpiry],
		Quorum: quorum(a), SelectedOptionId: a.Option, AnswerText: a.Text, MissCount: int32(a.Misses), ClosedAt: ts(a.Closed),
		AnswerCommand: answerCommand(run, a), ResourceVersion: a.ResourceVersion, MaterialFields: a.Material, StateReason: stateReason(a),
		EscalatedTo: a.EscalatedTo, EvidenceDigest: a.EvidenceDigest()}
	for _, e := range a.Evidence {
		out.Evidence = append(out.Evidence, &tollgatev1.EvidenceArtifact{Ref: e.Ref, Name: e.Name, MediaType: e.MediaType, Content: e.Content,
			Digest: e.Digest, AttachedBy: e.AttachedBy})
	}
	if !a.RemindAt.IsZero() {
		out.RemindAt = ts(a.RemindAt)
	}
	if !a.EscalateAt.IsZero() && a.EscalatedTo == "" {
		out.EscalateAt = ts(a.EscalateAt)
	}
	for _, b := range a.Amend {
		out.Amendable = append(out.Amendable, &tollgatev1.AmendBound{Field: b.Field, Min: b.Min, Max: b.Max})
	}
	for i := len(a.Decisions) - 1; i >= 0 && out.PolicyVersion == ""; i-- {
		out.PolicyVersion = a.Decisions[i].Policy
	}
	if a.Audience != "" && a.Audience != plan.AudienceRequester {
		out.AuthorityRequired = &tollgatev1.AuthorityRequirement{}
	}
	for _, p := range a.Payload {
		out.GovernedStepIds = append(out.GovernedStepIds, p.Step)
		out.Actions = append(out.Actions, &tollgatev1.Action{StepId: p.Step, Server: p.Server, Tool: p.Tool, ArgsJson: string(p.Args), PayloadDigest: p.Digest})
	}
	for _, o := range a.Options {
		out.Options = append(out.Options, &tollgatev1.AskOption{Id: o.ID, Label: o.Label, Proceeds: !((a.Type == plan.StopMenu || a.Type == engine.Gate) && strings.EqualFold(o.Label, "no"))})
	}
	for _, d := range a.Decisions {
		out.Decisions = append(out.Decisions, &tollgatev1.Decision{Kind: decisionKindToProto[d.Kind], Actor: d.Actor, Time: ts(d.At),
			Reason: d.Reason, OptionId: d.Option, AnswerText: d.Text, PayloadDigest: a.PayloadDigest(), Counts: d.Kind != "expire" && d.Kind != "cancel",
			Authority: d.Why, PolicyVersion: d.Policy, EvidenceRequest: evidenceRequest(d), DelegateTo: delegateTo(d)})
	}
	return out
}

// stateReason says in words why the ask is in its state.
func stateReason(a *engine.AskRun) string {
	switch {
	case a.State == engine.AskStale:
		return "changed after it was approved: " + a.Stale
	case a.Verifying:
		return "approved; checking the facts are unchanged before it is used"
	case a.State == engine.AskEvidenceRequested:
		return "evidence requested: " + a.EvidenceWanted + " (the requester attaches it with approvectl evidence)"
	case a.State == engine.AskRejected || a.State == engine.AskExpired || a.State == engine.AskCancelled:
		if n := len(a.Decisions); n > 0 {
			return a.Decisions[n-1].Reason
		}
	}
	return ""
}

// answerCommand is the exact command that answers a pending ask.
func answerCommand(run *engine.Run, a *engine.AskRun) string {
	if a.State != engine.AskPending {
		return ""
	}
	id := store.AskID(run.ID, a.ID)
	switch a.Type {
	case plan.StopText:
		return fmt.Sprintf("approvectl answer %s 'your answer'", id)
	case plan.StopChoice, engine.InDoubt:
		return fmt.Sprintf("approvectl approve %s --option N   (options: %s)", id, optionWords(a))
	}
	return fmt.Sprintf("approvectl approve %s   or   approvectl reject %s --reason TEXT", id, id)
}

func optionWords(a *engine.AskRun) string {
	var parts []string
	for _, o := range a.Options {
		parts = append(parts, o.ID+" "+o.Label)
	}
	return strings.Join(parts, ", ")
}

// resumeCommand says how to move a run that waits on people.
func resumeCommand(run *engine.Run) string {
	var cmds []string
	for _, id := range slices.Sorted(maps.Keys(run.Asks)) {
		if c := answerCommand(run, run.Asks[id]); c != "" {
			cmds = append(cmds, c)
		}
	}
	return strings.Join(cmds, "\n")
}

func runSummary(sr store.Run, run *engine.Run, planName string) *tollgatev1.RunSummary {
	open := 0
	for _, a := range run.Asks {
		if a.State == engine.AskPending {
			open++
		}
	}
	return &tollgatev1.RunSummary{Id: sr.ID, Skill: sr.Skill, PlanName: planName, PlanDigest: sr.PlanDigest, Requester: sr.Requester,
		State: runStateToProto[run.State], StateReason: run.Reason, OpenAsks: int32(open), CreatedAt: ts(sr.CreatedAt), UpdatedAt: ts(sr.UpdatedAt)}
}

// stepsOf lists every step of a plan, at any depth.
func stepsOf(p *plan.Plan) []plan.Step {
	var out []plan.Step
	var walk func(steps []plan.Step, stops []plan.StoppingPoint)
	walk = func(steps []plan.Step, stops []plan.StoppingPoint) {
		out = append(out, steps...)
		for _, sp := range stops {
			for _, o := range sp.Options {
				walk(o.Steps, o.StoppingPoints)
			}
			if sp.Then != nil {
				walk(sp.Then.Steps, sp.Then.StoppingPoints)
			}
		}
	}
	walk(p.InitialSteps, p.StoppingPoints)
	return out
}

func evidenceRequest(d engine.Decision) string {
	if d.Kind == "request_evidence" {
		return d.Reason
	}
	return ""
}

func delegateTo(d engine.Decision) string {
	if d.Kind == "delegate" {
		return d.Text
	}
	return ""
}
