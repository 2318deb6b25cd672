package compiler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// This file is where an approval gate becomes structure. It decides which
// gate governs each side effect, when each gate opens (its after), refuses a
// side effect that an ask depends on, and puts a gate of its own in front of
// every other ungoverned side effect.

// walk calls f for every phase, parents first.
func walk(ph *cphase, f func(*cphase)) {
	f(ph)
	for _, st := range ph.stops {
		for _, o := range st.opts {
			if o.ph != nil {
				walk(o.ph, f)
			}
		}
		if st.then != nil {
			walk(st.then, f)
		}
	}
}

// innermostMenu is the nearest approval gate around phase ph.
func innermostMenu(ph *cphase) *cstop {
	for p := ph; p != nil; p = p.parent {
		if p.owner != nil && p.owner.menu() {
			return p.owner
		}
	}
	return nil
}

// known reports whether the value a step reads through r is fixed when
// gate g is asked: a run input, a step outside g's continuation, or an ask
// answered no later than g.
func (b *builder) known(r srcRef, g *cstop) bool {
	if _, ok := b.inputs[r.ref.ID]; ok {
		return true // given when the run starts
	}
	if c, ok := b.steps[r.ref.ID]; ok {
		return within(g.phase, c.phase)
	}
	if st, ok := b.stops[r.ref.ID]; ok {
		// The gate's own answer is not known when it is asked: a step that
		// reads it gets a gate of its own, asked once it is.
		return encloses(st, g.phase)
	}
	return false
}

// needsGate reports whether c is a side effect that no gate governs yet.
func (b *builder) needsGate(c *cstep) bool {
	if c.ps.Kind != plan.KindTool || !c.ps.SideEffect || c.ps.WithoutAsking || c.refuse {
		return false
	}
	g := innermostMenu(c.phase)
	if g == nil {
		return true
	}
	for _, r := range c.src.refs {
		if !b.known(r, g) {
			return true
		}
	}
	return false
}

func (b *builder) gates(root *cphase) {
	// A: which explicit gate governs which side effect.
	var ungoverned []*cstep
	for _, c := range b.order {
		if c.ps.Kind != plan.KindTool || !c.ps.SideEffect || c.ps.WithoutAsking {
			continue
		}
		if b.needsGate(c) {
			ungoverned = append(ungoverned, c)
			continue
		}
		c.gov = innermostMenu(c.phase)
		c.gov.governed = append(c.gov.governed, c)
	}
	for _, c := range b.order {
		if c.ps.WithoutAsking && c.ps.SideEffect {
			b.notes = append(b.notes, plan.Note{Code: plan.NoteWithoutAsking, Step: c.ps.ID,
				Message: fmt.Sprintf("⚠ `%s` (%s·%s) runs without asking: starting the run approves it, with the starter recorded as the approver, where policy allows", c.ps.ID, c.ps.Server, c.ps.Tool)})
			b.unaskedKnown(c)
		}
	}

	// B: when each explicit ask opens, and the settings that need its
	// governed steps.
	for _, st := range b.asks {
		b.after(st)
		b.amendCheck(st)
	}

	// C: refuse a side effect that an ask depends on. Each ask's closure is
	// computed once; a path is traced only for a diagnostic.
	if len(ungoverned) > 0 {
		reach := make([]map[string]bool, len(b.asks))
		for i, st := range b.asks {
			reach[i] = map[string]bool{}
			b.closure(reach[i], st.sp.After)
		}
		b.refuse(ungoverned, reach)
	}

	// D: a gate of its own in front of every other ungoverned side effect.
	walk(root, b.addGates)

	// E: edges to enclosing phases that the gates around a step do not
	// already guarantee.
	walk(root, func(ph *cphase) {
		avail := map[string]bool{}
		for p := ph; p.parent != nil; p = p.parent {
			b.closure(avail, p.owner.sp.After)
		}
		for _, c := range ph.steps {
			deps := append([]string(nil), c.deps...)
			for _, o := range c.outer {
				if !avail[o] {
					deps = addUnique(deps, o)
				}
			}
			if len(deps) > 0 {
				c.ps.DependsOn = deps
			}
		}
	})
}

