package approvals

import (
	"slices"

	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Kind is a kind of decision a person — or a standing approval, as its
// granter — makes on an ask. Every decision the approver API records is
// judged by Desk.Authorize under exactly one of them (I9). The API maps
// each request it accepts to one (a request it cannot map is nobody's to
// make).
type Kind string

// Decision kinds. An approval that counts toward a quorum is an Approve;
// a free-text reply is judged as the decision it makes (engine.AskRun.Reply
// first): an approving option is an Approve, a gate's No a Reject, a
// free-text question's answer a TextAnswer, an in-doubt option Retry,
// ItRan or Stop; a reply that selects nothing is a Reply. The values are
// the words the refusals say.
const (
	Approve         Kind = "approve"
	Reject          Kind = "reject"
	Amend           Kind = "amend"
	RequestEvidence Kind = "request_evidence"
	Delegate        Kind = "delegate"
	// GrantStanding approves an ask and grants a standing approval over
	// its scope (the API's ApproveException).
	GrantStanding Kind = "approve_exception"
	// ApplyStanding is a standing approval deciding a later ask, judged
	// as its granter.
	ApplyStanding Kind = "standing_approval"
	Revoke        Kind = "revoke"
	TextAnswer    Kind = "text_answer"
	Reply         Kind = "reply"
	Retry         Kind = "in_doubt_retry"
	ItRan         Kind = "in_doubt_it_ran"
	Stop          Kind = "in_doubt_stop"
)

// Kinds lists every decision kind; needFor must answer for each against
// every engine.AskTypes (the table test enumerates both).
func Kinds() []Kind {
	return []Kind{Approve, Reject, Amend, RequestEvidence, Delegate, GrantStanding,
		ApplyStanding, Revoke, TextAnswer, Reply, Retry, ItRan, Stop}
}

// Approves reports whether a decision of kind lets an action run: it must
// bind the exact payload and evidence the decider was shown (I6).
func (k Kind) Approves() bool {
	return k == Approve || k == GrantStanding || k == Retry
}

// OptionKind is the kind of decision choosing option opt makes on a.
func OptionKind(a *engine.AskRun, opt string) Kind {
	switch {
	case a.Type == engine.InDoubt && opt == engine.DoubtRetry:
		return Retry
	case a.Type == engine.InDoubt && opt == engine.DoubtRan:
		return ItRan
	case a.Type == engine.InDoubt:
		return Stop
	case a.Type == plan.StopText:
		return TextAnswer
	case a.Rejects(opt):
		return Reject
	}
	return Approve
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

// needFor is the one table of who may make which decision on which type
// of ask. A retry of an in-doubt side effect performs it again, so it
// needs what approving it needed (the in-doubt ask carries the governing
// ask's payload, audience, approvers and quorum); saying it ran or
// stopping performs nothing. An unknown type or kind is not applicable:
// nobody may decide it.
func needFor(kind Kind, t plan.StopType) need {
	if !slices.Contains(engine.AskTypes(), t) || !slices.Contains(Kinds(), kind) {
		return notApplicable
	}
	if t == engine.InDoubt {
		switch kind {
		case Retry:
			return needPolicy
		case ItRan, Stop, Reply:
			return needRequesterOrPolicy
		}
		return notApplicable
	}
	switch kind {
	case Retry, ItRan, Stop:
		return notApplicable
	case TextAnswer:
		if t != plan.StopText {
			return notApplicable
		}
	case GrantStanding, ApplyStanding:
		if t != plan.StopMenu {
			return notApplicable
		}
	case Approve:
		if t == plan.StopText {
			return notApplicable // answered with text, not an option
		}
	}
	return needPolicy
}
