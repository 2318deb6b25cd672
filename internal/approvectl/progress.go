package approvectl

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// What run --wait shows while it follows a run: steps done of total, the
// steps under way, and each question the run waits on with the command
// that answers it. On a terminal the status is one line redrawn in place;
// anywhere else (a pipe, a file, CI logs) it is plain lines, one each time
// something changed.

// progress draws a followed run.
type progress interface {
	// show draws the run as it is after the commit made at `at`.
	show(r *tollgatev1.Run, at time.Time)
	// end finishes the drawing before the summary is printed.
	end()
}

// runProgress is what a progress display reads from a run.
type runProgress struct {
	state       string
	done, total int      // steps of the run's path so far (see count)
	behind      int      // steps that run only once a gate is decided (and its approval used)
	gates       int      // the asks they wait behind
	questions   bool     // every one of them a question, not an approval gate
	running     []string // leased or started, named for people (stepName)
	queued      []string // waiting for an executor
	asks        []*tollgatev1.AskSummary
}

// progressOf reads r against its plan pl: a watch sends the plan with its
// first event only, so a display keeps it (planOf).
func progressOf(r *tollgatev1.Run, pl *tollgatev1.Plan) runProgress {
	c := countSteps(r, pl)
	p := runProgress{state: stateWord(r.GetState()), done: c.done, total: c.total, behind: c.behind, gates: c.gates, questions: c.questions}
	kinds := planStepKinds(pl)
	for _, s := range r.GetSteps() {
		if kinds[s.GetStepId()] == tollgatev1.StepKind_STEP_KIND_JOIN {
			continue // a join is bookkeeping: it never runs on an executor
		}
		switch s.GetState() {
		case tollgatev1.StepStatus_STEP_STATUS_LEASED, tollgatev1.StepStatus_STEP_STATUS_STARTED:
			p.running = append(p.running, stepName(s.GetStepId()))
		case tollgatev1.StepStatus_STEP_STATUS_RUNNABLE:
			p.queued = append(p.queued, stepName(s.GetStepId()))
		}
	}
	for _, a := range r.GetAsks() {
		if st := a.GetState(); st == tollgatev1.AskState_ASK_STATE_PENDING || st == tollgatev1.AskState_ASK_STATE_EVIDENCE_REQUESTED {
			p.asks = append(p.asks, a)
		}
	}
	return p
}

// stepCount is how far a run is along the path it will take.
type stepCount struct {
	// done of total: the steps the run has reached (its phases so far),
	// counting neither joins (bookkeeping) nor freshness probes (they
	// re-read facts for a gate, and are re-run when it goes stale), so
	// the total does not move while the run waits or re-prepares.
	done, total int
	// behind: steps of the continuations of the gates that still hold
	// them back (beforeItsSteps: a gate's first option, the one approving
	// takes; a question's continuation), not yet reached.
	behind int
	gates  int // how many asks hold steps back
	// questions: every one of them is a question (its continuation runs
	// whatever the answer), none an approval gate.
	questions bool
}

// countSteps counts a run's steps for people: what will run, and what
// waits behind a gate. pl is the run's plan; without one (a script's
// external run) every step it recorded counts.
func countSteps(r *tollgatev1.Run, pl *tollgatev1.Plan) stepCount {
	var c stepCount
	kinds := planStepKinds(pl)
	seen := map[string]bool{}
	for _, s := range r.GetSteps() {
		id := s.GetStepId()
		seen[id] = true
		if isProbe(id) || kinds[id] == tollgatev1.StepKind_STEP_KIND_JOIN {
			continue
		}
		c.total++
		switch s.GetState() {
		case tollgatev1.StepStatus_STEP_STATUS_SUCCEEDED, tollgatev1.StepStatus_STEP_STATUS_FAILED, tollgatev1.StepStatus_STEP_STATUS_SKIPPED, tollgatev1.StepStatus_STEP_STATUS_CANCELLED:
			c.done++
		}
	}
	for _, a := range r.GetAsks() {
		if terminal(r.GetState()) || !beforeItsSteps(a.GetState()) {
			continue
		}
		sp := findStop(pl.GetStoppingPoints(), a.GetStoppingPointId())
		var steps []*tollgatev1.Step
		switch {
		case sp == nil:
		case sp.GetType() == tollgatev1.StoppingPointType_STOPPING_POINT_TYPE_MENU:
			if o := sp.GetOptions(); len(o) > 0 {
				steps = o[0].GetSteps()
			}
		default:
			steps = sp.GetThen().GetSteps()
		}
		n := 0
		for _, st := range steps {
			if !seen[st.GetId()] && st.GetKind() != tollgatev1.StepKind_STEP_KIND_JOIN {
				seen[st.GetId()] = true
				n++
			}
		}
		if n > 0 {
			question := sp.GetType() != tollgatev1.StoppingPointType_STOPPING_POINT_TYPE_MENU
			c.questions = question && (c.gates == 0 || c.questions)
			c.behind += n
			c.gates++
		}
	}
	return c
}

