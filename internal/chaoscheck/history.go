package chaoscheck

import (
	"fmt"
	"time"
)

// Kind is what a client operation did.
type Kind string

const (
	// Start is StartRun with a request key (Key); Run is the run it was
	// told started.
	Start Kind = "start"
	// Decide is a decision (Verdict "approve" or "reject") on a gate Ask.
	Decide Kind = "decide"
	// Answer is an answer (Verdict: "retry", "ran", "stop") to an in-doubt
	// Ask.
	Answer Kind = "answer"
	// Cancel is CancelRun.
	Cancel Kind = "cancel"
	// Finish is a gate script's FinishRun of its run, once approved.
	Finish Kind = "finish"
	// Read is a read of Run; Asks holds the state it showed of each ask.
	Read Kind = "read"
)

// Outcome is what the client was told.
type Outcome string

const (
	// OK: the operation succeeded.
	OK Outcome = "ok"
	// Refused: the operation was definitely not done (a refusal the API
	// documents: already decided, not allowed, not found).
	Refused Outcome = "refused"
	// Unknown: no answer (a timeout, an unavailable replica): it may or
	// may not have happened.
	Unknown Outcome = "unknown"
)

// Op is one client operation: its call and return times (any clock that
// only moves forward, the same for every client), what it asked and what
// it was told.
type Op struct {
	Client  int
	Kind    Kind
	Call    time.Duration
	Return  time.Duration
	Run     string
	Ask     string // the full ask id, RUN/ASK
	Key     string
	Who     string
	Verdict string
	Outcome Outcome
	// Asks is a Read's view of the run's asks: ask id → state.
	Asks map[string]string
	// Err is the error text, for the report.
	Err string
}

func (o Op) String() string {
	s := fmt.Sprintf("client %d %s", o.Client, o.Kind)
	switch o.Kind {
	case Start:
		s += fmt.Sprintf(" key=%s run=%s", o.Key, o.Run)
	case Decide, Answer:
		s += fmt.Sprintf(" %s %s by %s", o.Ask, o.Verdict, o.Who)
	case Cancel, Read, Finish:
		s += " " + o.Run
	}
	s += " → " + string(o.Outcome)
	if o.Err != "" {
		s += " (" + o.Err + ")"
	}
	return s
}

// Record is one journal record of a run, as the audit API lists it.
type Record struct {
	Seq     uint64
	Kind    string
	Actor   string
	Payload map[string]any
}

// RunFinal is a run as read after the faults healed.
type RunFinal struct {
	ID string
	// Missing: the run could not be read (NOT_FOUND).
	Missing bool
	State   string
	// Mark names the side effect the run's step MarkStep performs (the
	// test tool's counter), "" when it has none.
	Mark     string
	MarkStep string
	Asks     []AskFinal
	Journal  []Record
}

// AskFinal is an ask of a run, after the faults healed.
type AskFinal struct {
	ID    string // RUN/ASK
	State string
	// Deciders is how many people policy lets decide it now.
	Deciders int
}

// Final is the state after the faults healed.
type Final struct {
	Runs map[string]RunFinal
	// Marks is how many times each side effect really ran, from the
	// tool's own log.
	Marks map[string]int
	// Audit is the control plane's audit verdict: "" when clean.
	Audit string
}

// Violation is one broken invariant.
type Violation struct {
	Check  string
	Run    string
	Detail string
}

func (v Violation) String() string {
	if v.Run == "" {
		return v.Check + ": " + v.Detail
	}
	return v.Check + ": run " + v.Run + ": " + v.Detail
}
