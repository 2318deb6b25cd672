package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/freshness"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// State is a run's state. The last six are terminal outcomes.
type State string

// Run states.
const (
	Running   State = "running"   // steps are runnable or in flight
	Parked    State = "parked"    // only an answer can move it
	Blocked   State = "blocked"   // runnable steps, but no executor offers their tool
	Complete  State = "complete"  // finished, nothing failed
	Partial   State = "partial"   // finished; some branch failed but every join held
	Failed    State = "failed"    // a step or join failed with on_fail: stop
	Cancelled State = "cancelled" // someone cancelled it
	Rejected  State = "rejected"  // a person said no (a non-fault outcome)
	Expired   State = "expired"   // an ask's deadline passed
)

// Terminal reports whether s is an outcome.
func (s State) Terminal() bool {
	switch s {
	case Complete, Partial, Failed, Cancelled, Rejected, Expired:
		return true
	}
	return false
}

// StepStatus is where a step of an active phase is.
type StepStatus string

// Step statuses.
const (
	StatusWaiting   StepStatus = "waiting"   // not yet runnable
	StatusQueued    StepStatus = "queued"    // dispatched; waiting for an executor's lease
	StatusLeased    StepStatus = "leased"    // an executor holds it
	StatusStarted   StepStatus = "started"   // the executor recorded Start: a side effect may be under way
	StatusSucceeded StepStatus = "succeeded" // done, output recorded
	StatusFailed    StepStatus = "failed"    // done, error recorded, no retries left
	StatusCancelled StepStatus = "cancelled" // never finished: the run ended first
	StatusInDoubt   StepStatus = "in_doubt"  // a started side effect whose outcome is unknown; a person must say
)

// InDoubt is the type of the ask the engine opens when a side effect's
// outcome is unknown (the executor was lost after Start). It is not in the
// plan; its options are retry, it ran, stop.
const InDoubt plan.StopType = "in_doubt"

// AskTypes is every type of ask the engine opens: the plan's stopping
// points, external runs' gates and in-doubt asks. Whoever judges
// decisions must know each (the control plane refuses a type it does not).
func AskTypes() []plan.StopType {
	return []plan.StopType{plan.StopMenu, plan.StopChoice, plan.StopText, Gate, InDoubt}
}

// In-doubt ask options.
const (
	DoubtRetry = "1" // run it again, knowing it may run twice
	DoubtRan   = "2" // it happened: treat the step as succeeded
	DoubtStop  = "3" // stop the run
)

// Done reports whether the step will change no more.
func (s StepStatus) Done() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCancelled
}

// InFlight reports whether an executor may be working on the step.
func (s StepStatus) InFlight() bool { return s == StatusLeased || s == StatusStarted }

// AskState is an ask's lifecycle state (DESIGN.md §5).
type AskState string

// Ask states.
const (
	AskPending   AskState = "pending"
	AskApproved  AskState = "approved"  // a gate's Yes, not yet used by a dispatch
	AskConsumed  AskState = "consumed"  // a governed step was dispatched under it
	AskAnswered  AskState = "answered"  // a question got its answer
	AskRejected  AskState = "rejected"  // a gate's No, or a refused question
	AskExpired   AskState = "expired"   // the deadline passed first
	AskCancelled AskState = "cancelled" // the run ended first
	AskStale     AskState = "stale"     // approved, but a material fact changed before consumption; asked again
	// AskEvidenceRequested: a decider asked the requester for more
	// evidence; the deadline keeps running. Attaching it makes the ask
	// pending again.
	AskEvidenceRequested AskState = "evidence_requested"
)

// MaxEvidenceRounds bounds how often evidence may be requested for one ask.
const MaxEvidenceRounds = 3

// Open reports whether the ask still waits for a person.
func (s AskState) Open() bool { return s == AskPending || s == AskEvidenceRequested }

