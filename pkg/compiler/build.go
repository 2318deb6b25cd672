package compiler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/pkg/plan"
	"github.com/tollgate-dev/tollgate/pkg/toolschema"
)

// This file turns the syntax tree into the phase tree of a plan: steps with
// their edges, joins, and stopping points whose options hold their
// continuations. gates.go then decides which gate governs which side effect.

type cphase struct {
	parent  *cphase
	owner   *cstop // the stopping point whose option or then this is; nil at top
	steps   []*cstep
	stops   []*cstop
	lastSec *section // the last section with steps before the explicit ask
	secs    []*section
}

type cstep struct {
	ps     plan.Step
	src    *srcStep // nil for joins
	phase  *cphase
	fan    *section // the fan this step is a member of
	moved  bool
	deps   []string // local edges, already mapped through joins
	outer  []string // edges to steps of enclosing phases
	gov    *cstop   // the approval gate that governs this side effect
	refuse bool     // refused: an ask depends on this ungoverned side effect
}

type copt struct {
	id, label string
	ph        *cphase
}

type cstop struct {
	sp       plan.StoppingPoint // options and then are filled in at the end
	src      *srcAsk            // nil for gates the compiler added
	phase    *cphase
	opts     []*copt
	then     *cphase
	governed []*cstep
	show     []srcRef
}

func (s *cstop) menu() bool { return s.sp.Type == plan.StopMenu }

type builder struct {
	d       *diags
	cat     *Catalog
	steps   map[string]*cstep
	stops   map[string]*cstop
	joins   map[*section]*cstep
	order   []*cstep // every step in source order
	asks    []*cstop // explicit asks in source order
	notes   []plan.Note
	askSeq  int
	usedIDs map[string]Pos
	inputs  map[string]bool // run inputs the recipe may read; true once read
}

func newBuilder(d *diags, cat *Catalog) *builder {
	return &builder{d: d, cat: cat, steps: map[string]*cstep{}, stops: map[string]*cstop{},
		joins: map[*section]*cstep{}, usedIDs: map[string]Pos{}}
}

// inputPos marks an id in usedIDs as a run input's name.
var inputPos = Pos{Line: -1}

// declareInputs reserves the run inputs' names before any step or ask
// claims one, so a clash is reported and generated ids skip them.
func (b *builder) declareInputs(names []string) {
	b.inputs = make(map[string]bool, len(names))
	for _, n := range names {
		b.inputs[n] = false
		b.usedIDs[n] = inputPos
	}
}

