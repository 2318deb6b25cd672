package compiler

import (
	"fmt"
	"strings"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// target is what a reference names: a step, an ask's answer or a run
// input.
type target struct {
	step  *cstep
	ask   *cstop
	input bool
}

// within reports whether phase ph is anc or nested inside it.
func within(ph, anc *cphase) bool {
	for p := ph; p != nil; p = p.parent {
		if p == anc {
			return true
		}
	}
	return false
}

// encloses reports whether stopping point st is an owner on ph's path.
func encloses(st *cstop, ph *cphase) bool {
	for p := ph; p != nil; p = p.parent {
		if p.owner == st {
			return true
		}
	}
	return false
}

// lookup resolves a reference read from phase ph, reporting unknown and
// unreachable names. what describes the reader for messages.
func (b *builder) lookup(r srcRef, ph *cphase, what string) (target, bool) {
	if c, ok := b.steps[r.ref.ID]; ok {
		if !within(ph, c.phase) {
			b.d.errorf(r.pos, CodeHiddenRef, "%s reads `{%s}`, but `%s` runs only %s, so it is not there to read; move the reader below it", what, r.ref, r.ref.ID, b.where(c.phase))
			return target{}, false
		}
		return target{step: c}, true
	}
	if st, ok := b.stops[r.ref.ID]; ok && st.src != nil && st.src.as != "" {
		if !encloses(st, ph) {
			b.d.errorf(r.pos, CodeHiddenRef, "%s reads `{%s}`, but that ask's answer is known only below the ask; move the reader below it", what, r.ref.ID)
			return target{}, false
		}
		if r.ref.Field != "" {
			b.d.errorf(r.pos, CodeUnknownRef, "`{%s}` is an answer, which has no fields; write `{%s}`", r.ref, r.ref.ID)
		}
		return target{ask: st}, true
	}
	if _, ok := b.inputs[r.ref.ID]; ok {
		if r.ref.Field != "" {
			b.d.errorf(r.pos, CodeUnknownRef, "`{%s}` is an input, which is text with no fields; write `{%s}`", r.ref, r.ref.ID)
		}
		b.inputs[r.ref.ID] = true
		return target{input: true}, true
	}
	if b.d.full() {
		b.d.errorf(r.pos, CodeUnknownRef, "`{%s}` names no step or ask", r.ref)
		return target{}, false
	}
	var names []string
	for _, c := range b.order {
		if within(ph, c.phase) {
			names = append(names, c.ps.ID)
		}
	}
	b.d.errorf(r.pos, CodeUnknownRef, "`{%s}` names no step or ask%s", r.ref, suggest(r.ref.ID, names, "steps it can read"))
	return target{}, false
}

// where says in words when steps of ph run.
func (b *builder) where(ph *cphase) string {
	if ph.owner == nil {
		return "at the top"
	}
	for _, o := range ph.owner.opts {
		if o.ph == ph {
			return fmt.Sprintf("after %q is answered %s", ph.owner.sp.Title, o.label)
		}
	}
	return fmt.Sprintf("after %q is answered", ph.owner.sp.Title)
}

// mapTarget turns a reference to a fan member read from outside the fan
// into an edge to the fan's join: readers wait for the join, which holds
// when enough branches succeeded.
func (b *builder) mapTarget(t *cstep, readerFan *section) string {
	if t.fan != nil && t.fan != readerFan {
		if j, ok := b.joins[t.fan]; ok {
			return j.ps.ID
		}
	}
	return t.ps.ID
}

func addUnique(list []string, id string) []string {
	for _, x := range list {
		if x == id {
			return list
		}
	}
	return append(list, id)
}

// resolve checks every reference and records the edges it makes.
func (b *builder) resolve() {
	for _, c := range b.order {
		s := c.src
		refs := append(append([]srcRef(nil), s.refs...), s.after...)
		for i, r := range refs {
			isAfter := i >= len(s.refs)
			if r.ref.ID == s.id {
				b.d.errorf(r.pos, CodeCircularRef, "`%s` reads itself", s.id)
				continue
			}
			t, ok := b.lookup(r, c.phase, fmt.Sprintf("`%s`", s.id))
			if !ok {
				continue
			}
			if t.input {
				if isAfter {
					b.d.errorf(r.pos, CodeUnknownRef, "`after:` names steps; `%s` is an input, known from the start", r.ref.ID)
				}
				continue
			}
			if t.ask != nil {
				if isAfter {
					b.d.errorf(r.pos, CodeUnknownRef, "`after:` names steps; `%s` is an ask, and steps below it already wait for it", r.ref.ID)
				}
				continue
			}
			if c.fan != nil && t.step.fan == c.fan {
				b.d.errorf(r.pos, CodeFanSelfRef, "`%s` and `%s` are in the same fan `%s`, which runs its steps at the same time, so `%s` cannot read `%s`; put `%s` under `then:`", s.id, t.step.ps.ID, c.fan.name, s.id, t.step.ps.ID, s.id)
				continue
			}
			id := b.mapTarget(t.step, c.fan)
			if t.step.phase == c.phase {
				c.deps = addUnique(c.deps, id)
			} else {
				c.outer = addUnique(c.outer, id)
			}
		}
	}
	b.cycles()
}

// cycles reports reference cycles among the steps of each phase.
func (b *builder) cycles() {
	const (
		white = iota
		grey
		black
	)
	color := map[*cstep]int{}
	var stack []*cstep
	var visit func(c *cstep) bool
	visit = func(c *cstep) bool {
		color[c] = grey
		stack = append(stack, c)
		for _, d := range b.edges(c) {
			dc := b.steps[d]
			if dc == nil || dc.phase != c.phase {
				continue
			}
			switch color[dc] {
			case grey:
				var path []string
				start := 0
				for i, x := range stack {
					if x == dc {
						start = i
					}
				}
				for _, x := range stack[start:] {
					path = append(path, x.ps.ID)
				}
				path = append(path, dc.ps.ID)
				pos := Pos{Line: 1, Col: 1}
				if c.src != nil {
					pos = c.src.pos
				}
				b.d.errorf(pos, CodeCircularRef, "circular reference: %s; each waits for the next, so none can start", strings.Join(path, " → "))
				return false
			case white:
				if !visit(dc) {
					return false
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[c] = black
		return true
	}
	for _, c := range b.order {
		if color[c] == white {
			stack = stack[:0]
			visit(c)
		}
	}
}

// edges returns every step c waits for: local deps, outer deps and, for a
// join, its members.
func (b *builder) edges(c *cstep) []string {
	out := append(append([]string(nil), c.deps...), c.outer...)
	if c.ps.Kind == plan.KindJoin {
		out = append(out, c.ps.In...)
	}
	return out
}

// moves notes then: steps that read nothing from above: they start at once,
// alongside the block above.
func (b *builder) moves(ph *cphase) {
	for si, sec := range ph.secs {
		if sec.kind != secThen {
			continue
		}
		prev := prevWithSteps(ph.secs, si)
		if prev == nil {
			continue
		}
		for _, s := range sec.steps {
			c := b.steps[s.id]
			if c == nil || c.src != s || len(c.deps) > 0 || len(c.outer) > 0 || len(s.after) > 0 || readsStep(b, s) {
				continue
			}
			c.moved = true
			if prev.kind == secFan && !c.ps.SideEffect {
				c.ps.ParallelGroup = prev.name
			}
			b.notes = append(b.notes, plan.Note{Code: plan.NoteMoved, Step: s.id,
				Message: fmt.Sprintf("`%s` reads nothing from %s, so it runs alongside them", s.id, stepList(prev.steps))})
		}
	}
}

// readsStep reports whether s references any step (as opposed to asks).
func readsStep(b *builder, s *srcStep) bool {
	for _, r := range s.refs {
		if _, ok := b.steps[r.ref.ID]; ok {
			return true
		}
	}
	return false
}
