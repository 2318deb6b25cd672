package compiler

import (
	"fmt"
	"strings"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// Card renders the plan card: the one text view of a plan that every
// surface shows before anything runs. Each row names the resolved
// server·tool; side effects carry ⚠ and say where the run stops to ask;
// joins read "needs K of N"; every gate lists its options and settings;
// the compiler's notes and warnings follow, then NotStarted.
func Card(p *plan.Plan, digest string, ds Diagnostics) string {
	return RunCard(p, digest, ds) + NotStarted
}

// NotStarted ends the card of a plan shown before it runs.
const NotStarted = "\nNothing runs until the plan is started.\n"

// RunCard is the card of a plan a run is running: Card without
// NotStarted, which would be untrue there.
func RunCard(p *plan.Plan, digest string, ds Diagnostics) string {
	c := &card{width: idWidth(p.InitialSteps, p.StoppingPoints)}
	c.linef(0, "plan %s  %s", p.Name, digest)
	if p.Description != "" {
		c.linef(0, "%s", p.Description)
	}
	c.b.WriteString("\n")
	c.phase(1, p.InitialSteps, p.StoppingPoints, nil)
	if len(p.Notes) > 0 {
		c.b.WriteString("\nnotes\n")
		for _, n := range p.Notes {
			c.linef(1, "- %s", n.Message)
		}
	}
	var warns []Diagnostic
	for _, d := range ds {
		if d.Severity == Warning {
			warns = append(warns, d)
		}
	}
	if len(warns) > 0 {
		c.b.WriteString("\nwarnings\n")
		for _, d := range warns {
			c.linef(1, "- %s: %s [%s]", d.Pos, d.Message, d.Code)
		}
	}
	return c.b.String()
}

type card struct {
	b     strings.Builder
	width int
}

func (c *card) linef(depth int, format string, args ...any) {
	c.b.WriteString(strings.Repeat("  ", depth))
	fmt.Fprintf(&c.b, format, args...)
	c.b.WriteString("\n")
}

func idWidth(steps []plan.Step, stops []plan.StoppingPoint) int {
	w := 0
	for _, s := range steps {
		w = max(w, len(s.ID))
	}
	for _, sp := range stops {
		for _, o := range sp.Options {
			w = max(w, idWidth(o.Steps, o.StoppingPoints))
		}
		if sp.Then != nil {
			w = max(w, idWidth(sp.Then.Steps, sp.Then.StoppingPoints))
		}
	}
	return w
}

// phase renders steps then stopping points. gate is the innermost approval
// gate around them, named in the ⚠ sentence.
func (c *card) phase(depth int, steps []plan.Step, stops []plan.StoppingPoint, gate *plan.StoppingPoint) {
	for _, s := range steps {
		c.step(depth, s, gate)
	}
	for i := range stops {
		c.stop(depth, &stops[i], gate)
	}
}

func (c *card) step(depth int, s plan.Step, gate *plan.StoppingPoint) {
	mark := "  "
	if s.SideEffect {
		mark = "⚠ "
	}
	id := fmt.Sprintf("%-*s", c.width, s.ID)
	switch s.Kind {
	case plan.KindJoin:
		c.linef(depth, "%s%s  needs %d of %d (%s)", mark, id, s.MinSuccess, len(s.In), strings.Join(s.In, ", "))
		return
	case plan.KindTool:
		c.linef(depth, "%s%s  %s·%s %s", mark, id, s.Server, s.Tool, string(s.Args))
	default:
		c.linef(depth, "%s%s  prose: %s", mark, id, s.Prompt)
	}
	var attrs []string
	if s.ParallelGroup != "" {
		attrs = append(attrs, "in parallel ("+s.ParallelGroup+")")
	}
	if s.Kind == plan.KindTool && !s.SideEffect {
		attrs = append(attrs, "read-only")
	}
	if len(s.DependsOn) > 0 {
		attrs = append(attrs, "after "+strings.Join(s.DependsOn, ", "))
	}
	if s.OnFail == plan.OnFailSkip {
		attrs = append(attrs, "on fail: skip")
	}
	if s.Retry > 0 {
		attrs = append(attrs, fmt.Sprintf("retry: %d", s.Retry))
	}
	if s.Timeout != "" {
		attrs = append(attrs, "timeout: "+s.Timeout)
	}
	if s.On != "" {
		attrs = append(attrs, "on: "+s.On)
	}
	pad := strings.Repeat(" ", c.width+4)
	if len(attrs) > 0 {
		c.linef(depth, "%s%s", pad, strings.Join(attrs, " · "))
	}
	if s.SideEffect {
		switch {
		case s.WithoutAsking:
			c.linef(depth, "%sside effect, without asking: starting the run approves it", pad)
		case gate != nil:
			c.linef(depth, "%sside effect: the run stops and asks %q (%s) before this runs", pad, gate.Title, gate.ID)
		}
	}
}

func (c *card) stop(depth int, sp *plan.StoppingPoint, gate *plan.StoppingPoint) {
	who := "ask me"
	if sp.Audience != "" && sp.Audience != plan.AudienceRequester {
		who = "ask " + sp.Audience
	}
	kind := map[plan.StopType]string{plan.StopMenu: "gate", plan.StopChoice: "question", plan.StopText: "free-text question"}[sp.Type]
	added := ""
	if sp.Added {
		added = " (added by the compiler: " + sp.Reason + ")"
	}
	c.linef(depth, "? %s · %s %s: %s%s", sp.ID, kind, who, sp.Title, added)
	d := depth + 2
	if len(sp.After) > 0 {
		c.linef(d, "opens after %s", strings.Join(sp.After, ", "))
	} else {
		c.linef(d, "opens when the run starts")
	}
	if sp.Summary != "" {
		c.linef(d, "summary: %s", sp.Summary)
	}
	if len(sp.Show) > 0 {
		c.linef(d, "shows: %s", strings.Join(sp.Show, ", "))
	}
	if len(sp.Approvers) > 0 {
		q := ""
		if sp.Quorum > 0 {
			q = fmt.Sprintf("%d of ", sp.Quorum)
		}
		c.linef(d, "approvers: %s%s", q, strings.Join(sp.Approvers, ", "))
	}
	if sp.Check != nil {
		c.linef(d, "check before use: %s = %s·%s %s, fields %s", sp.Check.ID, sp.Check.Server, sp.Check.Tool, string(sp.Check.Args), strings.Join(sp.Check.Fields, ", "))
	}
	for _, a := range sp.Amend {
		c.linef(d, "may amend: %s between %d and %d", a.Field, a.Min, a.Max)
	}
	expiry := "the server default (--ask-expiry)"
	if sp.Expires != "" {
		expiry = sp.Expires
	}
	c.linef(d, "expires: %s · on expiry %s", expiry, plan.ExpiryOutcome(sp.OnExpiry))
	if sp.RemindAfter != "" {
		c.linef(d, "remind after: %s", sp.RemindAfter)
	}
	if sp.EscalateAfter != "" {
		c.linef(d, "escalate after: %s to %s", sp.EscalateAfter, sp.EscalateTo)
	}
	if sp.Menu() {
		for _, o := range sp.Options {
			if len(o.Steps) == 0 && len(o.StoppingPoints) == 0 {
				if strings.EqualFold(o.Label, "No") {
					c.linef(d, "%s) %s → nothing more runs; the run ends rejected", o.ID, o.Label)
				} else {
					c.linef(d, "%s) %s → nothing more runs", o.ID, o.Label)
				}
				continue
			}
			c.linef(d, "%s) %s →", o.ID, o.Label)
			c.phase(d+1, o.Steps, o.StoppingPoints, sp)
		}
		return
	}
	labels := make([]string, len(sp.Options))
	for i, o := range sp.Options {
		labels[i] = o.ID + ") " + o.Label
	}
	if len(labels) > 0 {
		c.linef(d, "options: %s", strings.Join(labels, " · "))
	}
	if sp.Then != nil {
		c.linef(d, "then →")
		c.phase(d+1, sp.Then.Steps, sp.Then.StoppingPoints, gate)
	}
}
