package approvalsvc

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/approvals"
	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/wire"
	"github.com/tollgate-dev/tollgate/pkg/decidable"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// decidable loads an ask for the caller to act on: authenticated, allowed
// now to make the decision kindOf says (authority is checked at decision
// time, not when the ask was routed), and — for a decision that lets an
// action run — quoting the exact payload and evidence the caller was
// shown (I6). The Judged it returns pins the decision to the copy of the
// ask all this was judged on: the engine refuses the decision's event on
// any other (engine.AskRun.StillAsJudged), so no check here is ever of
// another state than the one the decision commits on.
func (s *Service) decidable(ctx context.Context, askID string, kindOf func(*engine.AskRun) approvals.Kind, reviewed, evidence string) (string, *engine.Run, *engine.AskRun, approvals.Verdict, engine.Judged, error) {
	who, run, a, err := s.callerAsk(ctx, askID)
	if err != nil {
		return "", nil, nil, approvals.Verdict{}, engine.Judged{}, err
	}
	kind := kindOf(a)
	v, err := s.cfg.Approvals.Authorize(ctx, who, run, a, kind)
	if err != nil {
		if ctx.Err() != nil {
			return "", nil, nil, v, engine.Judged{}, ctx.Err()
		}
		// v.Why says what could not be judged, once; err repeats it
		// wrapped (errors.Is), so it goes to the log, not the caller.
		s.cfg.Log.Warn("authority not judged", "ask", askID, "actor", who, "err", err)
		return "", nil, nil, v, engine.Judged{}, fmt.Errorf("%s: %w", v.Why, errkind.Denied)
	}
	if !v.OK {
		return "", nil, nil, v, engine.Judged{}, fmt.Errorf("%s: %w", v.Why, errkind.Denied)
	}
	judged := engine.JudgedOn(a, reviewed, evidence, kind.Approves())
	via := api.ViaOf(ctx)
	judged.Via, judged.Link = via.Surface, via.Link
	if err := a.StillAsJudged(judged); err != nil {
		return "", nil, nil, v, engine.Judged{}, err
	}
	// A link decides once over every round of its ask (the engine checks
	// it again on the run it commits).
	if err := run.CheckLink(a.ID, judged.Link); err != nil {
		return "", nil, nil, v, engine.Judged{}, err
	}
	return who, run, a, v, judged, nil
}

