package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Kind says what a step is.
type Kind string

// Step kinds.
const (
	KindTool  Kind = "tool"  // a call of SERVER.TOOL with JSON args
	KindProse Kind = "prose" // free text run by a model; always read-only
	KindJoin  Kind = "join"  // waits for K of the steps in In
)

// OnFail says what a failed step does to the run.
type OnFail string

// OnFail values.
const (
	OnFailStop OnFail = "stop" // the run fails
	OnFailSkip OnFail = "skip" // the failure is recorded; dependents see no output
)

// StopType is the kind of a stopping point.
type StopType string

// Stopping point types.
const (
	StopMenu   StopType = "menu"   // an approval gate: options carry continuations
	StopChoice StopType = "choice" // a question with labelled options; one continuation
	StopText   StopType = "text"   // a free-text question; one continuation
)

// Audience "me" is the run's requester; any other value names a role.
const AudienceRequester = "me"

// Plan is a compiled recipe.
type Plan struct {
	Name           string          `json:"name"`
	Description    string          `json:"description,omitempty"`
	InitialSteps   []Step          `json:"initial_steps"`
	StoppingPoints []StoppingPoint `json:"stopping_points"`
	Notes          []Note          `json:"notes"`
	// External marks the plan of an external run: a script or service
	// does its steps and opens its gates while it runs (package engine,
	// OpenGate), so the plan itself has neither.
	External bool `json:"external,omitempty"`
	// Inputs names the run inputs (StartRun inputs) the plan reads as
	// {NAME}, sorted. An input's value is fixed when the run starts, so
	// every reader and every gate knows it. Names share one namespace
	// with step and ask ids.
	Inputs []string `json:"inputs,omitempty"`
}

// Phase is a set of steps and the stopping points that follow or sit beside
// them. The top level of a plan is a phase whose steps are InitialSteps.
type Phase struct {
	Steps          []Step          `json:"steps"`
	StoppingPoints []StoppingPoint `json:"stopping_points"`
}

// Step is one unit of work.
type Step struct {
	ID            string   `json:"id"`
	Kind          Kind     `json:"kind"`
	Server        string   `json:"server,omitempty"`
	Tool          string   `json:"tool,omitempty"`
	Args          Object   `json:"args,omitempty"`   // a JSON object; string values may hold {ref}s
	Prompt        string   `json:"prompt,omitempty"` // prose steps
	ParallelGroup string   `json:"parallel_group,omitempty"`
	OnFail        OnFail   `json:"on_fail,omitempty"`
	SideEffect    bool     `json:"side_effect"`
	Idempotent    bool     `json:"idempotent,omitempty"`
	DependsOn     []string `json:"depends_on,omitempty"`
	In            []string `json:"in,omitempty"`          // joins
	MinSuccess    int      `json:"min_success,omitempty"` // joins
	WithoutAsking bool     `json:"without_asking,omitempty"`
	Retry         int      `json:"retry,omitempty"`
	Timeout       string   `json:"timeout,omitempty"` // a duration such as "30s"
	On            string   `json:"on,omitempty"`      // executor label
}

// StoppingPoint is an ask: an approval gate (menu) or a question.
type StoppingPoint struct {
	ID            string       `json:"id"`
	Type          StopType     `json:"type"`
	Title         string       `json:"title"`
	Audience      string       `json:"audience,omitempty"`
	Added         bool         `json:"added,omitempty"`  // the compiler added this gate
	Reason        string       `json:"reason,omitempty"` // why it was added
	After         []string     `json:"after"`
	Summary       string       `json:"summary,omitempty"`
	Show          []string     `json:"show,omitempty"` // references: "id" or "id.field"
	Expires       string       `json:"expires,omitempty"`
	OnExpiry      string       `json:"on_expiry,omitempty"`
	RemindAfter   string       `json:"remind_after,omitempty"`
	EscalateAfter string       `json:"escalate_after,omitempty"`
	EscalateTo    string       `json:"escalate_to,omitempty"`
	Approvers     []string     `json:"approvers,omitempty"`
	Quorum        int          `json:"quorum,omitempty"`
	Check         *Check       `json:"check,omitempty"`
	Amend         []AmendBound `json:"amend,omitempty"`
	Options       []Option     `json:"options"`
	Then          *Phase       `json:"then,omitempty"` // choice and text questions
}

