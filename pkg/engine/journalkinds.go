package engine

// JournalKind names what a journal Record records. Every kind the engine
// (or a Note) writes is one of the constants below, and every reader of
// the journal — the audit, the metrics, the tracer, the tests — matches
// on these constants, never on a string of its own.
//
// The values are stored in every run's journal and hashed into its chain
// (I8): a released value never changes, or old journals stop reading as
// what they record. journalkinds_test.go pins each one.
//
// JournalKind is a defined type: the engine's records carry one, and a
// plain string (the store's record, the API's, a span attribute) becomes
// one, or is made from one, by an explicit conversion at that boundary.
// The compiler still accepts a bare untyped "step.started" where a
// JournalKind goes; journalkinds_test.go keeps those out of the engine.
// A payload value that is a kind is written as string(kind).
type JournalKind string

// A run's life.
const (
	JournalRunStarted JournalKind = "run.started" // the run was created from its plan (payload: plan_digest)
	JournalRunState   JournalKind = "run.state"   // the run moved between live states: running, parked, blocked (from, to)
	JournalRunCancel  JournalKind = "run.cancel"  // someone cancelled the run (reason); run.ended follows
	JournalRunFinish  JournalKind = "run.finish"  // an external run's script ended it (reason, failed); run.ended follows
	JournalRunEnded   JournalKind = "run.ended"   // the run reached its outcome (state, reason)
)

// A step's attempts.
const (
	JournalStepDispatched     JournalKind = "step.dispatched"       // an attempt was queued for an executor (attempt, why, grant)
	JournalStepLeased         JournalKind = "step.leased"           // an executor took the attempt under a lease (lease)
	JournalStepStarted        JournalKind = "step.started"          // the executor began the attempt: a side effect may have happened since (grant)
	JournalStepSucceeded      JournalKind = "step.succeeded"        // the attempt succeeded, or a person said an in-doubt step ran (by)
	JournalStepFailed         JournalKind = "step.failed"           // the attempt failed (error), or was refused before it ran (refused)
	JournalStepLeaseLost      JournalKind = "step.lease_lost"       // the attempt's lease expired or its executor went away (status)
	JournalStepLeaseMoved     JournalKind = "step.lease_moved"      // the executor re-attached the running attempt to another replica (from, replica)
	JournalStepResultAfterEnd JournalKind = "step.result_after_end" // a result came after the run ended; kept, changes nothing (ok)
	JournalStepCancelled      JournalKind = "step.cancelled"        // the step will not run (or run again): the run is stopping or failing
	JournalStepBlocked        JournalKind = "step.blocked"          // the queued step waits for an executor that offers its tool
	JournalStepReprepare      JournalKind = "step.reprepare"        // a done step runs again because the ask it fed went stale (because)
	JournalStepRecorded       JournalKind = "step.recorded"         // an external run's script reported a step it ran (exit, output_digest, duration_ms)
)

// A join of a fan.
const (
	JournalJoinHeld   JournalKind = "join.held"   // enough branches succeeded (succeeded, of, need)
	JournalJoinFailed JournalKind = "join.failed" // too many branches failed for the join to hold (succeeded, failed, need)
)

// An ask's life.
const (
	JournalAskOpened            JournalKind = "ask.opened"             // a person must decide: a stopping point, a gate or an in-doubt step (title, expires_at, digest)
	JournalAskFacts             JournalKind = "ask.facts"              // the facts an approval is checked against were read, or could not be (resource_version, error)
	JournalAskReminded          JournalKind = "ask.reminded"           // the ask's remind time passed while it waited (audience, waited_ms)
	JournalAskEscalated         JournalKind = "ask.escalated"          // the ask was routed to a wider audience (from, to, why)
	JournalAskQuorumRaised      JournalKind = "ask.quorum_raised"      // policy at decision time wants more approvals than the ask had (from, to)
	JournalAskVoted             JournalKind = "ask.voted"              // one approval toward the ask's quorum (option, votes, quorum, digest)
	JournalAskAmended           JournalKind = "ask.amended"            // an amendable payload field changed; earlier approvals no longer count (field, to)
	JournalAskEvidenceRequested JournalKind = "ask.evidence_requested" // a decider asked the requester for more evidence (what, round)
	JournalAskEvidenceAttached  JournalKind = "ask.evidence_attached"  // the requester attached evidence; earlier approvals no longer count (artifacts)
	JournalAskDelegated         JournalKind = "ask.delegated"          // an approver handed the decision to someone else (to, reason)
	JournalAskReply             JournalKind = "ask.reply"              // a reply in words to an ask (kind: answer.Kind, misses)
	JournalAskDecided           JournalKind = "ask.decided"            // the ask was decided (decision: a DecisionKind or DecidedInDoubt; option, digest)
	JournalAskExpired           JournalKind = "ask.expired"            // the ask's deadline passed undecided (idle_ms)
	JournalAskStale             JournalKind = "ask.stale"              // the facts changed after approval, before use: the approval is retired (changed)
	JournalAskClosed            JournalKind = "ask.closed"             // the ask closed undecided because its run ended (state, reason)
)

// DecidedInDoubt is the decision an ask.decided record names for the
// answer to an in-doubt step (its Decision's kind is DecisionAnswer).
const DecidedInDoubt = "in_doubt"

// An approval's use.
const (
	// JournalApprovalConsumed records that an approval (a gate's, or a
	// decided in-doubt retry) was used by a dispatch (step, option): the
	// audit replays it through AttemptAuthorized.
	JournalApprovalConsumed JournalKind = "approval.consumed"
	JournalApprovalReused   JournalKind = "approval.reused"  // a retry of a side-effecting step runs under the approval its first attempt consumed
	JournalApprovalRevoked  JournalKind = "approval.revoked" // an approver withdrew an approval before the quorum was reached (voter, reason)
	JournalApprovalFresh    JournalKind = "approval.fresh"   // the facts were read again after approval and had not changed (resource_version)
)

// Notes: facts about a run that change nothing in it (Note).
const (
	// JournalNotePrefix starts every Note's kind; Apply refuses a note
	// of any other kind.
	JournalNotePrefix = "notice."
	// JournalNoticeDelivery records one attempt to deliver a webhook
	// notice about an ask (endpoint, event, attempt, outcome, final).
	JournalNoticeDelivery JournalKind = "notice.delivery"
)
