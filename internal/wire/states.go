package wire

import (
	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// The tables below map domain enums to their proto mirrors. They are
// filled at init and only read afterwards; the *FromProto tables are their
// inverses, so a value added to one direction exists in both.

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

var decisionKindToProto = map[engine.DecisionKind]tollgatev1.DecisionKind{
	engine.DecisionApprove: tollgatev1.DecisionKind_DECISION_KIND_APPROVE, engine.DecisionReject: tollgatev1.DecisionKind_DECISION_KIND_REJECT,
	engine.DecisionAnswer: tollgatev1.DecisionKind_DECISION_KIND_ANSWER, engine.DecisionAmend: tollgatev1.DecisionKind_DECISION_KIND_AMEND,
	engine.DecisionRevoke: tollgatev1.DecisionKind_DECISION_KIND_REVOKE, engine.DecisionRequestEvidence: tollgatev1.DecisionKind_DECISION_KIND_REQUEST_EVIDENCE,
	engine.DecisionDelegate: tollgatev1.DecisionKind_DECISION_KIND_DELEGATE, engine.DecisionExpire: tollgatev1.DecisionKind_DECISION_KIND_EXPIRE,
	engine.DecisionCancel: tollgatev1.DecisionKind_DECISION_KIND_CANCEL, engine.DecisionStale: tollgatev1.DecisionKind_DECISION_KIND_STALE,
	engine.DecisionEscalate: tollgatev1.DecisionKind_DECISION_KIND_ESCALATE, engine.DecisionEvidence: tollgatev1.DecisionKind_DECISION_KIND_EVIDENCE_ATTACHED,
}

func invert[K, V comparable](m map[K]V) map[V]K {
	out := make(map[V]K, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

// RunState is s as the API names it; a state the API does not know is
// RUN_STATE_UNSPECIFIED.
func RunState(s engine.State) tollgatev1.RunState { return runStateToProto[s] }

// RunStateFromProto is the run state a request names; false for
// UNSPECIFIED or a value the engine has no state for.
func RunStateFromProto(s tollgatev1.RunState) (engine.State, bool) {
	es, ok := runStateFromProto[s]
	return es, ok
}

// AskStateFromProto is the ask state a request names; false for
// UNSPECIFIED or a value the engine has no state for.
func AskStateFromProto(s tollgatev1.AskState) (engine.AskState, bool) {
	es, ok := askStateFromProto[s]
	return es, ok
}
