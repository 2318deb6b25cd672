package approvectl

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// The timeline `runs show` draws below the plan card: what the run did, in
// the order it happened. A fan is one entry with its branches under it and
// the figures the control plane computed for it; an ask shows how long it
// waited for a person and who decided what, when. Nothing here computes a
// figure the control plane already has: branch times and fan figures come
// from the run record as sent.

// tlEntry is one line of the timeline (a fan or an ask with lines under it).
type tlEntry struct {
	at   time.Time // when it began; zero if it has not, or the record has no time (a join)
	key  time.Time // where it sorts
	late bool      // not begun: after everything that has, in plan order
	step *tollgatev1.StepState
	fan  *tlFan
	ask  *tollgatev1.AskSummary
}

// tlFan is a parallel group of one phase with its branches, in plan order.
type tlFan struct {
	group    string
	branches []*tollgatev1.StepState
	figures  *tollgatev1.FanTiming // nil until every branch is done
}

// stepBegan is when a step was first queued (or leased); zero before.
func stepBegan(s *tollgatev1.StepState) time.Time {
	for _, a := range s.GetAttempts() {
		if t := tsTime(a.GetQueuedAt()); !t.IsZero() {
			return t
		}
		if t := tsTime(a.GetLeasedAt()); !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

func (f *tlFan) began() time.Time {
	if f.figures != nil && f.figures.GetStart() != nil {
		return f.figures.GetStart().AsTime()
	}
	var first time.Time
	for _, s := range f.branches {
		if t := stepBegan(s); !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

// buildTimeline orders the run's fans, steps and asks by when each began.
// A step the record gives no time (a join) keeps its place in the plan,
// after what precedes it there; what has not begun comes last.
func buildTimeline(r *tollgatev1.Run) []tlEntry {
	type place struct{ phase, group string }
	figures := map[place]*tollgatev1.FanTiming{}
	for _, f := range r.GetFans() {
		figures[place{f.GetPhase(), f.GetGroup()}] = f
	}
	fans := map[place]*tlFan{}
	var out []tlEntry
	for _, s := range r.GetSteps() {
		if g := s.GetParallelGroup(); g != "" {
			p := place{s.GetPhase(), g}
			if f, ok := fans[p]; ok {
				f.branches = append(f.branches, s)
				continue
			}
			f := &tlFan{group: g, branches: []*tollgatev1.StepState{s}, figures: figures[p]}
			fans[p] = f
			out = append(out, tlEntry{fan: f})
			continue
		}
		out = append(out, tlEntry{step: s})
	}
	var prev time.Time
	for i := range out {
		e := &out[i]
		if e.fan != nil {
			e.at = e.fan.began()
		} else {
			e.at = stepBegan(e.step)
		}
		switch {
		case !e.at.IsZero():
			e.key, prev = e.at, e.at
		case e.step != nil && e.step.GetState() != tollgatev1.StepStatus_STEP_STATUS_WAITING:
			e.key = prev // done without an attempt (a join, a skip): where the plan puts it
		default:
			e.late = true
		}
	}
	for _, a := range r.GetAsks() {
		t := a.GetCreatedAt().AsTime()
		out = append(out, tlEntry{ask: a, at: t, key: t})
	}
	slices.SortStableFunc(out, func(a, b tlEntry) int {
		if a.late != b.late {
			if a.late {
				return 1
			}
			return -1
		}
		return a.key.Compare(b.key)
	})
	return out
}

// tlLine is one printed line: an offset from the run's start (or none),
// then an indented label, and for steps a state and details in columns.
type tlLine struct {
	offset string
	indent int
	label  string
	state  string // steps only: aligned with other steps
	detail string
}

// writeTimeline prints the timeline of r. packets holds the asks'
// decision packets (their decisions), where the caller could read them;
// now is the clock open asks and running steps are measured against.
func writeTimeline(w io.Writer, r *tollgatev1.Run, packets map[string]*tollgatev1.Ask, now time.Time) {
	start := r.GetCreatedAt().AsTime()
	offset := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return "+" + span(t.Sub(start))
	}
	var lines []tlLine
	stepLine := func(s *tollgatev1.StepState, indent int) tlLine {
		return tlLine{offset: offset(stepBegan(s)), indent: indent, label: stepName(s.GetStepId()), state: stepWord(s.GetState()), detail: stepDetail(s, now)}
	}
	for _, e := range buildTimeline(r) {
		switch {
		case e.step != nil:
			lines = append(lines, stepLine(e.step, 0))
		case e.fan != nil:
			lines = append(lines, tlLine{offset: offset(e.at), label: fanHeader(e.fan)})
			for _, s := range e.fan.branches {
				lines = append(lines, stepLine(s, 2))
			}
		case e.ask != nil:
			lines = append(lines, tlLine{offset: offset(e.at), label: askHeader(e.ask, now)})
			for _, l := range askDetails(e.ask, packets[e.ask.GetId()]) {
				lines = append(lines, tlLine{indent: 2, label: l})
			}
		}
	}
	var offW, labelW, stateW int
	for _, l := range lines {
		offW = max(offW, len(l.offset))
		if l.state != "" {
			labelW, stateW = max(labelW, l.indent+len(l.label)), max(stateW, len(l.state))
		}
	}
	for _, l := range lines {
		text := strings.Repeat(" ", l.indent) + l.label
		if l.state != "" {
			text = fmt.Sprintf("%-*s  %-*s  %s", labelW, text, stateW, l.state, l.detail)
		}
		fmt.Fprintf(w, "  %-*s  %s\n", offW, l.offset, strings.TrimRight(text, " "))
	}
}

func fanHeader(f *tlFan) string {
	if fg := f.figures; fg != nil {
		return fanLine(fg.GetGroup(), int(fg.GetBranches()), fg.GetWall().AsDuration(), fg.GetBranchSum().AsDuration(), fg.GetBranchMax().AsDuration())
	}
	done := 0
	for _, s := range f.branches {
		switch s.GetState() {
		case tollgatev1.StepStatus_STEP_STATUS_SUCCEEDED, tollgatev1.StepStatus_STEP_STATUS_FAILED, tollgatev1.StepStatus_STEP_STATUS_CANCELLED:
			done++
		}
	}
	return fmt.Sprintf("fan %s  %d branches  %d done, figures when all are", f.group, len(f.branches), done)
}

// stepDetail is a step's executor, attempts, time and queue wait, and
// what it waited on or failed with.
func stepDetail(s *tollgatev1.StepState, now time.Time) string {
	var parts []string
	atts := s.GetAttempts()
	if n := len(atts); n > 0 {
		last := atts[n-1]
		if last.GetExecutor() != "" {
			parts = append(parts, "on "+last.GetExecutor())
		}
		parts = append(parts, plural(n, "attempt"))
		switch {
		case last.GetLeasedAt() != nil && last.GetFinishedAt() == nil:
			parts = append(parts, "running "+span(now.Sub(last.GetLeasedAt().AsTime())))
		case s.GetBranchTime() != nil && (s.GetBranchTime().AsDuration() > 0 || last.GetFinishedAt() != nil):
			parts = append(parts, span(s.GetBranchTime().AsDuration()))
		}
		if last.GetQueuedAt() != nil || n > 1 {
			parts = append(parts, "queued "+span(queueWait(s, now)))
		}
		for i := n - 1; i >= 0; i-- {
			if e := atts[i].GetError(); e != nil {
				parts = append(parts, "error: "+e.GetMessage())
				break
			}
		}
	}
	if s.GetGoverningAskId() != "" {
		parts = append(parts, "approved by "+s.GetGoverningAskId())
	}
	if s.GetApprovedByStarter() {
		parts = append(parts, "approved by starting the run")
	}
	return strings.Join(parts, "  ")
}

// askHeader is an ask, its state and its wait for a person.
func askHeader(a *tollgatev1.AskSummary, now time.Time) string {
	opened, closed := a.GetCreatedAt().AsTime(), tsTime(a.GetClosedAt())
	h := fmt.Sprintf("ask %s %q  %s  ", a.GetId(), a.GetTitle(), askWord(a.GetState()))
	if closed.IsZero() {
		exp := a.GetExpiresAt().AsTime()
		return h + fmt.Sprintf("waiting %s  (opened %s, expires %s)", span(askWait(opened, closed, now)),
			opened.Format(time.RFC3339), deadlineText(exp, now))
	}
	return h + fmt.Sprintf("waited %s  (opened %s → decided %s, deadline %s)", span(askWait(opened, closed, now)), opened.Format(time.RFC3339),
		closed.Format(time.RFC3339), a.GetExpiresAt().AsTime().Format(time.RFC3339))
}

// askDetails are the lines under an ask: each decision (who, what, when)
// and, while it waits, the command that answers it.
func askDetails(a *tollgatev1.AskSummary, p *tollgatev1.Ask) []string {
	var out []string
	for _, d := range p.GetDecisions() {
		line := fmt.Sprintf("%s by %s at %s", decisionWord(d), d.GetActor(), d.GetTime().AsTime().Format(time.RFC3339))
		reason := d.GetReason()
		if how, ok := byStanding(d); ok {
			// Nobody decided it by hand: say so, naming the standing
			// approval and its granter (the decision's actor).
			line, reason = fmt.Sprintf("%s %s, at %s", decisionWord(d), how, d.GetTime().AsTime().Format(time.RFC3339)), ""
		}
		if d.GetOptionId() != "" {
			line += " · option " + d.GetOptionId()
		}
		if d.GetAnswerText() != "" {
			line += fmt.Sprintf(" · %q", d.GetAnswerText())
		}
		if reason != "" {
			line += " · " + reason
		}
		out = append(out, line)
	}
	cmd := a.GetAnswerCommand()
	if p.GetAnswerCommand() != "" {
		cmd = p.GetAnswerCommand()
	}
	if cmd != "" {
		out = append(out, "answer: "+cmd)
	}
	return out
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// byStanding reports whether d was made by a standing approval as the ask
// opened, and how, as the control plane recorded it in the decision's
// authority: "automatically, by standing approval sx_… (SCOPE) granted by
// WHO until WHEN; …" (approvals.Desk, applyStanding).
func byStanding(d *tollgatev1.Decision) (string, bool) {
	how, _, _ := strings.Cut(d.GetAuthority(), ";")
	return how, strings.HasPrefix(how, "automatically, by standing approval ")
}
