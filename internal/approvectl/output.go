package approvectl

import (
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// The JSON shapes scripts read. Field names are a contract.

type stepJSON struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	Executor string `json:"executor,omitempty"` // of the latest attempt
	Grant    string `json:"governing_ask_id,omitempty"`
	// Where the step sits: its phase ("" at the top) and its fan.
	Phase         string `json:"phase,omitempty"`
	ParallelGroup string `json:"parallel_group,omitempty"`
	// BranchMS is what executors spent on it (each attempt's lease to its
	// finish, summed): the figure its fan's sum and max are made of.
	// QueueWaitMS is the time its attempts waited for an executor (to now
	// while one still waits).
	BranchMS          float64       `json:"branch_ms"`
	QueueWaitMS       float64       `json:"queue_wait_ms"`
	Error             string        `json:"error,omitempty"` // of the latest attempt that failed
	ApprovedByStarter bool          `json:"approved_by_starter,omitempty"`
	AttemptLog        []attemptJSON `json:"attempt_log,omitempty"`
}

type attemptJSON struct {
	N          int       `json:"n"`
	Executor   string    `json:"executor,omitempty"`
	LeaseID    string    `json:"lease_id,omitempty"`
	QueuedAt   time.Time `json:"queued_at,omitzero"`
	LeasedAt   time.Time `json:"leased_at,omitzero"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	Error      string    `json:"error,omitempty"`
}

// fanJSON is one fan whose branches are all done, with the control
// plane's figures (the same its trace span carries).
type fanJSON struct {
	Phase       string    `json:"phase,omitempty"`
	Group       string    `json:"group"`
	Branches    int       `json:"branches"`
	Steps       []string  `json:"steps"`
	Start       time.Time `json:"start,omitzero"`
	End         time.Time `json:"end,omitzero"`
	WallMS      float64   `json:"wall_ms"`
	BranchSumMS float64   `json:"branch_sum_ms"`
	BranchMaxMS float64   `json:"branch_max_ms"`
}

type decisionJSON struct {
	Kind   string    `json:"kind"`
	Actor  string    `json:"actor"`
	Time   time.Time `json:"time"`
	Option string    `json:"option_id,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Text   string    `json:"text,omitempty"`
}

type askJSON struct {
	AskID     string    `json:"ask_id"`
	RunID     string    `json:"run_id"`
	Title     string    `json:"title"`
	State     string    `json:"state"`
	OpenedAt  time.Time `json:"opened_at"`
	ExpiresAt time.Time `json:"expires_at"`
	ClosedAt  time.Time `json:"closed_at,omitzero"` // decided or otherwise closed
	// WaitMS is how long it waited for a person: opened to closed, or to
	// now while it is open.
	WaitMS    float64        `json:"wait_ms"`
	Decisions []decisionJSON `json:"decisions,omitempty"`
	Command   string         `json:"answer_command,omitempty"`
}