// Run is the whole recorded state of one run. It is plain data: the store
// persists it (compactly, EncodeStored in encoding.go; it reads JSON too)
// and any replica can load it and apply the next event.
type Run struct {
	ID         string              `json:"id"`
	PlanDigest string              `json:"plan_digest"`
	Requester  string              `json:"requester"`
	State      State               `json:"state"`
	Reason     string              `json:"reason,omitempty"` // why it ended, in words
	Version    int64               `json:"version"`          // +1 per transition
	CreatedAt  time.Time           `json:"created_at"`
	UpdatedAt  time.Time           `json:"updated_at"`
	Phases     []string            `json:"phases"` // active phases, see phaseKey
	Steps      map[string]*StepRun `json:"steps"`
	Asks       map[string]*AskRun  `json:"asks"`
	Failing    string              `json:"failing,omitempty"` // the step whose failure stops the run once in-flight work settles
	// External: a script or service does the steps and opens the gates
	// (external.go); the plan has none.
	External bool `json:"external,omitempty"`
	// Inputs are the named values the run was started with; the plan's
	// references read those it declares (plan.Plan.Inputs).
	Inputs map[string]string `json:"inputs,omitempty"`
	// Origin is what the run was started from, recorded at its start and
	// never changed.
	Origin Origin `json:"origin,omitzero"`
	// Parks counts how often the run has parked; ParkedAt is when it last
	// parked, ResumedAt when it last left parked. A run's life is drawn
	// as its stretches between parks (traces, timelines).
	Parks     int       `json:"parks,omitempty"`
	ParkedAt  time.Time `json:"parked_at,omitzero"`
	ResumedAt time.Time `json:"resumed_at,omitzero"`

	// tally counts Steps for deriving the state (tally.go); nil until a
	// transition made this run. Immutable once set.
	tally *tally
}

// Origin is what a run was started from: a saved skill's version, and the
// schedule and tick that started it; zero for an ad-hoc recipe a caller
// started.
type Origin struct {
	Skill        string    `json:"skill,omitempty"`
	SkillVersion int64     `json:"skill_version,omitempty"`
	Schedule     string    `json:"schedule,omitempty"`
	Tick         time.Time `json:"tick,omitzero"`
}

// Equal reports whether o and p name the same origin (the same instant for
// Tick, whatever its location or monotonic reading).
func (o Origin) Equal(p Origin) bool {
	return o.Skill == p.Skill && o.SkillVersion == p.SkillVersion && o.Schedule == p.Schedule && o.Tick.Equal(p.Tick)
}

// StepRun is one step of an active phase.
type StepRun struct {
	Status   StepStatus      `json:"status"`
	Attempt  int             `json:"attempt"` // the current attempt, 1-based; 0 before the first dispatch
	Attempts []Attempt       `json:"attempts,omitempty"`
	Output   json.RawMessage `json:"output,omitempty"`
	Error    string          `json:"error,omitempty"`
	Grant    string          `json:"grant,omitempty"` // the ask whose approval was consumed to dispatch it, or GrantStart
	Blocked  bool            `json:"blocked,omitempty"`
}

// GrantStart marks a `without asking` step: starting the run was its
// approval, with the requester as the actor.
const GrantStart = "start"

// AttemptAuthorized is the one rule for what authorizes an attempt of a
// side-effecting step dispatched under grant (StepRun.Grant): the start,
// for a `without asking` step, or an approval consumed before it — a
// gate's, or an in-doubt ask answered "retry" by someone with authority.
// The engine records consumption under JournalApprovalConsumed; the
// audit replays the journal through this function.
func AttemptAuthorized(grant string, consumed func(ask string) bool) bool {
	return grant == GrantStart || (grant != "" && consumed(grant))
}

