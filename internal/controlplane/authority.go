package controlplane

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/authz"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// decisionKind is a kind of decision a person — or a standing approval,
// as its granter — makes on an ask. Every decision the approver API
// records is judged by authorize under exactly one of them (I9).
type decisionKind string

// Decision kinds. An approval that counts toward a quorum is an approve;
// a free-text reply is judged as the decision it makes (Reply first):
// an approving option is an approve, a gate's No a reject, a free-text
// question's answer a text answer, an in-doubt option retry, it ran or
// stop; a reply that selects nothing is a reply.
const (
	decideApprove         decisionKind = "approve"
	decideReject          decisionKind = "reject"
	decideAmend           decisionKind = "amend"
	decideRequestEvidence decisionKind = "request_evidence"
	decideDelegate        decisionKind = "delegate"
	decideException       decisionKind = "approve_exception"
	decideStanding        decisionKind = "standing_approval"
	decideRevoke          decisionKind = "revoke"
	decideTextAnswer      decisionKind = "text_answer"
	decideReply           decisionKind = "reply"
	decideRetry           decisionKind = "in_doubt_retry"
	decideItRan           decisionKind = "in_doubt_it_ran"
	decideStop            decisionKind = "in_doubt_stop"
)

// decisionKinds lists every decision kind; requirement must answer for
// each against every engine.AskTypes (the table test enumerates both).
func decisionKinds() []decisionKind {
	return []decisionKind{decideApprove, decideReject, decideAmend, decideRequestEvidence, decideDelegate, decideException,
		decideStanding, decideRevoke, decideTextAnswer, decideReply, decideRetry, decideItRan, decideStop}
}

// need is the authority a decision kind needs on an ask type.
type need string

const (
	// needPolicy: policy allows the actor to approve every action the ask
	// governs, now — role, limit, separation of duties, delegation
	// windows — within whom the ask asks (audience, approvers); quorum
	// — the policy's now, if larger than the ask's — is counted by the
	// engine over people who each passed this. An ask
	// that governs no action: its audience (the requester, or holders of
	// its role).
	needPolicy need = "policy over the governed actions (role, limit, separation of duties, delegation window), within the ask's audience and approvers; quorum counted by the engine"
	// needRequesterOrPolicy: the run's requester, who may always say what
	// happened; or anyone needPolicy allows.
	needRequesterOrPolicy need = "the requester, or anyone policy lets approve the governed actions"
	// notApplicable: the decision does not apply to the ask type.
	notApplicable need = "not applicable"
)

// requirement is the one table of who may make which decision on which
// type of ask. A retry of an in-doubt side effect performs it again, so
// it needs what approving it needed (the in-doubt ask carries the
// governing ask's payload, audience, approvers and quorum); saying it ran
// or stopping performs nothing. An unknown type or kind is not
// applicable: nobody may decide it.
func requirement(kind decisionKind, t plan.StopType) need {
	if !slices.Contains(engine.AskTypes(), t) || !slices.Contains(decisionKinds(), kind) {
		return notApplicable
	}
	if t == engine.InDoubt {
		switch kind {
		case decideRetry:
			return needPolicy
		case decideItRan, decideStop, decideReply:
			return needRequesterOrPolicy
		}
		return notApplicable
	}
	switch kind {
	case decideRetry, decideItRan, decideStop:
		return notApplicable
	case decideTextAnswer:
		if t != plan.StopText {
			return notApplicable
		}
	case decideException, decideStanding:
		if t != plan.StopMenu {
			return notApplicable
		}
	case decideApprove:
		if t == plan.StopText {
			return notApplicable // answered with text, not an option
		}
	}
	return needPolicy
}

// authorize is decision-time authority (I9): whether who may make a
// decision of kind on ask a of run now, why in words (for the caller and
// the journal) and the policy version it was judged by. Every decision
// kind is judged here; a policy error denies.
func (s *Services) authorize(ctx context.Context, who string, run *engine.Run, a *engine.AskRun, kind decisionKind) (authority, error) {
	switch requirement(kind, a.Type) {
	case needRequesterOrPolicy:
		if who == run.Requester {
			return authority{ok: true, why: "you started the run, so you may say what happened"}, nil
		}
		return s.policyOver(ctx, who, run, a)
	case needPolicy:
		return s.policyOver(ctx, who, run, a)
	}
	return authority{why: fmt.Sprintf("a %s decision does not apply to a %s ask", strings.ReplaceAll(string(kind), "_", " "), a.Type)}, nil
}

// mayDecide is whether who may make the ask's principal decision now:
// what the inbox and GetAsk show.
func (s *Services) mayDecide(ctx context.Context, who string, run *engine.Run, a *engine.AskRun) (authority, error) {
	kind := decideApprove
	switch a.Type {
	case engine.InDoubt:
		kind = decideItRan
	case plan.StopText:
		kind = decideTextAnswer
	}
	return s.authorize(ctx, who, run, a, kind)
}

