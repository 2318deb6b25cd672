package approvectl

import (
	"strings"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// The JSON shapes scripts read. Field names are a contract.

type stepJSON struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	Executor string `json:"executor,omitempty"` // of the latest attempt
	Grant    string `json:"governing_ask_id,omitempty"`
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
	AskID     string         `json:"ask_id"`
	RunID     string         `json:"run_id"`
	Title     string         `json:"title"`
	State     string         `json:"state"`
	ExpiresAt time.Time      `json:"expires_at"`
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
	Steps      []stepJSON `json:"steps"`
	Asks       []askJSON  `json:"asks"`
	Resume     string     `json:"resume_command,omitempty"`
}

func runJSON(r *tollgatev1.Run) runJSONT {
	out := runJSONT{RunID: r.GetId(), State: stateWord(r.GetState()), Reason: r.GetStateReason(), Requester: r.GetRequester(),
		PlanDigest: r.GetPlanDigest(), CreatedAt: r.GetCreatedAt().AsTime(), Steps: []stepJSON{}, Asks: []askJSON{}, Resume: r.GetResumeCommand()}
	for _, s := range r.GetSteps() {
		sj := stepJSON{ID: s.GetStepId(), State: stepWord(s.GetState()), Attempts: len(s.GetAttempts()), Grant: s.GetGoverningAskId()}
		if n := len(s.GetAttempts()); n > 0 {
			sj.Executor = s.GetAttempts()[n-1].GetExecutor()
		}
		out.Steps = append(out.Steps, sj)
	}
	for _, a := range r.GetAsks() {
		out.Asks = append(out.Asks, askSummaryJSON(a))
	}
	return out
}

func askSummaryJSON(a *tollgatev1.AskSummary) askJSON {
	return askJSON{AskID: a.GetId(), RunID: a.GetRunId(), Title: a.GetTitle(), State: askWord(a.GetState()), ExpiresAt: a.GetExpiresAt().AsTime()}
}

func askPacketJSON(a *tollgatev1.Ask) askJSON {
	out := askJSON{AskID: a.GetId(), RunID: a.GetRunId(), Title: a.GetTitle(), State: askWord(a.GetState()), ExpiresAt: a.GetExpiresAt().AsTime(), Command: a.GetAnswerCommand()}
	for _, d := range a.GetDecisions() {
		out.Decisions = append(out.Decisions, decisionJSON{Kind: enumWord(d.GetKind().String(), "DECISION_KIND_"), Actor: d.GetActor(),
			Time: d.GetTime().AsTime(), Option: d.GetOptionId(), Reason: d.GetReason(), Text: d.GetAnswerText()})
	}
	return out
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

// age renders how long ago t was, for tables.
func age(t, now time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return d.Round(time.Minute).String()
	}
	return d.Round(time.Hour).String()
}