// readInputs lists, sorted, the inputs some reference read; nil for none.
func (b *builder) readInputs() []string {
	var out []string
	for n, read := range b.inputs {
		if read {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// claim reserves an id for a step or ask and reports duplicates.
func (b *builder) claim(id string, pos Pos, what string) bool {
	if prev, ok := b.usedIDs[id]; ok {
		if prev == inputPos {
			b.d.errorf(pos, CodeDuplicateID, "%s `%s` has the name of input %q; inputs, steps and asks share one namespace, so rename the input or the %s", what, id, id, what)
			return false
		}
		if prev.Line == 0 {
			b.d.errorf(pos, CodeDuplicateID, "%s `%s` has a name the compiler already gave to a join or a gate; pick another", what, id)
			return false
		}
		b.d.errorf(pos, CodeDuplicateID, "%s `%s` is already defined at line %d; ids must be unique", what, id, prev.Line)
		return false
	}
	b.usedIDs[id] = pos
	return true
}

// unique returns base, or base_2, base_3… if base is taken.
func (b *builder) unique(base string) string {
	id := base
	for n := 2; ; n++ {
		if _, ok := b.usedIDs[id]; !ok {
			b.usedIDs[id] = Pos{}
			return id
		}
		id = fmt.Sprintf("%s_%d", base, n)
	}
}

func (b *builder) phase(sp *srcPhase, parent *cphase, owner *cstop) *cphase {
	ph := &cphase{parent: parent, owner: owner, secs: sp.sections}
	fanNames := map[string]bool{}
	for si, sec := range sp.sections {
		if sec.kind == secFan {
			if fanNames[sec.name] {
				b.d.errorf(sec.pos, CodeDuplicateID, "there is already a fan named `%s` here", sec.name)
			}
			fanNames[sec.name] = true
			if len(sec.steps) == 0 {
				b.d.errorf(sec.pos, CodeSyntax, "`together %s:` has no steps under it", sec.name)
			}
		}
		if sec.kind == secThen && sec.need != nil {
			prev := prevWithSteps(sp.sections, si)
			if prev == nil || prev.kind != secFan {
				b.d.errorf(sec.need.pos, CodeImpossibleNeed, "`need:` counts successes of the fan just above, and there is none: start the block above with `together NAME:`")
			}
		}
		for _, s := range sec.steps {
			c := b.step(s, ph)
			if sec.kind == secFan {
				c.fan = sec
				c.ps.ParallelGroup = sec.name
				if s.onFail == "" {
					c.ps.OnFail = plan.OnFailSkip
				}
			}
		}
		if sec.kind == secFan && len(sec.steps) > 0 {
			j := &cstep{phase: ph, ps: plan.Step{ID: b.unique("join_" + sec.name), Kind: plan.KindJoin}}
			for _, s := range sec.steps {
				j.ps.In = append(j.ps.In, s.id)
			}
			j.ps.MinSuccess = len(sec.steps)
			if next := nextSection(sp.sections, si); next != nil && next.kind == secThen && next.need != nil {
				b.need(sec, next.need, j)
			}
			b.joins[sec] = j
			b.steps[j.ps.ID] = j
			ph.steps = append(ph.steps, j)
		}
		if len(sec.steps) > 0 {
			ph.lastSec = sec
		}
	}
	if sp.ask != nil {
		b.ask(sp, ph)
	}
	return ph
}

func prevWithSteps(secs []*section, i int) *section {
	for j := i - 1; j >= 0; j-- {
		if len(secs[j].steps) > 0 {
			return secs[j]
		}
	}
	return nil
}

func nextSection(secs []*section, i int) *section {
	for j := i + 1; j < len(secs); j++ {
		if secs[j].kind != secPlain || len(secs[j].steps) > 0 {
			return secs[j]
		}
	}
	return nil
}

func (b *builder) need(fan *section, n *needSpec, j *cstep) {
	have := len(fan.steps)
	switch {
	case n.k < 1:
		b.d.errorf(n.pos, CodeImpossibleNeed, "`need: %d of %d` waits for nothing; write at least `need: 1 of %d`", n.k, n.n, have)
	case n.k > n.n:
		b.d.errorf(n.pos, CodeImpossibleNeed, "`need: %d of %d` is impossible: %d successes can never come from %d steps", n.k, n.n, n.k, n.n)
	case n.n != have:
		b.d.errorf(n.pos, CodeImpossibleNeed, "`need: %d of %d`, but the fan `%s` has %d steps (%s)", n.k, n.n, fan.name, have, stepList(fan.steps))
	default:
		j.ps.MinSuccess = n.k
	}
}

func stepList(ss []*srcStep) string {
	ids := make([]string, len(ss))
	for i, s := range ss {
		ids[i] = s.id
	}
	return strings.Join(ids, ", ")
}

func (b *builder) step(s *srcStep, ph *cphase) *cstep {
	c := &cstep{src: s, phase: ph, ps: plan.Step{ID: s.id, OnFail: plan.OnFailStop}}
	if s.onFail != "" {
		c.ps.OnFail = plan.OnFail(s.onFail)
	}
	c.ps.WithoutAsking = s.withoutAsking
	c.ps.Retry = s.retry
	c.ps.Timeout = s.timeout
	c.ps.On = s.on
	if s.tool {
		c.ps.Kind = plan.KindTool
		c.ps.Server, c.ps.Tool = s.server, s.name
		c.ps.Args = canonicalArgs(s.args)
		b.resolveTool(c)
	} else {
		c.ps.Kind = plan.KindProse
		c.ps.Prompt = s.prompt
		if s.withoutAsking {
			b.d.warnf(s.modPos, CodeSyntax, "`without asking` on prose step `%s` does nothing: prose steps are read-only", s.id)
			c.ps.WithoutAsking = false
		}
	}
	if b.claim(s.id, s.pos, "step") {
		b.steps[s.id] = c
	}
	b.order = append(b.order, c)
	ph.steps = append(ph.steps, c)
	return c
}

var writeVerbs = []string{"send", "post", "delete", "remove", "pay", "create", "write", "update",
	"push", "store", "put", "set", "publish", "transfer", "deploy", "drop", "insert", "merge",
	"commit", "upload", "charge", "refund", "cancel", "approve", "archive", "rename", "edit",
	"patch", "apply", "destroy", "kill", "revoke", "grant", "invite", "reply", "forward"}

func (b *builder) resolveTool(c *cstep) {
	s := c.src
	t, ok := b.cat.Lookup(s.server, s.name)
	if !ok {
		tools := b.cat.Tools(s.server)
		switch {
		case len(tools) == 0:
			b.d.errorf(s.toolPos, CodeUnknownTool, "unknown tool `%s.%s`: no executor or catalog offers a server named `%s`%s", s.server, s.name, s.server, suggest(s.server, b.cat.Servers(), "servers"))
		default:
			b.d.errorf(s.toolPos, CodeUnknownTool, "unknown tool `%s.%s`: server `%s` offers %s", s.server, s.name, s.server, strings.Join(tools, ", "))
		}
		c.ps.SideEffect = true // unknown tools are treated as writes
		return
	}
	c.ps.SideEffect = t.SideEffect()
	c.ps.Idempotent = t.Idempotent
	b.checkArgs(c, t)
	if t.ReadOnly {
		if verb := writeShaped(s.name); verb != "" {
			b.d.warnf(s.toolPos, CodeWriteReadOnly, "`%s.%s` is declared read-only, but its name says it writes (%q); read-only tools run without any gate, so fix the tool's readOnlyHint if it changes anything", s.server, s.name, verb)
		}
	}
}

// checkArgs refuses args the tool's input schema refuses, so a call that
// cannot run is never put to an approver. An arg whose value reads an
// earlier step or an answer counts as given; its value is checked when it
// is known (the engine's Config.CheckArgs, before the ask opens).
func (b *builder) checkArgs(c *cstep, t ToolInfo) {
	s := c.src
	open := func(k string) bool { return len(plan.ArgRefs(map[string]any{k: s.args[k]})) > 0 }
	what := fmt.Sprintf("`%s` (%s·%s)", s.id, s.server, s.name)
	argsPos := s.argsPos
	if argsPos == (Pos{}) {
		argsPos = s.toolPos // no args written
	}
	var missing []string
	for _, p := range t.InputSchema.Check(c.ps.Args, open) {
		pos, ok := s.keyPos[p.Field]
		if !ok {
			pos = argsPos
		}
		switch p.Kind {
		case toolschema.Missing:
			missing = append(missing, "`"+p.Field+"`")
		case toolschema.Unknown:
			b.d.errorf(pos, CodeArgsSchema, "%s passes `%s`, which is %s; remove it or correct its name", what, p.Field, p.Reason)
		default:
			if p.Field == "" {
				b.d.errorf(pos, CodeArgsSchema, "the args of %s do not fit the tool's input schema: %s", what, p.Reason)
				continue
			}
			b.d.errorf(pos, CodeArgsSchema, "%s: `%s` does not fit the tool's input schema (%s); correct the value", what, p.Field, p.Reason)
		}
	}
	if len(missing) > 0 {
		b.d.errorf(argsPos, CodeArgsSchema, "%s lacks %s, which the tool's input schema requires; add %s to the args (a value, an input or a `{step.field}` reference)",
			what, andList(missing), map[bool]string{true: "it", false: "them"}[len(missing) == 1])
	}
}

// andList joins words as "a", "a and b", "a, b and c".
func andList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// writeShaped returns the write verb in a tool name, or "".
func writeShaped(name string) string {
	var words []string
	cur := strings.Builder{}
	flush := func() {
		if cur.Len() > 0 {
			words = append(words, strings.ToLower(cur.String()))
			cur.Reset()
		}
	}
	for _, r := range name {
		switch {
		case r == '_' || r == '-' || r == '.':
			flush()
		case r >= 'A' && r <= 'Z':
			flush()
			cur.WriteRune(r)
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	for _, w := range words {
		if slices.Contains(writeVerbs, w) {
			return w
		}
	}
	return ""
}

func suggest(w string, candidates []string, what string) string {
	if n := nearest(w, candidates); n != "" {
		return fmt.Sprintf("; did you mean `%s`?", n)
	}
	if len(candidates) == 0 {
		return ""
	}
	return fmt.Sprintf(" (%s: %s)", what, strings.Join(candidates, ", "))
}

func (b *builder) ask(sp *srcPhase, ph *cphase) {
	a := sp.ask
	b.askSeq++
	id := a.as
	if id == "" {
		id = b.unique(fmt.Sprintf("ask_%d", b.askSeq))
	} else if !b.claim(id, a.asPos, "ask") {
		id = b.unique(id)
	}
	st := &cstop{src: a, phase: ph, show: a.show}
	st.sp = plan.StoppingPoint{
		ID: id, Title: strings.Join(a.question, " "), Audience: a.who,
		Summary: a.summary, Expires: a.expires, OnExpiry: a.onExpiry,
		RemindAfter: a.remindAfter, EscalateAfter: a.escalateAfter, EscalateTo: a.escalateTo,
		Approvers: a.approvers, Quorum: a.quorum,
	}
	if a.onExpiry == "escalate" && a.escalateTo == "" {
		b.d.errorf(a.onExpiryPos, CodeBadSetting, "`on expiry: escalate` needs whom to escalate to: add `escalate after: DURATION to ROLE`")
	}
	for _, am := range a.amend {
		st.sp.Amend = append(st.sp.Amend, plan.AmendBound{Field: am.field, Min: am.min, Max: am.max})
	}
	if c := a.check; c != nil {
		st.sp.Check = &plan.Check{ID: c.id, Server: c.server, Tool: c.tool, Args: canonicalArgs(c.args), Fields: c.fields}
		if t, ok := b.cat.Lookup(c.server, c.tool); !ok {
			b.d.errorf(c.pos, CodeUnknownTool, "unknown tool `%s.%s` in `check:`%s", c.server, c.tool, suggest(c.tool, b.cat.Tools(c.server), "tools"))
		} else if !t.ReadOnly {
			b.d.errorf(c.pos, CodeBadSetting, "`check:` runs `%s.%s` again before the approval is used, so it must be read-only; this tool has side effects", c.server, c.tool)
		}
	}
	question := a.text || len(a.options) > 0
	switch {
	case a.text:
		st.sp.Type = plan.StopText
		if len(a.options) > 0 {
			b.d.errorf(a.optPos, CodeBadSetting, "a free-text ask `(text)` takes no `options:`")
		}
	case len(a.options) > 0:
		st.sp.Type = plan.StopChoice
	default:
		st.sp.Type = plan.StopMenu
	}
	if question {
		if a.check != nil || len(a.amend) > 0 {
			b.d.errorf(a.pos, CodeBadSetting, "this ask is a question (it has options or takes text), and questions govern no side effect, so `check:` and `amend:` have nothing to protect; remove `options:` to make it an approval gate")
		}
		if a.ifNo != nil {
			b.d.errorf(a.ifNoPos, CodeBadSetting, "a question has no No: every option continues with what follows")
		}
	}
	b.stops[id] = st
	b.asks = append(b.asks, st)
	ph.stops = append(ph.stops, st)
	if st.menu() {
		no := &srcPhase{sections: nil}
		if a.ifNo != nil {
			no = a.ifNo
		}
		noPh := b.phase(no, ph, st)
		yesPh := b.phase(sp.rest, ph, st)
		st.opts = []*copt{{id: "1", label: "Yes", ph: yesPh}, {id: "2", label: "No", ph: noPh}}
		return
	}
	for i, o := range a.options {
		st.opts = append(st.opts, &copt{id: fmt.Sprint(i + 1), label: o})
	}
	st.then = b.phase(sp.rest, ph, st)
}