type runJSONT struct {
	RunID      string     `json:"run_id"`
	State      string     `json:"state"`
	Reason     string     `json:"reason,omitempty"`
	Requester  string     `json:"requester"`
	PlanDigest string     `json:"plan_digest"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt time.Time  `json:"finished_at,omitzero"`
	Steps      []stepJSON `json:"steps"`
	Fans       []fanJSON  `json:"fans"`
	Asks       []askJSON  `json:"asks"`
	Resume     string     `json:"resume_command,omitempty"`
	// Blocked and Executors are set for a run with blocked steps (runs.go).
	Blocked   []blockedJSON  `json:"blocked,omitempty"`
	Executors []executorJSON `json:"executors,omitzero"` // [] when blocked with none connected
	// Skill and SkillVersion are set for a run of a saved skill; Schedule
	// and ScheduleTick for a run a schedule started.
	Skill        string    `json:"skill,omitempty"`
	SkillVersion int64     `json:"skill_version,omitempty"`
	Schedule     string    `json:"schedule,omitempty"`
	ScheduleTick time.Time `json:"schedule_tick,omitzero"`
}

// runJSON is the run for scripts; now is the clock that open asks and
// queued steps are waiting against.
func runJSON(r *tollgatev1.Run, now time.Time) runJSONT {
	out := runJSONT{RunID: r.GetId(), State: stateWord(r.GetState()), Reason: r.GetStateReason(), Requester: r.GetRequester(),
		PlanDigest: r.GetPlanDigest(), CreatedAt: r.GetCreatedAt().AsTime(), FinishedAt: tsTime(r.GetFinishedAt()),
		Steps: []stepJSON{}, Fans: []fanJSON{}, Asks: []askJSON{}, Resume: r.GetResumeCommand(),
		Skill: r.GetSkill(), SkillVersion: r.GetSkillVersion(), Schedule: r.GetSchedule(), ScheduleTick: tsTime(r.GetScheduleTick())}
	for _, s := range r.GetSteps() {
		out.Steps = append(out.Steps, stepOf(s, now))
	}
	for _, f := range r.GetFans() {
		out.Fans = append(out.Fans, fanJSON{Phase: f.GetPhase(), Group: f.GetGroup(), Branches: int(f.GetBranches()), Steps: f.GetSteps(),
			Start: tsTime(f.GetStart()), End: tsTime(f.GetEnd()), WallMS: ms(f.GetWall().AsDuration()),
			BranchSumMS: ms(f.GetBranchSum().AsDuration()), BranchMaxMS: ms(f.GetBranchMax().AsDuration())})
	}
	for _, a := range r.GetAsks() {
		out.Asks = append(out.Asks, askSummaryJSON(a, now))
	}
	out.Blocked, out.Executors = blockedOf(r)
	return out
}

func stepOf(s *tollgatev1.StepState, now time.Time) stepJSON {
	sj := stepJSON{ID: s.GetStepId(), State: stepWord(s.GetState()), Attempts: len(s.GetAttempts()), Grant: s.GetGoverningAskId(),
		Phase: s.GetPhase(), ParallelGroup: s.GetParallelGroup(), BranchMS: ms(s.GetBranchTime().AsDuration()),
		QueueWaitMS: ms(queueWait(s, now)), ApprovedByStarter: s.GetApprovedByStarter()}
	for _, a := range s.GetAttempts() {
		sj.Executor = a.GetExecutor()
		if a.GetError() != nil {
			sj.Error = a.GetError().GetMessage()
		}
		sj.AttemptLog = append(sj.AttemptLog, attemptJSON{N: int(a.GetN()), Executor: a.GetExecutor(), LeaseID: a.GetLeaseId(),
			QueuedAt: tsTime(a.GetQueuedAt()), LeasedAt: tsTime(a.GetLeasedAt()), StartedAt: tsTime(a.GetStartedAt()),
			FinishedAt: tsTime(a.GetFinishedAt()), Error: a.GetError().GetMessage()})
	}
	return sj
}

// queueWait is the time a step's attempts waited for an executor: each
// one's queueing to its lease, and to now for one still queued.
func queueWait(s *tollgatev1.StepState, now time.Time) time.Duration {
	var d time.Duration
	for _, a := range s.GetAttempts() {
		if a.GetQueuedAt() == nil {
			continue
		}
		end := now
		if a.GetLeasedAt() != nil {
			end = a.GetLeasedAt().AsTime()
		} else if a.GetFinishedAt() != nil {
			end = a.GetFinishedAt().AsTime() // cancelled while queued
		}
		if w := end.Sub(a.GetQueuedAt().AsTime()); w > 0 {
			d += w
		}
	}
	return d
}

// askWait is how long an ask waited for a person: opened to closed, or
// to now while it is open.
func askWait(opened, closed, now time.Time) time.Duration {
	if closed.IsZero() {
		closed = now
	}
	return max(closed.Sub(opened), 0)
}

// askHead is what an ask's summary and its decision packet both carry.
type askHead interface {
	GetId() string
	GetRunId() string
	GetTitle() string
	GetState() tollgatev1.AskState
	GetCreatedAt() *timestamppb.Timestamp
	GetExpiresAt() *timestamppb.Timestamp
	GetClosedAt() *timestamppb.Timestamp
	GetAnswerCommand() string
}

// askHeadJSON is an ask for scripts, without its decisions; now is the
// clock an open ask waits against.
func askHeadJSON(a askHead, now time.Time) askJSON {
	opened, closed := a.GetCreatedAt().AsTime(), tsTime(a.GetClosedAt())
	return askJSON{AskID: a.GetId(), RunID: a.GetRunId(), Title: a.GetTitle(), State: askWord(a.GetState()), OpenedAt: opened,
		ExpiresAt: a.GetExpiresAt().AsTime(), ClosedAt: closed, WaitMS: ms(askWait(opened, closed, now)), Command: a.GetAnswerCommand()}
}

func askSummaryJSON(a *tollgatev1.AskSummary, now time.Time) askJSON { return askHeadJSON(a, now) }

func askPacketJSON(a *tollgatev1.Ask, now time.Time) askJSON {
	out := askHeadJSON(a, now)
	for _, d := range a.GetDecisions() {
		out.Decisions = append(out.Decisions, decisionJSON{Kind: decisionWord(d), Actor: d.GetActor(),
			Time: d.GetTime().AsTime(), Option: d.GetOptionId(), Reason: d.GetReason(), Text: d.GetAnswerText()})
	}
	return out
}

// tsTime is a timestamp's time; the zero time when unset.
func tsTime(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

func decisionWord(d *tollgatev1.Decision) string {
	return enumWord(d.GetKind().String(), "DECISION_KIND_")
}

func enumWord(s, prefix string) string { return strings.ToLower(strings.TrimPrefix(s, prefix)) }

func stateWord(s tollgatev1.RunState) string { return enumWord(s.String(), "RUN_STATE_") }
func stepWord(s tollgatev1.StepStatus) string {
	w := enumWord(s.String(), "STEP_STATUS_")
	if w == "runnable" {
		return "queued"
	}
	return w
}
func askWord(s tollgatev1.AskState) string { return enumWord(s.String(), "ASK_STATE_") }

func terminal(s tollgatev1.RunState) bool {
	switch s {
	case tollgatev1.RunState_RUN_STATE_COMPLETE, tollgatev1.RunState_RUN_STATE_PARTIAL, tollgatev1.RunState_RUN_STATE_FAILED,
		tollgatev1.RunState_RUN_STATE_CANCELLED, tollgatev1.RunState_RUN_STATE_REJECTED, tollgatev1.RunState_RUN_STATE_EXPIRED:
		return true
	}
	return false
}
