package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// An external run is a run whose steps a script or service does itself
// (its plan has External set and no steps). It opens gates as it goes
// (OpenGate), journals the steps it ran (ScriptStep) and says when it is
// done (Finish). A gate is an ask like a recipe's approval gate — routed,
// decided, expired and journaled by the same code — so the run is parked
// while one waits, and ends rejected, expired or cancelled as the gate
// decides; never failed for a deliberate stop.

// Gate is the type of an ask opened on an external run.
const Gate plan.StopType = "gate"

// A gate's options: approve, or say no (a reject, with a reason).
const (
	GateApprove = "1"
	GateNo      = "2"
)

// Errors for external runs.
var (
	ErrNotExternal = errors.New("not an external run")
	ErrGateOpen    = errors.New("a gate is waiting")
	ErrStepDone    = errors.New("step already completed")
	ErrBadName     = errors.New("invalid name")
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckName reports whether s may name a gate or a script step: 1 to 64
// letters, digits, '.', '_' or '-', starting with a letter or digit.
func CheckName(what, s string) error {
	if !nameRE.MatchString(s) || strings.HasPrefix(s, "check~") {
		return fmt.Errorf("%w: %s %q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", ErrBadName, what, s)
	}
	return nil
}

// OpenGate opens a gate on an external run: the run parks until a person
// decides. The gate governs one action, Server.Tool with Args: that is
// what policy routes and what the grant an approval yields binds. Also
// are further actions whose policy must hold as well (AskRun.Also).
type OpenGate struct {
	Gate      string
	Actor     string // the authenticated caller; must be the requester
	Title     string // the summary the approver reads
	Audience  string // a role; "" is the requester (`ask me`)
	Approvers []string
	Quorum    int
	Expires   time.Duration // 0: the engine's default
	OnExpiry  string        // "" (expire the run), "reject" or "cancel"
	Evidence  []Evidence    // artifacts, content and digest
	Server    string
	Tool      string
	Also      []string
	Args      plan.Object
	At        time.Time
}

// ScriptStep journals a step the script ran itself: its exit status, the
// digest of its output and when it ran. A step that succeeded is not
// recorded again (ErrStepDone); one that failed may be run again.
type ScriptStep struct {
	Step         string
	Actor        string
	Exit         int
	OutputDigest string
	StartedAt    time.Time
	FinishedAt   time.Time
	At           time.Time
}

// Finish ends an external run as its script says: complete, or failed
// with a reason. Refused while a gate waits (ErrGateOpen).
type Finish struct {
	Actor  string
	Failed bool
	Reason string
	At     time.Time
}

func (e OpenGate) at() time.Time   { return e.At }
func (e ScriptStep) at() time.Time { return e.At }
func (e Finish) at() time.Time     { return e.At }

// ScriptOutput is the recorded output of a script step.
type ScriptOutput struct {
	Exit         int    `json:"exit"`
	OutputDigest string `json:"output_digest,omitempty"`
	DurationMS   int64  `json:"duration_ms"`
}

// external checks that the run takes external events from actor.
func (t *tx) external(actor string) error {
	if !t.run.External {
		return fmt.Errorf("%w: run %s runs a recipe", ErrNotExternal, t.run.ID)
	}
	if t.run.State.Terminal() {
		return fmt.Errorf("%w: it is %s", ErrRunEnded, t.run.State)
	}
	if actor != t.run.Requester {
		return fmt.Errorf("%w: only the run's requester (%s) acts for its script", ErrForbidden, t.run.Requester)
	}
	return nil
}

// openAsk is the external run's waiting gate, if any.
func (t *tx) openGate() *AskRun {
	for _, id := range sortedAskIDs(t.run) {
		if a := t.run.Asks[id]; a.State.Open() {
			return a
		}
	}
	return nil
}

func (t *tx) openGateEvent(e OpenGate) error {
	if err := t.external(e.Actor); err != nil {
		return err
	}
	if err := CheckName("gate", e.Gate); err != nil {
		return err
	}
	if a, ok := t.run.Asks[e.Gate]; ok {
		return fmt.Errorf("%w: gate %q is %s", ErrAlreadyDecided, e.Gate, a.State)
	}
	if a := t.openGate(); a != nil {
		return fmt.Errorf("%w: %q opened at %s", ErrGateOpen, a.ID, a.OpenedAt.UTC().Format(time.RFC3339))
	}
	if strings.TrimSpace(e.Title) == "" {
		return fmt.Errorf("%w: gate %q needs a summary", ErrWrongTransition, e.Gate)
	}
	switch e.OnExpiry {
	case "", "reject", "cancel":
	default:
		return fmt.Errorf("%w: on expiry %q is not reject or cancel", ErrWrongTransition, e.OnExpiry)
	}
	// Canonical as freshness.PayloadDigest makes it: the digest the
	// approval binds is the one a verifier recomputes from the same args.
	args, err := e.Args.MarshalJSON()
	if err != nil || !json.Valid(args) || args[0] != '{' {
		return fmt.Errorf("%w: gate %q args are not a JSON object: %v", ErrWrongTransition, e.Gate, err)
	}
	exp := e.Expires
	if exp <= 0 {
		exp = t.m.cfg.DefaultExpiry
	}
	audience := e.Audience
	if audience == "" {
		audience = plan.AudienceRequester
	}
	if err := evidenceTooLarge(nil, e.Evidence); err != nil {
		return err
	}
	p, err := newPayload(e.Gate, e.Server, e.Tool, args)
	if err != nil {
		return fmt.Errorf("%w: gate %q: %v", ErrWrongTransition, e.Gate, err)
	}
	a := &AskRun{ID: e.Gate, Type: Gate, Title: e.Title, Audience: audience, State: AskPending,
		OpenedAt: t.at, ExpiresAt: t.at.Add(exp), OnExpiry: e.OnExpiry, Quorum: e.Quorum, Approvers: slices.Clone(e.Approvers),
		Options: []plan.Option{{ID: GateApprove, Label: "Approve"}, {ID: GateNo, Label: "No"}}, Also: slices.Clone(e.Also),
		Payload: []Payload{p}}
	for _, ev := range e.Evidence {
		ev.AttachedBy, ev.Ref, ev.Round = e.Actor, "", 0
		a.Evidence = append(a.Evidence, ev)
	}
	t.floorQuorum(a)
	t.run.Asks[a.ID] = a
	t.effects = append(t.effects, AskOpened{Ask: a.ID})
	t.record(JournalAskOpened, e.Actor, map[string]any{"ask": a.ID, "title": a.Title, "expires_at": a.ExpiresAt, "round": 0,
		"digest": a.PayloadDigest(), "evidence": a.EvidenceDigest(), "action": e.Server + "." + e.Tool, "also": a.Also})
	return nil
}

func (t *tx) scriptStep(e ScriptStep) error {
	if err := t.external(e.Actor); err != nil {
		return err
	}
	if err := CheckName("step", e.Step); err != nil {
		return err
	}
	if a := t.openGate(); a != nil {
		return fmt.Errorf("%w: %q must be decided before more work is recorded", ErrGateOpen, a.ID)
	}
	s := t.stepW(e.Step)
	if s != nil && s.Status == StatusSucceeded {
		return fmt.Errorf("%w: %q succeeded at %s", ErrStepDone, e.Step, s.Attempts[len(s.Attempts)-1].FinishedAt.UTC().Format(time.RFC3339))
	}
	if s == nil {
		s = t.newStep(e.Step, &StepRun{})
	}
	start, end := e.StartedAt, e.FinishedAt
	if start.IsZero() || end.Before(start) {
		start = end
	}
	out, _ := json.Marshal(ScriptOutput{Exit: e.Exit, OutputDigest: e.OutputDigest, DurationMS: end.Sub(start).Milliseconds()})
	s.Attempt++
	at := Attempt{N: s.Attempt, Executor: e.Actor, QueuedAt: start, LeasedAt: start, StartedAt: start, FinishedAt: end}
	s.Output, s.Error, s.Status = out, "", StatusSucceeded
	if e.Exit != 0 {
		s.Status, s.Error = StatusFailed, fmt.Sprintf("exit status %d", e.Exit)
		at.Error = s.Error
	}
	s.Attempts = append(s.Attempts, at)
	t.record(JournalStepRecorded, e.Actor, map[string]any{"step": e.Step, "attempt": s.Attempt, "exit": e.Exit,
		"output_digest": e.OutputDigest, "duration_ms": end.Sub(start).Milliseconds()})
	return nil
}

func (t *tx) finish(e Finish) error {
	if err := t.external(e.Actor); err != nil {
		return err
	}
	if a := t.openGate(); a != nil {
		return fmt.Errorf("%w: %q; cancel the run to stop waiting", ErrGateOpen, a.ID)
	}
	if e.Failed {
		if strings.TrimSpace(e.Reason) == "" {
			return ErrReasonRequired
		}
		t.record(JournalRunFinish, e.Actor, map[string]any{"failed": true, "reason": e.Reason})
		t.end(Failed, e.Reason)
		return nil
	}
	reason := e.Reason
	if reason == "" {
		reason = "finished by " + e.Actor
	}
	t.record(JournalRunFinish, e.Actor, map[string]any{"reason": reason})
	t.end(Complete, reason)
	return nil
}

// deriveExternal: an external run is parked while a gate waits and
// running otherwise; only its script (Finish) or a decision ends it.
func (t *tx) deriveExternal() {
	if t.openGate() != nil {
		t.run.State = Parked
	} else {
		t.run.State = Running
	}
}
