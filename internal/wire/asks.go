package wire

import (
	"fmt"
	"strings"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// quorum is how many distinct approvals the ask needs (at least one).
func quorum(a *engine.AskRun) int32 { return int32(max(a.Quorum, 1)) }

// AskSummary is one line of an inbox or a run's list of asks; skill is
// as for Run.
func AskSummary(run *engine.Run, a *engine.AskRun, skill string) *tollgatev1.AskSummary {
	s := &tollgatev1.AskSummary{Id: store.AskID(run.ID, a.ID), RunId: run.ID, StoppingPointId: a.ID, Kind: askKindToProto[a.Type],
		State: askStateToProto[a.State], Title: a.Title, Requester: run.Requester, Skill: skill, Consequence: consequence(a),
		Quorum: quorum(a), CreatedAt: Time(a.OpenedAt), ExpiresAt: Time(a.ExpiresAt), ClosedAt: Time(a.Closed), PayloadDigest: a.PayloadDigest(),
		AnswerCommand: AnswerCommand(run, a)}
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

// Ask renders the whole decision packet of ask a of run: what approving
// does, the exact actions and their digests, the evidence, the bounds of
// an amendment and every decision so far with who made it and why.
func Ask(run *engine.Run, a *engine.AskRun) *tollgatev1.Ask {
	out := &tollgatev1.Ask{Id: store.AskID(run.ID, a.ID), RunId: run.ID, StoppingPointId: a.ID, Kind: askKindToProto[a.Type],
		State: askStateToProto[a.State], Title: a.Title, Consequence: consequence(a), Requester: run.Requester,
		PayloadDigest: a.PayloadDigest(), CreatedAt: Time(a.OpenedAt), ExpiresAt: Time(a.ExpiresAt), OnExpiry: expiryToProto[a.OnExpiry],
		Quorum: quorum(a), SelectedOptionId: a.Option, AnswerText: a.Text, MissCount: int32(a.Misses), ClosedAt: Time(a.Closed),
		AnswerCommand: AnswerCommand(run, a), ResourceVersion: a.ResourceVersion, MaterialFields: a.Material, StateReason: stateReason(a),
		EscalatedTo: a.EscalatedTo, EvidenceDigest: a.EvidenceDigest()}
	for _, e := range a.Evidence {
		out.Evidence = append(out.Evidence, &tollgatev1.EvidenceArtifact{Ref: e.Ref, Name: e.Name, MediaType: e.MediaType, Content: e.Content,
			Digest: e.Digest, AttachedBy: e.AttachedBy})
	}
	if !a.RemindAt.IsZero() {
		out.RemindAt = Time(a.RemindAt)
	}
	if !a.EscalateAt.IsZero() && a.EscalatedTo == "" {
		out.EscalateAt = Time(a.EscalateAt)
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
		out.Decisions = append(out.Decisions, &tollgatev1.Decision{Kind: decisionKindToProto[d.Kind], Actor: d.Actor, Time: Time(d.At),
			Reason: d.Reason, OptionId: d.Option, AnswerText: d.Text, PayloadDigest: a.PayloadDigest(), Counts: d.Kind != engine.DecisionExpire && d.Kind != engine.DecisionCancel,
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

// AnswerCommand is the exact command that answers a pending ask; "" once
// it is not pending.
func AnswerCommand(run *engine.Run, a *engine.AskRun) string {
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

func evidenceRequest(d engine.Decision) string {
	if d.Kind == engine.DecisionRequestEvidence {
		return d.Reason
	}
	return ""
}

func delegateTo(d engine.Decision) string {
	if d.Kind == engine.DecisionDelegate {
		return d.Text
	}
	return ""
}
