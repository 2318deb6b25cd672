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
	done, total int
	running     []string // leased or started
	queued      []string // waiting for an executor
	asks        []*tollgatev1.AskSummary
}

func progressOf(r *tollgatev1.Run) runProgress {
	p := runProgress{state: stateWord(r.GetState())}
	p.done, p.total = stepsDone(r)
	for _, s := range r.GetSteps() {
		switch s.GetState() {
		case tollgatev1.StepStatus_STEP_STATUS_LEASED, tollgatev1.StepStatus_STEP_STATUS_STARTED:
			p.running = append(p.running, s.GetStepId())
		case tollgatev1.StepStatus_STEP_STATUS_RUNNABLE:
			p.queued = append(p.queued, s.GetStepId())
		}
	}
	for _, a := range r.GetAsks() {
		if st := a.GetState(); st == tollgatev1.AskState_ASK_STATE_PENDING || st == tollgatev1.AskState_ASK_STATE_EVIDENCE_REQUESTED {
			p.asks = append(p.asks, a)
		}
	}
	return p
}

// line is the status: "running  steps 3/7  now cpu, mem  queued disk".
func (p runProgress) line() string {
	parts := []string{p.state, fmt.Sprintf("steps %d/%d", p.done, p.total)}
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

// lineProgress prints plain lines, each only when it differs from the
// last: for pipes, files and logs.
type lineProgress struct {
	w     io.Writer
	loc   *time.Location
	last  string
	asked asked
}

func newLineProgress(w io.Writer, loc *time.Location) *lineProgress {
	return &lineProgress{w: w, loc: loc, asked: asked{}}
}

func (p *lineProgress) show(r *tollgatev1.Run, at time.Time) {
	pr := progressOf(r)
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
	pr := progressOf(r)
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