// Attempt records one try of a step.
type Attempt struct {
	N          int       `json:"n"`
	Executor   string    `json:"executor,omitempty"`
	LeaseID    string    `json:"lease_id,omitempty"`
	Replica    string    `json:"replica,omitempty"` // the replica holding the lease ("" before issue 15: unknown)
	QueuedAt   time.Time `json:"queued_at"`
	LeasedAt   time.Time `json:"leased_at,omitzero"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	Error      string    `json:"error,omitempty"`
}

// AskRun is an opened stopping point: a gate or a question.
type AskRun struct {
	ID   string        `json:"id"`             // the stopping point id
	Step string        `json:"step,omitempty"` // the step an in-doubt ask is about
	Type plan.StopType `json:"type"`
	// Title is the question as the approver reads it: the stopping
	// point's title, with an amended field's old value replaced by its
	// new one (amend, retitle) so it never shows a payload that is not
	// the one approved.
	Title     string        `json:"title"`
	Summary   string        `json:"summary,omitempty"` // the stopping point's `summary:`
	Audience  string        `json:"audience"`
	Added     bool          `json:"added,omitempty"`
	State     AskState      `json:"state"`
	OpenedAt  time.Time     `json:"opened_at"`
	ExpiresAt time.Time     `json:"expires_at"`
	OnExpiry  string        `json:"on_expiry,omitempty"`
	Options   []plan.Option `json:"options,omitempty"` // labels only
	Payload   []Payload     `json:"payload,omitempty"` // the governed steps' exact args, fixed when the ask opened
	// Also are actions ("server.tool") a gate's requester added to the
	// gate's own: policy for each must hold too, with the gate's args (a
	// requester raises the bar, never replaces it).
	Also      []string   `json:"also,omitempty"`
	Option    string     `json:"option,omitempty"` // the chosen option id
	Label     string     `json:"label,omitempty"`  // the chosen option label
	Text      string     `json:"text,omitempty"`   // a free-text answer
	Misses    int        `json:"misses,omitempty"` // consecutive replies that were not answers
	Decisions []Decision `json:"decisions,omitempty"`
	// Quorum is how many distinct people must approve a gate (0 or 1:
	// one). Approvers, when set, are the only people the recipe asks.
	// Votes are the approvals so far, each bound to the payload it saw:
	// an amendment clears them (I6).
	Quorum    int               `json:"quorum,omitempty"`
	Approvers []string          `json:"approvers,omitempty"`
	Votes     []Vote            `json:"votes,omitempty"`
	Amend     []plan.AmendBound `json:"amend,omitempty"` // fields an approver may change, with bounds
	// Freshness (DESIGN.md §5). Material holds the check probe's
	// material fields (canonical JSON) read when the ask opened, and
	// ResourceVersion their digest. Verifying is set between the quorum
	// and consumption, while the probe runs again; VerifyAttempt is the
	// probe attempt whose result decides. Round counts re-asks after
	// staleness; Stale says what changed.
	HasCheck bool `json:"has_check,omitempty"`
	// The deadline ladder: a reminder at RemindAt, an escalation to
	// EscalateTo at EscalateAt (or at the deadline, with on expiry:
	// escalate). EscalatedTo is set once it escalated (Audience is then
	// the escalation's audience; EscalatedFrom the one before).
	RemindAt      time.Time `json:"remind_at,omitzero"`
	Reminded      bool      `json:"reminded,omitempty"`
	EscalateAt    time.Time `json:"escalate_at,omitzero"`
	EscalateTo    string    `json:"escalate_to,omitempty"`
	EscalatedTo   string    `json:"escalated_to,omitempty"`
	EscalatedFrom string    `json:"escalated_from,omitempty"`
	// Evidence is what the approver is shown: the `show:` references as
	// the ask opened (by digest) and artifacts the requester attached
	// (with content). Approvals bind its digest (I6).
	Evidence        []Evidence        `json:"evidence,omitempty"`
	EvidenceRounds  int               `json:"evidence_rounds,omitempty"`
	EvidenceWanted  string            `json:"evidence_wanted,omitempty"`
	Delegations     []Delegation      `json:"delegations,omitempty"`
	Material        map[string]string `json:"material,omitempty"`
	ResourceVersion string            `json:"resource_version,omitempty"`
	FactsError      string            `json:"facts_error,omitempty"`
	Verifying       bool              `json:"verifying,omitempty"`
	VerifyAttempt   int               `json:"verify_attempt,omitempty"`
	Round           int               `json:"round,omitempty"`
	Stale           string            `json:"stale,omitempty"`
	Closed          time.Time         `json:"closed_at,omitzero"`
}

// Payload is one governed side effect as the approver is shown it: the
// resolved args are exactly what will be dispatched.
type Payload struct {
	Step   string      `json:"step"`
	Server string      `json:"server"`
	Tool   string      `json:"tool"`
	Args   plan.Object `json:"args"`
	Digest string      `json:"digest"` // freshness.PayloadDigest of Args
}

// newPayload is one governed step's payload: args as they will be
// dispatched, and the digest an approval of them binds — the one a grant's
// verifier recomputes from the same args (freshness.PayloadDigest).
func newPayload(step, server, tool string, args plan.Object) (Payload, error) {
	d, err := freshness.PayloadDigest(args)
	if err != nil {
		return Payload{}, fmt.Errorf("args of %s: %w", step, err)
	}
	return Payload{Step: step, Server: server, Tool: tool, Args: args, Digest: d}, nil
}

// Evidence is one artifact an approver reads.
type Evidence struct {
	Ref        string `json:"ref,omitempty"`  // a `show:` reference ("match", "vendor.bank_account")
	Name       string `json:"name,omitempty"` // an attached artifact's name
	MediaType  string `json:"media_type,omitempty"`
	Content    []byte `json:"content,omitempty"` // attached artifacts only; show: refs are read from the run
	Digest     string `json:"digest"`
	AttachedBy string `json:"attached_by,omitempty"`
	Round      int    `json:"round,omitempty"`
}

// Delegation records a decider handing an ask to someone else.
type Delegation struct {
	From   string    `json:"from"`
	To     string    `json:"to"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

// EvidenceDigest is one digest over the evidence, in order; "" without any.
func (a *AskRun) EvidenceDigest() string {
	return freshness.EvidenceDigest(a.Evidence, func(e Evidence) (string, string, string) { return e.Ref, e.Name, e.Digest })
}

// Vote is one person's approval of a gate that needs a quorum.
type Vote struct {
	Actor  string    `json:"actor"`
	Option string    `json:"option"`
	At     time.Time `json:"at"`
	Why    string    `json:"why,omitempty"`    // the authority it was given under
	Digest string    `json:"digest,omitempty"` // PayloadDigest when it was given
	// Evidence is the EvidenceDigest the vote was given on.
	Evidence string `json:"evidence,omitempty"`
	// Groups are the voter's identity-provider groups it was judged with.
	Groups []string `json:"groups,omitempty"`
}

// DueAt is when the ask next needs the clock: the reminder or the
// escalation not yet given, or the deadline.
func (a *AskRun) DueAt() time.Time {
	due := a.ExpiresAt
	if !a.Reminded && !a.RemindAt.IsZero() && a.RemindAt.Before(due) {
		due = a.RemindAt
	}
	if a.EscalatedTo == "" && !a.EscalateAt.IsZero() && a.EscalateAt.Before(due) {
		due = a.EscalateAt
	}
	return due
}

// PayloadDigest is one digest over every governed payload of the ask: an
// approval binds it.
// An ask governing nothing (a question) has none: "".
func (a *AskRun) PayloadDigest() string {
	return freshness.PayloadsDigest(a.Payload, func(p Payload) (string, string) { return p.Step, p.Digest })
}

// Decision is one recorded act on an ask.
type Decision struct {
	Kind   DecisionKind `json:"kind"`
	Actor  string       `json:"actor"`
	At     time.Time    `json:"at"`
	Option string       `json:"option,omitempty"`
	Reason string       `json:"reason,omitempty"`
	Text   string       `json:"text,omitempty"`
	Why    string       `json:"why,omitempty"`    // the authority it was made under (policy's reason, a delegation)
	Policy string       `json:"policy,omitempty"` // the policy version it was authorized under
	// Groups are the actor's identity-provider groups it was judged with.
	Groups []string `json:"groups,omitempty"`
	// Via is the surface it came through (Judged.Via); Link the
	// single-use link it was made through, if any.
	Via  string `json:"via,omitempty"`
	Link string `json:"link,omitempty"`
	// An amendment: the field, its new value (JSON) and the payload
	// digest the ask bound before it.
	Field  string `json:"field,omitempty"`
	Value  string `json:"value,omitempty"`
	Before string `json:"before,omitempty"`
}

// Errors Apply returns for an event it refuses; the run is unchanged.
var (
	ErrUnknownAsk      = errors.New("no such ask")
	ErrAlreadyDecided  = errors.New("already decided")
	ErrExpired         = errors.New("expired")
	ErrForbidden       = errors.New("permission denied")
	ErrBadOption       = errors.New("no such option")
	ErrReasonRequired  = errors.New("a reason is required")
	ErrUnknownStep     = errors.New("no such step in an active phase")
	ErrStaleAttempt    = errors.New("stale attempt")
	ErrRunEnded        = errors.New("the run has ended")
	ErrWrongTransition = errors.New("event does not fit the step's state")
	ErrAlreadyVoted    = errors.New("already approved by this person")
	ErrBadAmend        = errors.New("amendment refused")
	ErrNoVote          = errors.New("no approval to revoke")
	ErrEvidence        = errors.New("evidence refused")
)
