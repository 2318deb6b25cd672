package engine

import (
	"encoding/json"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Event is something that happened to a run. Every event carries At, the
// store's clock when it is applied: deadlines are judged against it.
type Event interface{ at() time.Time }

// Tick only moves the clock: deadlines that passed are applied. Readers and
// the deadline pass use it; correctness never waits on it (I4).
type Tick struct{ At time.Time }

// Decide approves an option of an ask, or rejects the ask with a reason.
type Decide struct {
	Ask    string
	Actor  string // the authenticated caller
	Option string // the option id to approve; ignored when Reject
	Reject bool
	Reason string
	Why    string
	Policy string
	Judged Judged // what it was judged against; the engine refuses it on another ask
	Quorum int    // the policy's quorum at decision time (I9); see below
	// Groups are the actor's groups at the identity provider that the
	// decision was judged with (from the actor's own token), kept with a
	// vote so a re-check when the next vote comes judges the same
	// membership against the policy in force then.
	Groups []string
	At     time.Time
}

// Decide's Why and Policy, when set, record the authority the control
// plane checked the actor against at decision time (I9); the engine
// stores them with the decision. Quorum is the quorum that policy sets
// for the ask's actions now: the engine raises the ask's to it before
// counting the decision, so a policy that raised the bar after the ask
// opened is met (never lowered).

// Amend changes an integer field of the ask's governed payloads within the
// recipe's `amend:` bounds. The payload digest is recomputed and every
// approval given so far is withdrawn: they approved something else (I6).
type Amend struct {
	Ask    string
	Actor  string
	Field  string
	Value  int64
	Judged Judged
	At     time.Time
}

// Escalate hands a pending ask to another audience (a role): the control
// plane found nobody eligible to decide it. It never approves anything.
type Escalate struct {
	Ask    string
	To     string
	Reason string
	At     time.Time
}

// Note journals a fact about a run that changes nothing in it, such as a
// notice delivered to a webhook. Kind must start with JournalNotePrefix.
type Note struct {
	Kind    JournalKind
	Payload map[string]any
	At      time.Time
}

// RequestEvidence asks the requester for more evidence (What, in words).
type RequestEvidence struct {
	Ask    string
	Actor  string
	What   string
	Judged Judged
	At     time.Time
}

// AttachEvidence adds artifacts to an ask that asked for them; the ask is
// pending again, with a new evidence digest, and approvals given on the
// old evidence no longer count.
type AttachEvidence struct {
	Ask       string
	Actor     string // must be the requester
	Artifacts []Evidence
	Note      string
	At        time.Time
}

// Delegate hands the actor's decision to To, whom the control plane found
// eligible. Where the recipe named approvers, To takes the actor's place.
type Delegate struct {
	Ask    string
	Actor  string
	To     string
	Reason string
	Judged Judged
	At     time.Time
}

// Revoke withdraws the actor's approval of a gate still waiting for its
// quorum.
type Revoke struct {
	Ask    string
	Actor  string
	Reason string
	// By, when set, is who withdrew Actor's approval ("policy" when the
	// actor's authority lapsed before the quorum was reached).
	By     string
	Judged Judged
	At     time.Time
}

// Answer is a free-text reply to an ask, interpreted by package answer.
type Answer struct {
	Ask   string
	Actor string
	Text  string
	// Literal takes Text as the answer of a free-text ask without
	// interpreting control words (a typed API answer, not a chat reply).
	Literal bool
	Why     string
	Policy  string
	Judged  Judged
	Quorum  int      // as Decide.Quorum
	Groups  []string // as Decide.Groups
	At      time.Time
}

// Cancel ends the run and closes its asks in the same transition (I3).
type Cancel struct {
	Actor  string
	Reason string
	At     time.Time
}

// StepLeased: an executor took the queued attempt.
type StepLeased struct {
	Step     string
	Attempt  int
	Executor string
	LeaseID  string
	// Replica is the control-plane replica that holds the lease: while it
	// is alive, no other replica's recovery reports the lease lost.
	Replica string
	At      time.Time
}

// StepStarted: the executor recorded Start before invoking the tool.
type StepStarted struct {
	Step    string
	Attempt int
	At      time.Time
}

// StepSucceeded: the attempt finished with an output (JSON).
type StepSucceeded struct {
	Step    string
	Attempt int
	Output  json.RawMessage
	At      time.Time
}

// StepFailed: the attempt finished with an error.
type StepFailed struct {
	Step    string
	Attempt int
	Error   string
	At      time.Time
}

// LeaseLost: the executor holding the attempt went away. Replica, when
// set, is the replica the loser judged to hold the lease: a lease that
// moved to another replica since (LeaseMoved) is not lost, and the event
// is refused (ErrStaleAttempt).
type LeaseLost struct {
	Step    string
	Attempt int
	Replica string
	At      time.Time
}

// LeaseMoved: the executor running the attempt re-attached it to another
// replica (its replica died, or its stream broke): the lease is held by
// Replica from now on, at the same fence. From is the replica the mover
// found holding it, Executor the executor re-attaching: an executor moves
// only its own lease, and a lease that moved or was lost meanwhile is not
// moved (ErrStaleAttempt).
type LeaseMoved struct {
	Step     string
	Attempt  int
	Executor string
	From     string
	Replica  string
	At       time.Time
}

// StepBlocked: no connected executor offers the step's tool.
type StepBlocked struct {
	Step    string
	Attempt int
	At      time.Time
}

// StepsBlocked is StepBlocked for many steps at once: the refusals of one
// round of offers (a wide fan nobody offers) land in one transition, not
// one each. An entry whose attempt moved on meanwhile is skipped; the
// event is refused only when every entry is.
type StepsBlocked struct {
	Steps []StepAttempt
	At    time.Time
}

// StepAttempt names one attempt of a step.
type StepAttempt struct {
	Step    string
	Attempt int
}

func (e StepsBlocked) at() time.Time { return e.At }

func (e Tick) at() time.Time            { return e.At }
func (e Decide) at() time.Time          { return e.At }
func (e Answer) at() time.Time          { return e.At }
func (e Amend) at() time.Time           { return e.At }
func (e Revoke) at() time.Time          { return e.At }
func (e Escalate) at() time.Time        { return e.At }
func (e Note) at() time.Time            { return e.At }
func (e RequestEvidence) at() time.Time { return e.At }
func (e AttachEvidence) at() time.Time  { return e.At }
func (e Delegate) at() time.Time        { return e.At }
func (e Cancel) at() time.Time          { return e.At }
func (e StepLeased) at() time.Time      { return e.At }
func (e StepStarted) at() time.Time     { return e.At }
func (e StepSucceeded) at() time.Time   { return e.At }
func (e StepFailed) at() time.Time      { return e.At }
func (e LeaseLost) at() time.Time       { return e.At }
func (e LeaseMoved) at() time.Time      { return e.At }
func (e StepBlocked) at() time.Time     { return e.At }

// Effect is something the caller must do after committing a transition.
type Effect interface{ effect() }

// Dispatch hands a step to the dispatcher (the seam to executors). A
// side-effecting step carries the ask whose approval it consumed (I1).
type Dispatch struct {
	Step       string
	Attempt    int
	Kind       plan.Kind
	Server     string
	Tool       string
	Args       plan.Object // resolved: every {ref} replaced
	Prompt     string      // resolved prose prompt
	SideEffect bool
	Idempotent bool
	On         string
	Timeout    string
	Grant      string // ask id, GrantStart, or "" for read-only steps
}

// CancelStep tells the executor holding an attempt to stop.
type CancelStep struct {
	Step    string
	Attempt int
}

// AskOpened: a person must decide; notify the audience.
type AskOpened struct{ Ask string }

// AskNotice: a rung of the ask's life was reached (NoticeReminder,
// NoticeEscalated, …); notify the ask's (new) audience.
type AskNotice struct {
	Ask  string
	Kind NoticeKind
}

// AskClosed: the ask left pending.
type AskClosed struct {
	Ask   string
	State AskState
}

// RunEnded: the run reached an outcome.
type RunEnded struct {
	State  State
	Reason string
}

func (Dispatch) effect()   {}
func (CancelStep) effect() {}
func (AskOpened) effect()  {}
func (AskNotice) effect()  {}
func (AskClosed) effect()  {}
func (RunEnded) effect()   {}

// Record is one journal entry the transition produces; the store chains
// them (I8).
type Record struct {
	Kind    JournalKind    `json:"kind"`
	Actor   string         `json:"actor"`
	At      time.Time      `json:"at"`
	Payload map[string]any `json:"payload,omitempty"`
}

// Transition is the outcome of applying one event.
type Transition struct {
	Run     *Run
	Effects []Effect
	Records []Record
	// Refusal is set when the event was refused for a reason that still
	// changed the run (an answer after the deadline: the expiry is applied
	// and must be committed, and the caller is told ErrExpired).
	Refusal error
	// Reply is the typed response to an Answer event.
	Reply *Reply
}