// Option is one answer to a stopping point. A menu option carries its own
// continuation: its steps and stopping points are always present, if empty
// ([] in JSON). A question's options are labels only: both are nil and
// left out of the JSON.
type Option struct {
	ID             string          `json:"id"`
	Label          string          `json:"label"`
	Steps          []Step          `json:"steps,omitzero"`
	StoppingPoints []StoppingPoint `json:"stopping_points,omitzero"`
}

// Check is a read-only freshness probe re-run before an approval is consumed.
type Check struct {
	ID     string   `json:"id"`
	Server string   `json:"server"`
	Tool   string   `json:"tool"`
	Args   Object   `json:"args"`
	Fields []string `json:"fields"` // the material fields
}

// AmendBound is a field an approver may change, with inclusive integer bounds
// (amounts are minor units).
type AmendBound struct {
	Field string `json:"field"`
	Min   int64  `json:"min"`
	Max   int64  `json:"max"`
}

// Note is something the compiler did that the author should know about.
type Note struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Step    string `json:"step_id,omitempty"`
}

// Note codes.
const (
	NoteMoved         = "moved"          // a then: step that reads nothing runs alongside the fan above
	NoteAddedGate     = "added_gate"     // the compiler put a gate in front of a side effect
	NoteWithoutAsking = "without_asking" // a side effect runs on the starter's approval
)

// Menu reports whether s is an approval gate.
func (s *StoppingPoint) Menu() bool { return s.Type == StopMenu }

// Canonical returns the canonical JSON of p: fields in the order of the
// plan format (DESIGN.md §3), args objects with sorted keys, no
// insignificant whitespace, no HTML escaping. Equal plans give equal bytes.
func Canonical(p *Plan) ([]byte, error) {
	return marshal(p)
}

// CanonicalJSON encodes a decoded JSON value (see DecodeObject) or any
// other value canonically; objects come out with sorted keys.
func CanonicalJSON(v any) ([]byte, error) {
	if m, ok := v.(map[string]any); ok {
		return AppendCanonical(nil, m), nil
	}
	raw, err := marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var g any
	if err := dec.Decode(&g); err != nil {
		return nil, fmt.Errorf("decode json: %w", err)
	}
	return AppendCanonical(nil, g), nil
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode json: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// Indent renders p as indented JSON for people: keys in the order of
// DESIGN.md §3 (id, kind, ...), args as stored. Use Canonical for digests.
func Indent(p *Plan) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("encode plan json: %w", err)
	}
	return buf.Bytes(), nil
}

// FormatDuration writes d compactly in hours, minutes and seconds ("24h",
// "1h30m", "45s"): the form plans carry, which time.ParseDuration reads.
func FormatDuration(d time.Duration) string {
	var b strings.Builder
	h := d / time.Hour
	d -= h * time.Hour
	m := d / time.Minute
	d -= m * time.Minute
	s := d / time.Second
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	if s > 0 || b.Len() == 0 {
		fmt.Fprintf(&b, "%ds", s)
	}
	return b.String()
}

// ExpiryOutcome says in words what an ask's deadline does to its run when
// nobody has decided by then; onExpiry is the stopping point's OnExpiry.
// The empty value is the default: the ask expires and the run ends
// expired (the engine's deadline pass). Every surface that states an
// ask's expiry (the plan card, asks show) says it with this phrase.
func ExpiryOutcome(onExpiry string) string {
	switch onExpiry {
	case "reject":
		return "the run ends rejected"
	case "cancel":
		return "the run is cancelled"
	case "escalate":
		return "it escalates once with a new deadline, then the run ends expired"
	}
	return "the run ends expired"
}
