package approvalsvc

import (
	"context"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/answer"
	"github.com/tollgate-dev/tollgate/pkg/engine"
)

var answerKindToProto = map[answer.Kind]tollgatev1.AnswerKind{
	answer.Selected: tollgatev1.AnswerKind_ANSWER_KIND_SELECTED, answer.Reshown: tollgatev1.AnswerKind_ANSWER_KIND_RESHOWN,
	answer.NoMatch: tollgatev1.AnswerKind_ANSWER_KIND_NO_MATCH, answer.EscapeHint: tollgatev1.AnswerKind_ANSWER_KIND_ESCAPE_HINT,
	answer.Dropped: tollgatev1.AnswerKind_ANSWER_KIND_DROPPED,
}

// Answer interprets a free-text reply with the one matcher (package
// answer). Every reply gets a typed, non-empty response.
func (s *Service) Answer(ctx context.Context, req *tollgatev1.AnswerRequest) (*tollgatev1.AnswerResponse, error) {
	// The reply is judged as the decision it makes (the same matcher the
	// engine applies).
	kindOf := func(a *engine.AskRun) approvals.Kind {
		if r := a.Reply(req.GetText(), false); r.Kind == answer.Selected {
			return approvals.OptionKind(a, r.Option.ID)
		}
		return approvals.Reply
	}
	who, run, a, auth, judged, err := s.decidable(ctx, req.GetAskId(), kindOf, req.GetExpectedPayloadDigest(), req.GetExpectedEvidenceDigest())
	if err != nil {
		return nil, err
	}
	// A reply that approves is a vote like Decide's: earlier votes are
	// re-checked before it counts (I9), whatever the ask's type.
	if kindOf(a).Approves() {
		if err := s.cfg.Approvals.RecheckVotes(ctx, s.cfg.Runner, run, a, who); err != nil {
			return nil, err
		}
	}
	tr, err := s.cfg.Runner.Event(ctx, run.ID, func(now time.Time) engine.Event {
		return engine.Answer{Ask: a.ID, Actor: who, Text: req.GetText(), Why: auth.Why, Policy: auth.Policy, Quorum: auth.Quorum,
			Groups: approvals.CallerGroups(ctx, who), Judged: judged, At: now}
	})
	if err != nil {
		return nil, err
	}
	r := tr.Reply
	out := &tollgatev1.AnswerResponse{Kind: answerKindToProto[r.Kind], ResponseText: r.Message, SelectedOptionId: r.Option.ID,
		MissCount: int32(r.Misses), Ask: wire.AskSummary(tr.Run, tr.Run.Asks[a.ID]), RunState: wire.RunState(tr.Run.State)}
	if r.Kind == answer.Dropped {
		m, err := s.cfg.Runner.Machine(ctx, tr.Run.PlanDigest)
		if err != nil {
			return nil, err
		}
		out.Report = wire.CancellationReport(m, run, tr.Run)
		out.ResponseText = r.Message + " " + out.Report.Text
	}
	return out, nil
}