// unaskedKnown refuses a `without asking` side effect whose args read an
// earlier step or an answer: starting the run approves it, and the
// starter (and policy) can judge only what is known at the start — the
// args as written, with the run's inputs put in. The start refuses such a
// step too (approvals.Desk.MayStartUnasked), for plans from elsewhere.
func (b *builder) unaskedKnown(c *cstep) {
	for _, r := range c.src.refs {
		if _, input := b.inputs[r.ref.ID]; input {
			continue
		}
		var what string
		if _, ok := b.steps[r.ref.ID]; ok {
			what = "the output of step `" + r.ref.ID + "`"
		} else if _, ok := b.stops[r.ref.ID]; ok {
			what = "the answer to ask `" + r.ref.ID + "`"
		} else {
			continue // an unknown name, refused where it is looked up
		}
		b.d.errorf(r.pos, CodeUnaskedUnknown, "`%s` (%s·%s) runs without asking, so starting the run approves it, but its args read `{%s}`, %s, which is not known at the start; "+
			"remove `without asking` so it is asked once `{%s}` is known, or write the args with values and inputs only", c.ps.ID, c.ps.Server, c.ps.Tool, r.ref, what, r.ref.ID)
	}
}

// closure adds ids and everything they wait for to set.
func (b *builder) closure(set map[string]bool, ids []string) {
	for _, id := range ids {
		if set[id] {
			continue
		}
		set[id] = true
		if c := b.steps[id]; c != nil {
			b.closure(set, b.edges(c))
		}
	}
}

// pathTo returns a chain from one of from to id following waits, or nil.
func (b *builder) pathTo(from []string, id string) []string {
	seen := map[string]bool{}
	var dfs func(cur string) []string
	dfs = func(cur string) []string {
		if cur == id {
			return []string{cur}
		}
		if seen[cur] {
			return nil
		}
		seen[cur] = true
		if c := b.steps[cur]; c != nil {
			for _, d := range b.edges(c) {
				if p := dfs(d); p != nil {
					return append([]string{cur}, p...)
				}
			}
		}
		return nil
	}
	for _, f := range from {
		if p := dfs(f); p != nil {
			return p
		}
	}
	return nil
}

// after computes when an explicit ask opens: once what it shows and what
// its governed steps read have finished. An ask that names neither waits
// for the block just above it.
func (b *builder) after(st *cstop) {
	var after []string
	add := func(r srcRef, what string) {
		t, ok := b.lookup(r, st.phase, what)
		if !ok || t.step == nil {
			return
		}
		after = addUnique(after, b.mapTarget(t.step, nil))
	}
	for _, r := range st.show {
		add(r, fmt.Sprintf("the ask %q", st.sp.Title))
		st.sp.Show = append(st.sp.Show, r.ref.String())
	}
	for _, c := range st.governed {
		for _, r := range c.src.refs {
			if c2, ok := b.steps[r.ref.ID]; ok {
				after = addUnique(after, b.mapTarget(c2, nil))
			}
		}
	}
	if len(after) == 0 {
		after = b.blockAbove(st.phase)
	}
	st.sp.After = after
}

