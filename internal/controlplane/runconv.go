package controlplane

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
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
	engine.AskCancelled: tollgatev1.AskState_ASK_STATE_CANCELLED,
}

var askStateFromProto = invert(askStateToProto)

var askKindToProto = map[plan.StopType]tollgatev1.AskKind{
	plan.StopMenu: tollgatev1.AskKind_ASK_KIND_APPROVAL, plan.StopChoice: tollgatev1.AskKind_ASK_KIND_CHOICE, plan.StopText: tollgatev1.AskKind_ASK_KIND_TEXT,
	engine.InDoubt: tollgatev1.AskKind_ASK_KIND_IN_DOUBT,
}

var decisionKindToProto = map[string]tollgatev1.DecisionKind{
	"approve": tollgatev1.DecisionKind_DECISION_KIND_APPROVE, "reject": tollgatev1.DecisionKind_DECISION_KIND_REJECT,
	"answer": tollgatev1.DecisionKind_DECISION_KIND_ANSWER,
}

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
		CreatedAt: ts(run.CreatedAt), UpdatedAt: ts(run.UpdatedAt), ResumeCommand: resumeCommand(run),
	}
	if run.State.Terminal() {
		out.FinishedAt = ts(run.UpdatedAt)
	}
	for _, id := range slices.Sorted(maps.Keys(run.Steps)) {
		s := run.Steps[id]
		ps := &tollgatev1.StepState{StepId: id, State: stepStatusToProto[s.Status], ApprovedByStarter: s.Grant == engine.GrantStart}
		if s.Grant != "" && s.Grant != engine.GrantStart {
			ps.GoverningAskId = store.AskID(run.ID, s.Grant)
		}
		for i, a := range s.Attempts {
			pa := &tollgatev1.Attempt{N: int32(a.N), Executor: a.Executor, LeaseId: a.LeaseID, LeasedAt: ts(a.LeasedAt), StartedAt: ts(a.StartedAt), FinishedAt: ts(a.FinishedAt)}
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
	return out
}

// planView is a plan as every run of it shows it. It is built once per
// plan and shared by the responses that carry it, which only read it.
type planView struct {
	plan *tollgatev1.Plan
	card string
}

// planViews caches plan views by digest (plans are immutable).
var planViews struct {
	mu sync.Mutex
	m  map[string]planView
}

// maxPlanViews bounds planViews.
const maxPlanViews = 1024

func planViewOf(m *engine.Machine) planView {
	planViews.mu.Lock()
	v, ok := planViews.m[m.Digest()]
	planViews.mu.Unlock()
	if ok {
		return v
	}
	v = planView{plan: planToProto(m.Plan(), m.Digest()), card: compiler.Card(m.Plan(), m.Digest(), nil)}
	planViews.mu.Lock()
	defer planViews.mu.Unlock()
	if planViews.m == nil || len(planViews.m) >= maxPlanViews {
		planViews.m = map[string]planView{}
	}
	planViews.m[m.Digest()] = v
	return v
}

func askSummary(run *engine.Run, a *engine.AskRun, skill string) *tollgatev1.AskSummary {
	s := &tollgatev1.AskSummary{Id: store.AskID(run.ID, a.ID), RunId: run.ID, StoppingPointId: a.ID, Kind: askKindToProto[a.Type],
		State: askStateToProto[a.State], Title: a.Title, Requester: run.Requester, Skill: skill, Consequence: consequence(a),
		Quorum: 1, CreatedAt: ts(a.OpenedAt), ExpiresAt: ts(a.ExpiresAt), PayloadDigest: payloadDigest(a)}
	for _, d := range a.Decisions {
		if d.Kind == "approve" || d.Kind == "answer" {
			s.Approvals++
		}
	}
	return s
}

// payloadDigest is the ask's one digest over its governed actions: the
// digest of the single action, or of the list of them.
func payloadDigest(a *engine.AskRun) string {
	switch len(a.Payload) {
	case 0:
		return ""
	case 1:
		return a.Payload[0].Digest
	}
	var parts []string
	for _, p := range a.Payload {
		parts = append(parts, p.Step+"="+p.Digest)
	}
	return "list:" + strings.Join(parts, ",")
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
		PayloadDigest: payloadDigest(a), CreatedAt: ts(a.OpenedAt), ExpiresAt: ts(a.ExpiresAt), OnExpiry: expiryToProto[a.OnExpiry],
		Quorum: 1, SelectedOptionId: a.Option, AnswerText: a.Text, MissCount: int32(a.Misses), ClosedAt: ts(a.Closed),
		AnswerCommand: answerCommand(run, a)}
	if a.Audience != "" && a.Audience != plan.AudienceRequester {
		out.AuthorityRequired = &tollgatev1.AuthorityRequirement{}
	}
	for _, p := range a.Payload {
		out.GovernedStepIds = append(out.GovernedStepIds, p.Step)
		out.Actions = append(out.Actions, &tollgatev1.Action{StepId: p.Step, Server: p.Server, Tool: p.Tool, ArgsJson: string(p.Args), PayloadDigest: p.Digest})
	}
	for _, o := range a.Options {
		out.Options = append(out.Options, &tollgatev1.AskOption{Id: o.ID, Label: o.Label, Proceeds: !(a.Type == plan.StopMenu && strings.EqualFold(o.Label, "no"))})
	}
	for _, d := range a.Decisions {
		out.Decisions = append(out.Decisions, &tollgatev1.Decision{Kind: decisionKindToProto[d.Kind], Actor: d.Actor, Time: ts(d.At),
			Reason: d.Reason, OptionId: d.Option, AnswerText: d.Text, PayloadDigest: payloadDigest(a), Counts: d.Kind != "expire" && d.Kind != "cancel"})
	}
	return out
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