// policyOver checks who against policy for every action a governs, within
// whom the ask asks; an ask governing nothing (or no policy loaded) by
// its audience alone.
func (s *Services) policyOver(ctx context.Context, who string, run *engine.Run, a *engine.AskRun) (authority, error) {
	me := a.Audience == "" || a.Audience == plan.AudienceRequester
	if len(a.Payload) == 0 || s.cfg.Authority == nil {
		switch {
		case me && who == run.Requester:
			return authority{ok: true, why: "you started the run and the ask is for the requester"}, nil
		case me:
			return authority{why: fmt.Sprintf("the ask is for the requester, %s", run.Requester)}, nil
		case s.cfg.Authority != nil && s.cfg.Authority.Holds(who, a.Audience, s.cfg.Domain):
			return authority{ok: true, why: "you hold the role " + a.Audience, policy: s.cfg.Authority.Version()}, nil
		}
		return authority{why: "the ask is for the role " + a.Audience + ", which you do not hold"}, nil
	}
	return s.judge(ctx, who, s.matters(run, a), authz.RecipeAsk{Audience: a.Audience, Approvers: a.Approvers, Quorum: a.Quorum})
}

// judge is the one place policy is asked (pkg/authz): who must be allowed
// every matter, within what the recipe asked; the first refusal or
// unreadable matter denies.
func (s *Services) judge(ctx context.Context, who string, matters []matterOrErr, ask authz.RecipeAsk) (authority, error) {
	var whys []string
	policy, delegated, quorum := "", false, 0
	for _, m := range matters {
		if m.err != nil {
			return authority{why: m.err.Error()}, nil
		}
		d, err := s.cfg.Authority.Authorize(ctx, authz.Request{Actor: who, Matter: m.Matter, Ask: ask})
		if err != nil {
			return authority{why: d.Reason}, fmt.Errorf("authorize %s on %s: %w", who, m.Action, err)
		}
		if !d.Allowed {
			return authority{why: d.Reason, policy: d.PolicyVersion}, nil
		}
		whys = append(whys, d.Reason)
		policy = d.PolicyVersion
		delegated = delegated || d.Via != ""
		quorum = max(quorum, d.Quorum)
	}
	return authority{ok: true, why: strings.Join(slices.Compact(whys), "; "), policy: policy, delegated: delegated, quorum: quorum}, nil
}

// matterOrErr is one matter of an ask, or why it could not be read.
type matterOrErr struct {
	authz.Matter
	err error
}

// matters is every matter policy must allow for a: one per governed
// payload, and for a gate one per action its requester added to its own
// (engine.AskRun.Also), with the gate's args — a requester raises the
// bar, never replaces it.
func (s *Services) matters(run *engine.Run, a *engine.AskRun) []matterOrErr {
	var out []matterOrErr
	for _, p := range a.Payload {
		m, err := s.matter(run, p)
		out = append(out, matterOrErr{m, err})
		for _, act := range a.Also {
			srv, tool, _ := strings.Cut(act, ".")
			m, err := s.matter(run, engine.Payload{Step: p.Step, Server: srv, Tool: tool, Args: p.Args})
			out = append(out, matterOrErr{m, err})
		}
	}
	return out
}

// decisionOf is the kind of decision req makes on a; "" for a decision
// this control plane does not know (then nobody may make it).
func decisionOf(req *tollgatev1.DecideRequest, a *engine.AskRun) decisionKind {
	switch d := req.GetDecision().(type) {
	case *tollgatev1.DecideRequest_Approve:
		return askDecisionKind(a, cmp.Or(d.Approve.GetOptionId(), "1"))
	case *tollgatev1.DecideRequest_Reject:
		if a.Type == engine.InDoubt {
			return decideStop
		}
		return decideReject
	case *tollgatev1.DecideRequest_Amend:
		return decideAmend
	case *tollgatev1.DecideRequest_RequestEvidence:
		return decideRequestEvidence
	case *tollgatev1.DecideRequest_Delegate:
		return decideDelegate
	case *tollgatev1.DecideRequest_ApproveException:
		return decideException
	case *tollgatev1.DecideRequest_Revoke:
		return decideRevoke
	case *tollgatev1.DecideRequest_TextAnswer:
		return decideTextAnswer
	}
	return ""
}

// askDecisionKind is the kind of decision choosing option opt makes on a.
func askDecisionKind(a *engine.AskRun, opt string) decisionKind {
	switch {
	case a.Type == engine.InDoubt && opt == engine.DoubtRetry:
		return decideRetry
	case a.Type == engine.InDoubt && opt == engine.DoubtRan:
		return decideItRan
	case a.Type == engine.InDoubt:
		return decideStop
	case a.Type == plan.StopText:
		return decideTextAnswer
	case a.Rejects(opt):
		return decideReject
	}
	return decideApprove
}

// approves reports whether a decision of kind lets an action run: it must
// bind the exact payload and evidence the decider was shown (I6).
func (k decisionKind) approves() bool {
	return k == decideApprove || k == decideException || k == decideRetry
}