// beforeItsSteps reports whether an ask in state st still holds back the
// steps it governs: it waits on a person (pending, evidence requested),
// its approval is not yet used (approved: the facts are being checked),
// or it went stale and is being prepared to be asked again.
func beforeItsSteps(st tollgatev1.AskState) bool {
	switch st {
	case tollgatev1.AskState_ASK_STATE_PENDING, tollgatev1.AskState_ASK_STATE_EVIDENCE_REQUESTED,
		tollgatev1.AskState_ASK_STATE_APPROVED, tollgatev1.AskState_ASK_STATE_STALE:
		return true
	}
	return false
}

// findStop finds a stopping point by id anywhere in a plan.
func findStop(sps []*tollgatev1.StoppingPoint, id string) *tollgatev1.StoppingPoint {
	for _, sp := range sps {
		if sp.GetId() == id {
			return sp
		}
		for _, o := range sp.GetOptions() {
			if f := findStop(o.GetStoppingPoints(), id); f != nil {
				return f
			}
		}
		if f := findStop(sp.GetThen().GetStoppingPoints(), id); f != nil {
			return f
		}
	}
	return nil
}

// planStepKinds maps every step id of a plan to its kind.
func planStepKinds(p *tollgatev1.Plan) map[string]tollgatev1.StepKind {
	out := map[string]tollgatev1.StepKind{}
	var walk func(steps []*tollgatev1.Step, sps []*tollgatev1.StoppingPoint)
	walk = func(steps []*tollgatev1.Step, sps []*tollgatev1.StoppingPoint) {
		for _, s := range steps {
			out[s.GetId()] = s.GetKind()
		}
		for _, sp := range sps {
			for _, o := range sp.GetOptions() {
				walk(o.GetSteps(), o.GetStoppingPoints())
			}
			walk(sp.GetThen().GetSteps(), sp.GetThen().GetStoppingPoints())
		}
	}
	walk(p.GetInitialSteps(), p.GetStoppingPoints())
	return out
}

// probePrefix starts the id of a gate's freshness probe among a run's
// steps (engine.CheckStepID): an internal name, never shown as it is.
const probePrefix = "check~"

func isProbe(id string) bool { return strings.HasPrefix(id, probePrefix) }

// stepName is a step as people read it: its recipe id, or for a gate's
// freshness probe what it does ("checking facts for ask_1").
func stepName(id string) string {
	if ask, ok := strings.CutPrefix(id, probePrefix); ok {
		return "checking facts for " + ask
	}
	return id
}

// line is the status: "running  steps 3/7  now cpu, mem  queued disk",
// "parked  steps 4/4, 1 behind a gate  waiting on r1/ask_1" ("behind a
// question" when what waits runs whatever the answer).
func (p runProgress) line() string {
	steps := fmt.Sprintf("steps %d/%d", p.done, p.total)
	if p.behind > 0 {
		what := map[bool]string{false: "a gate", true: "a question"}[p.questions]
		if p.gates > 1 {
			what = map[bool]string{false: "gates", true: "questions"}[p.questions]
		}
		steps += fmt.Sprintf(", %d behind %s", p.behind, what)
	}
	parts := []string{p.state, steps}
	if len(p.running) > 0 {
		parts = append(parts, "now "+names(p.running, 3))
	}
	if len(p.queued) > 0 {
		parts = append(parts, "queued "+names(p.queued, 3))
	}
	if len(p.asks) > 0 {
		ids := make([]string, len(p.asks))
		for i, a := range p.asks {
			ids[i] = a.GetId()
		}
		parts = append(parts, "waiting on "+names(ids, 2))
	}
	return strings.Join(parts, "  ")
}