// blockAbove lists what an ask with no inputs of its own waits for: the
// last block of steps above it in its phase.
func (b *builder) blockAbove(ph *cphase) []string {
	for i := len(ph.secs) - 1; i >= 0; i-- {
		sec := ph.secs[i]
		if len(sec.steps) == 0 {
			continue
		}
		if j, ok := b.joins[sec]; ok {
			return []string{j.ps.ID}
		}
		var out []string
		for _, s := range sec.steps {
			if c := b.steps[s.id]; c != nil && c.src == s && !c.moved {
				out = append(out, s.id)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return []string{}
}

// amendCheck validates amend: fields against the steps the ask governs.
func (b *builder) amendCheck(st *cstop) {
	if st.src == nil {
		return
	}
	for _, am := range st.src.amend {
		found := false
		for _, c := range st.governed {
			v, ok := c.src.args[am.field]
			if !ok {
				continue
			}
			found = true
			if n, ok := v.(interface{ Int64() (int64, error) }); ok {
				if x, err := n.Int64(); err == nil && (x < am.min || x > am.max) {
					b.d.errorf(am.pos, CodeBadSetting, "`amend: %s` allows %d to %d, but `%s` already asks for %d", am.field, am.min, am.max, c.ps.ID, x)
				}
			}
		}
		if !found {
			var ids []string
			for _, c := range st.governed {
				ids = append(ids, c.ps.ID)
			}
			if len(ids) == 0 {
				b.d.errorf(am.pos, CodeBadSetting, "`amend: %s` has nothing to change: this ask governs no side-effecting step", am.field)
			} else {
				b.d.errorf(am.pos, CodeBadSetting, "`amend: %s` names no arg of the steps this ask governs (%s)", am.field, strings.Join(ids, ", "))
			}
		}
	}
}

// addGates wraps each ungoverned side effect of ph, with the steps of ph
// that depend on it, in a gate of its own asked once its args are known.
// It indexes edges once per phase, so many side effects cost linear time.
func (b *builder) addGates(ph *cphase) {
	depth := 0
	for p := ph; p.parent != nil; p = p.parent {
		depth++
	}
	order := make(map[*cstep]int, len(ph.steps))
	rev := map[string][]*cstep{} // step id → steps of ph that wait for it
	for i, x := range ph.steps {
		order[x] = i
		for _, d := range b.edges(x) {
			rev[d] = append(rev[d], x)
		}
	}
	var readers map[string][]*cstep // step id of ph → readers further down; built on demand
	moved := map[*cstep]bool{}
	var gates []*cstop
	for _, c := range ph.steps {
		if moved[c] || c.src == nil || !b.needsGate(c) {
			continue
		}
		if depth >= 2*MaxAskDepth {
			b.d.errorf(c.src.pos, CodeGatedDependent, "`%s` would need a gate nested more than %d deep: side effects that each read the one before chain their gates; put them under one ask, or split the recipe", c.ps.ID, 2*MaxAskDepth)
			c.refuse = true
			continue
		}
		// The steps of ph that wait for c move with it.
		moving := map[*cstep]bool{c: true}
		queue := []*cstep{c}
		for len(queue) > 0 {
			x := queue[0]
			queue = queue[1:]
			for _, y := range rev[x.ps.ID] {
				if !moving[y] {
					moving[y] = true
					queue = append(queue, y)
				}
			}
		}
		if readers == nil {
			readers = b.readersBelow(ph)
		}
		if !b.canWrap(c, moving, readers) {
			c.refuse = true
			continue
		}
		g := b.gateFor(c, ph, moving, order)
		for x := range moving {
			moved[x] = true
		}
		gates = append(gates, g)
	}
	if len(gates) == 0 {
		return
	}
	keep := ph.steps[:0:0]
	for _, x := range ph.steps {
		if !moved[x] {
			keep = append(keep, x)
		}
	}
	ph.steps = keep
	ph.stops = append(gates, ph.stops...)
}

// gateFor builds the gate in front of side effect c and moves the steps
// in moving (c and what waits for it) into its Yes option.
func (b *builder) gateFor(c *cstep, ph *cphase, moving map[*cstep]bool, order map[*cstep]int) *cstop {
	g := &cstop{phase: ph}
	g.sp = plan.StoppingPoint{
		ID:       b.unique("gate_" + c.ps.ID),
		Type:     plan.StopMenu,
		Title:    fmt.Sprintf("run %s (%s·%s)?", c.ps.ID, c.ps.Server, c.ps.Tool),
		Audience: plan.AudienceRequester,
		Added:    true,
		Reason:   fmt.Sprintf("`%s` has a side effect and no ask governs it", c.ps.ID),
		After:    []string{},
	}
	for _, r := range c.src.refs {
		if t, ok := b.steps[r.ref.ID]; ok {
			g.sp.After = addUnique(g.sp.After, b.mapTarget(t, nil))
		}
	}
	yes := &cphase{parent: ph, owner: g}
	idx := make([]int, 0, len(moving))
	for x := range moving {
		idx = append(idx, order[x])
	}
	slices.Sort(idx)
	for _, i := range idx {
		yes.steps = append(yes.steps, ph.steps[i])
	}
	for _, x := range yes.steps {
		x.phase = yes
		// Edges to steps that stay behind now reach an enclosing phase.
		var local, outer []string
		for _, d := range x.deps {
			if dc := b.steps[d]; dc != nil && moving[dc] {
				local = append(local, d)
			} else {
				outer = append(outer, d)
			}
		}
		x.deps, x.outer = local, append(outer, x.outer...)
	}
	g.opts = []*copt{{id: "1", label: "Yes", ph: yes}, {id: "2", label: "No", ph: &cphase{parent: ph, owner: g}}}
	c.gov = g
	g.governed = []*cstep{c}
	b.stops[g.sp.ID] = g
	why := "no ask governs it"
	if innermostMenu(ph) != nil {
		why = "the ask above cannot show its args, which are known only later"
	}
	b.notes = append(b.notes, plan.Note{Code: plan.NoteAddedGate, Step: c.ps.ID,
		Message: fmt.Sprintf("⚠ `%s` (%s·%s) has a side effect and %s, so the run stops and asks before it (%s)", c.ps.ID, c.ps.Server, c.ps.Tool, why, g.sp.ID)})
	return g
}

// readersBelow maps each step id to the steps in phases nested under ph's
// stopping points that read it.
func (b *builder) readersBelow(ph *cphase) map[string][]*cstep {
	out := map[string][]*cstep{}
	for _, st := range ph.stops {
		walkStop(st, func(sub *cphase) {
			for _, x := range sub.steps {
				for _, d := range x.outer {
					out[d] = append(out[d], x)
				}
			}
		})
	}
	return out
}

// canWrap checks that nothing outside the moving steps reads them: a fan's
// join would be split, and readers further down could not see them.
func (b *builder) canWrap(c *cstep, moving map[*cstep]bool, readers map[string][]*cstep) bool {
	if c.fan != nil {
		b.d.errorf(c.src.pos, CodeGatedDependent, "`%s` (%s·%s) has a side effect that no ask governs, and it sits in fan `%s` whose join other steps wait for; put it under an ask or mark it `without asking`", c.ps.ID, c.ps.Server, c.ps.Tool, c.fan.name)
		return false
	}
	if len(readers) == 0 {
		return true
	}
	ok := true
	for _, m := range b.order { // source order keeps the diagnostics stable
		if !moving[m] {
			continue
		}
		for _, x := range readers[m.ps.ID] {
			pos := Pos{Line: 1, Col: 1}
			if x.src != nil {
				pos = x.src.pos
			}
			b.d.errorf(pos, CodeGatedDependent, "`%s` reads `%s`, which needs a gate of its own because it has a side effect that no ask governs; move `%s` under the ask above `%s`, or mark it `without asking`", x.ps.ID, m.ps.ID, c.ps.ID, x.ps.ID)
			ok = false
		}
	}
	return ok
}

func walkStop(st *cstop, f func(*cphase)) {
	for _, o := range st.opts {
		if o.ph != nil {
			walk(o.ph, f)
		}
	}
	if st.then != nil {
		walk(st.then, f)
	}
}

// refuse reports each ungoverned side effect that an ask depends on; reach
// holds, per explicit ask, everything its opening waits for.
func (b *builder) refuse(ungoverned []*cstep, reach []map[string]bool) {
	for _, c := range ungoverned {
		for i, st := range b.asks {
			if !reach[i][c.ps.ID] {
				continue
			}
			path := b.pathTo(st.sp.After, c.ps.ID)
			via := ""
			if len(path) > 1 {
				via = " through " + strings.Join(path[:len(path)-1], " → ")
			}
			b.d.errorf(c.src.pos, CodeEffectBeforeAsk,
				"`%s` (%s·%s) has a side effect that no ask governs, but the ask %q (line %d) depends on it%s, so it would already have happened before anyone is asked; move `%s` under the ask, below its question, so the answer governs it",
				c.ps.ID, c.ps.Server, c.ps.Tool, st.sp.Title, st.src.pos.Line, via, c.ps.ID)
			c.refuse = true
			break
		}
	}
}