// Decide records a typed decision by the caller. Authority is checked now,
// at decision time; the deadline is checked by the engine and again by the
// store's commit.
func (s *Service) Decide(ctx context.Context, req *tollgatev1.DecideRequest) (*tollgatev1.DecideResponse, error) {
	if req.GetDecision() == nil {
		return nil, fmt.Errorf("no decision given: %w", errkind.Invalid)
	}
	kindOf := func(a *engine.AskRun) approvals.Kind { return decisionOf(req, a) }
	who, run, a, auth, judged, err := s.decidable(ctx, req.GetAskId(), kindOf, req.GetExpectedPayloadDigest(), req.GetExpectedEvidenceDigest())
	if err != nil {
		return nil, err
	}
	var build func(now time.Time) engine.Event
	switch d := req.GetDecision().(type) {
	case *tollgatev1.DecideRequest_Approve:
		opt := d.Approve.GetOptionId()
		if opt == "" {
			opt = "1"
		}
		if err := s.cfg.Approvals.RecheckVotes(ctx, s.cfg.Runner, run, a, who); err != nil {
			return nil, err
		}
		build = func(now time.Time) engine.Event {
			return engine.Decide{Ask: a.ID, Actor: who, Option: opt, Reason: d.Approve.GetReason(), Why: auth.Why, Policy: auth.Policy, Quorum: auth.Quorum,
				Groups: approvals.CallerGroups(ctx, who), Judged: judged, At: now}
		}
	case *tollgatev1.DecideRequest_Reject:
		build = func(now time.Time) engine.Event {
			return engine.Decide{Ask: a.ID, Actor: who, Reject: true, Reason: d.Reject.GetReason(), Why: auth.Why, Policy: auth.Policy, Judged: judged, At: now}
		}
	case *tollgatev1.DecideRequest_Amend:
		v, err := decidable.ParseMinorUnits(d.Amend.GetNewValueJson())
		if err != nil {
			return nil, fmt.Errorf("amend %s: %w: %w", d.Amend.GetField(), err, errkind.Invalid)
		}
		build = func(now time.Time) engine.Event {
			return engine.Amend{Ask: a.ID, Actor: who, Field: d.Amend.GetField(), Value: v, Judged: judged, At: now}
		}
	case *tollgatev1.DecideRequest_RequestEvidence:
		build = func(now time.Time) engine.Event {
			return engine.RequestEvidence{Ask: a.ID, Actor: who, What: d.RequestEvidence.GetWhat(), Judged: judged, At: now}
		}
	case *tollgatev1.DecideRequest_Delegate:
		to := d.Delegate.GetTo()
		if err := s.cfg.Approvals.MayDelegate(ctx, who, to, run, a); err != nil {
			return nil, err
		}
		build = func(now time.Time) engine.Event {
			return engine.Delegate{Ask: a.ID, Actor: who, To: to, Reason: d.Delegate.GetReason(), Judged: judged, At: now}
		}
	case *tollgatev1.DecideRequest_ApproveException:
		return s.approveStanding(ctx, who, run, a, auth, judged, d.ApproveException)
	case *tollgatev1.DecideRequest_Revoke:
		if strings.TrimSpace(d.Revoke.GetReason()) == "" {
			return nil, fmt.Errorf("revoke: a reason is required: %w", errkind.Invalid)
		}
		build = func(now time.Time) engine.Event {
			return engine.Revoke{Ask: a.ID, Actor: who, Reason: d.Revoke.GetReason(), Judged: judged, At: now}
		}
	case *tollgatev1.DecideRequest_TextAnswer:
		if a.Type != plan.StopText {
			return nil, fmt.Errorf("%q is not a free-text question: %w", a.Title, errkind.Invalid)
		}
		text := d.TextAnswer.GetText()
		if strings.TrimSpace(text) == "" {
			return nil, fmt.Errorf("the answer is empty: %w", errkind.Invalid)
		}
		build = func(now time.Time) engine.Event {
			return engine.Answer{Ask: a.ID, Actor: who, Text: text, Literal: true, Why: auth.Why, Policy: auth.Policy, Judged: judged, At: now}
		}
	case nil:
		return nil, fmt.Errorf("no decision given: %w", errkind.Invalid)
	default:
		return nil, fmt.Errorf("%T decisions: %w", d, errkind.Unimplemented)
	}
	tr, err := s.cfg.Runner.Event(ctx, run.ID, build)
	if err != nil {
		return nil, err
	}
	return s.decided(ctx, tr, a.ID), nil
}

// decisionOf is the kind of decision req makes on a (approvals.Kind, by
// which the desk judges it); "" for a decision this control plane does
// not know (then nobody may make it).
func decisionOf(req *tollgatev1.DecideRequest, a *engine.AskRun) approvals.Kind {
	switch d := req.GetDecision().(type) {
	case *tollgatev1.DecideRequest_Approve:
		return approvals.OptionKind(a, cmp.Or(d.Approve.GetOptionId(), "1"))
	case *tollgatev1.DecideRequest_Reject:
		if a.Type == engine.InDoubt {
			return approvals.Stop
		}
		return approvals.Reject
	case *tollgatev1.DecideRequest_Amend:
		return approvals.Amend
	case *tollgatev1.DecideRequest_RequestEvidence:
		return approvals.RequestEvidence
	case *tollgatev1.DecideRequest_Delegate:
		return approvals.Delegate
	case *tollgatev1.DecideRequest_ApproveException:
		return approvals.GrantStanding
	case *tollgatev1.DecideRequest_Revoke:
		return approvals.Revoke
	case *tollgatev1.DecideRequest_TextAnswer:
		return approvals.TextAnswer
	}
	return ""
}

// decided is the answer to a decision on ask askID that committed as tr:
// the ask as it is now, the run's state, and the decision recorded last.
func (s *Service) decided(ctx context.Context, tr engine.Transition, askID string) *tollgatev1.DecideResponse {
	out := &tollgatev1.DecideResponse{Ask: s.packet(ctx, tr.Run, tr.Run.Asks[askID], false), RunState: wire.RunState(tr.Run.State)}
	if n := len(out.Ask.Decisions); n > 0 {
		out.Decision = out.Ask.Decisions[n-1]
	}
	return out
}