// names lists at most n names, then how many more.
func names(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:n], ", ") + fmt.Sprintf(" +%d more", len(ids)-n)
}

// askLines say that the run waits on a question and how to answer it.
func askLines(a *tollgatev1.AskSummary) []string {
	out := []string{fmt.Sprintf("ask %s %q", a.GetId(), a.GetTitle())}
	if c := a.GetAnswerCommand(); c != "" {
		out = append(out, "  answer: "+c)
	}
	return out
}

// asked tracks the questions already shown (by id and opening: an ask
// asked again after going stale is shown again).
type asked map[string]bool

func (s asked) fresh(p runProgress) []*tollgatev1.AskSummary {
	var out []*tollgatev1.AskSummary
	for _, a := range p.asks {
		k := a.GetId() + "@" + strconv.FormatInt(a.GetCreatedAt().AsTime().UnixNano(), 10)
		if !s[k] {
			s[k] = true
			out = append(out, a)
		}
	}
	return out
}

// planOf keeps the plan of a followed run: a watch sends it with its
// first event (the snapshot) only, since it never changes.
type planOf struct{ plan *tollgatev1.Plan }

// of is r's plan: the one r carries, else the one kept.
func (k *planOf) of(r *tollgatev1.Run) *tollgatev1.Plan {
	if pl := r.GetPlan(); pl != nil {
		k.plan = pl
	}
	return k.plan
}

// lineProgress prints plain lines, each only when it differs from the
// last: for pipes, files and logs.
type lineProgress struct {
	plan  planOf
	w     io.Writer
	loc   *time.Location
	last  string
	asked asked
}

func newLineProgress(w io.Writer, loc *time.Location) *lineProgress {
	return &lineProgress{w: w, loc: loc, asked: asked{}}
}

func (p *lineProgress) show(r *tollgatev1.Run, at time.Time) {
	pr := progressOf(r, p.plan.of(r))
	stamp := at.In(p.loc).Format("15:04:05")
	if l := pr.line(); l != p.last {
		fmt.Fprintf(p.w, "%s  %s\n", stamp, l)
		p.last = l
	}
	for _, a := range p.asked.fresh(pr) {
		for _, l := range askLines(a) {
			fmt.Fprintf(p.w, "%s  %s\n", stamp, l)
		}
	}
}

func (p *lineProgress) end() {}

// termProgress redraws one status line in place (carriage return, clear
// line); a new question is printed above it, where it stays.
type termProgress struct {
	plan  planOf
	w     io.Writer
	loc   *time.Location
	width int // the line is cut to fit: a wrapped line could not be redrawn
	drawn bool
	asked asked
}

// clearLine returns to the start of the line and clears it.
const clearLine = "\r\x1b[2K"

func newTermProgress(w io.Writer, loc *time.Location, width int) *termProgress {
	if width <= 1 {
		width = 80
	}
	return &termProgress{w: w, loc: loc, width: width, asked: asked{}}
}

func (p *termProgress) show(r *tollgatev1.Run, at time.Time) {
	pr := progressOf(r, p.plan.of(r))
	var b strings.Builder
	b.WriteString(clearLine)
	for _, a := range p.asked.fresh(pr) {
		for _, l := range askLines(a) {
			b.WriteString(l + "\n")
		}
	}
	b.WriteString(fit(at.In(p.loc).Format("15:04:05")+"  "+pr.line(), p.width-1))
	io.WriteString(p.w, b.String())
	p.drawn = true
}

func (p *termProgress) end() {
	if p.drawn {
		io.WriteString(p.w, "\n")
		p.drawn = false
	}
}

// fit cuts s to n runes, marking the cut with an ellipsis.
func fit(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Stat() (os.FileInfo, error) })
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// newProgress picks the display for w.
func (g *globals) newProgress(w io.Writer) progress {
	if g.cfg.Terminal(w) {
		width, _ := strconv.Atoi(g.cfg.Getenv("COLUMNS"))
		return newTermProgress(w, time.Local, width)
	}
	return newLineProgress(w, time.Local)
}
