package engine

// DecisionKind names one act recorded on an ask (Decision.Kind). The
// values are stored with the run and shown to people — the API maps each
// to its DecisionKind enum — so a released value never changes. A defined
// type, converted at the boundaries as JournalKind is.
type DecisionKind string

// Decision kinds.
const (
	DecisionApprove         DecisionKind = "approve"          // a person approved an option (one vote, under a quorum)
	DecisionReject          DecisionKind = "reject"           // a person said no
	DecisionAnswer          DecisionKind = "answer"           // a person answered a question, or an in-doubt step
	DecisionAmend           DecisionKind = "amend"            // a person changed an amendable field (Reason: what changed)
	DecisionRevoke          DecisionKind = "revoke"           // a person withdrew an approval before the quorum
	DecisionRequestEvidence DecisionKind = "request_evidence" // a decider asked for more evidence (Reason: what)
	DecisionEvidence        DecisionKind = "evidence"         // the requester attached evidence (Reason: the note)
	DecisionDelegate        DecisionKind = "delegate"         // an approver handed the decision on (Text: to whom)
	DecisionEscalate        DecisionKind = "escalate"         // the ask was routed to a wider audience (system)
	DecisionExpire          DecisionKind = "expire"           // the deadline passed undecided (system)
	DecisionStale           DecisionKind = "stale"            // the facts changed after approval (system; Reason: what changed)
	DecisionCancel          DecisionKind = "cancel"           // the run ended with the ask open (system)
)

// NoticeKind names a rung of an ask's life that its audience should hear
// of (AskNotice.Kind); the control plane maps the ones it tells people of
// to webhook event kinds. A defined type, as JournalKind is.
type NoticeKind string

// Notice kinds.
const (
	NoticeReminder          NoticeKind = "reminder"           // the remind time passed; the ask still waits
	NoticeEscalated         NoticeKind = "escalated"          // the ask now waits on a wider audience
	NoticeEvidenceRequested NoticeKind = "evidence_requested" // the requester is asked for more evidence
	NoticeEvidenceAttached  NoticeKind = "evidence_attached"  // the evidence asked for was attached; the ask waits again
	NoticeDelegated         NoticeKind = "delegated"          // the ask waits on a delegate
)
