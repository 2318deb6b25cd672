package plan

import (
	"fmt"
	"strings"
)

// Problem is one way a plan breaks the rules Verify enforces.
type Problem struct {
	ID     string // the step or stopping point at fault ("" for the plan)
	Rule   string // a stable name: "I1", "unique_id", "reference", "join", "cycle", "shape"
	Reason string
}

func (p Problem) String() string {
	if p.ID == "" {
		return p.Rule + ": " + p.Reason
	}
	return fmt.Sprintf("%s: %s: %s", p.Rule, p.ID, p.Reason)
}

// VerifyError lists every problem Verify found.
type VerifyError struct{ Problems []Problem }

func (e *VerifyError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "plan fails verification: " + strings.Join(parts, "; ")
}

// Verify checks p independently of whoever built it. It is written apart
// from the compiler on purpose: the engine calls it on every plan before a
// run starts, so a compiler bug or a hand-made plan cannot walk past a gate.
//
// It checks that ids are unique; that every depends_on, join member, after
// and {reference} names a step that is visible and finished before the
// reader runs; that joins can be satisfied; that there is no cycle; that the
// shapes of steps and stopping points are whole; and I1: every side-effecting
// step either carries without_asking or sits inside an option of an approval
// gate (menu) whose opening already knows every value its args read.
//
// It returns nil or a *VerifyError.
func Verify(p *Plan) error {
	if p == nil {
		return &VerifyError{[]Problem{{Rule: "shape", Reason: "no plan"}}}
	}
	v := &verifier{ids: map[string]bool{}, steps: map[string]*Step{}, inputs: map[string]bool{}}
	v.declareInputs(p.Inputs)
	v.phase(p.InitialSteps, p.StoppingPoints, scope{})
	if len(v.problems) > 0 {
		return &VerifyError{v.problems}
	}
	return nil
}

type verifier struct {
	ids      map[string]bool  // every id seen anywhere
	steps    map[string]*Step // steps of the phases on the current path
	inputs   map[string]bool  // the run inputs the plan reads: known from the start
	problems []Problem
}

// scope is what a phase inherits from the stopping points around it.
type scope struct {
	visible map[string]bool // steps of enclosing phases
	avail   map[string]bool // steps certainly finished when this phase starts
	asks    map[string]bool // enclosing stopping points (their answers are readable)
	gate    *StoppingPoint  // innermost enclosing approval gate
	atGate  map[string]bool // what was finished when gate opened
	gateAsk map[string]bool // stopping points enclosing gate (answered before it)
}

func (v *verifier) fail(id, rule, format string, args ...any) {
	v.problems = append(v.problems, Problem{ID: id, Rule: rule, Reason: fmt.Sprintf(format, args...)})
}

func (v *verifier) claim(id string) {
	if id == "" {
		v.fail("", "shape", "a step or stopping point has no id")
		return
	}
	if v.ids[id] {
		v.fail(id, "unique_id", "id %q is used more than once", id)
	}
	v.ids[id] = true
}

// declareInputs checks the plan's input names: references can name them,
// sorted, and no step or ask shares one (they claim ids first).
func (v *verifier) declareInputs(names []string) {
	for i, n := range names {
		if !IsName(n) {
			v.fail("", "shape", "input %q is not a name a reference can read", n)
		}
		if i > 0 && names[i-1] >= n {
			v.fail("", "shape", "inputs must be sorted and unique (%q after %q)", n, names[i-1])
		}
		v.claim(n)
		v.inputs[n] = true
	}
}

func copySet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, val := range m {
		out[k] = val
	}
	return out
}

func (v *verifier) phase(steps []Step, sps []StoppingPoint, sc scope) {
	local := map[string]bool{}
	for i := range steps {
		s := &steps[i]
		v.claim(s.ID)
		local[s.ID] = true
		v.steps[s.ID] = s
	}
	visible := copySet(sc.visible)
	for id := range local {
		visible[id] = true
	}
	defer func() {
		for id := range local {
			delete(v.steps, id)
		}
	}()
	if !v.acyclic(steps, local) {
		return // closures below would not terminate meaningfully
	}
	for i := range steps {
		v.step(&steps[i], local, visible, sc)
	}
	for i := range sps {
		v.claim(sps[i].ID)
	}
	for i := range sps {
		v.stop(&sps[i], visible, sc)
	}
}

// deps is a step's direct predecessors: depends_on and, for joins, in.
func deps(s *Step) []string {
	if s.Kind == KindJoin {
		return append(append([]string(nil), s.DependsOn...), s.In...)
	}
	return s.DependsOn
}

func (v *verifier) acyclic(steps []Step, local map[string]bool) bool {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	ok := true
	var visit func(id string)
	visit = func(id string) {
		color[id] = grey
		for _, d := range deps(v.steps[id]) {
			if !local[d] {
				continue
			}
			switch color[d] {
			case grey:
				v.fail(id, "cycle", "%q and %q wait for each other", id, d)
				ok = false
			case white:
				visit(d)
			}
		}
		color[id] = black
	}
	for i := range steps {
		if color[steps[i].ID] == white {
			visit(steps[i].ID)
		}
	}
	return ok
}

// reaches reports whether target is among ids or what they transitively
// wait for. It stops at the first hit, so a reference to a direct
// dependency costs one step, not a whole closure.
func (v *verifier) reaches(ids []string, target string, seen map[string]bool) bool {
	for _, id := range ids {
		if id == target {
			return true
		}
	}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if s, ok := v.steps[id]; ok && v.reaches(deps(s), target, seen) {
			return true
		}
	}
	return false
}

// closure adds ids and everything they transitively wait for to set.
func (v *verifier) closure(set map[string]bool, ids []string) {
	for _, id := range ids {
		if set[id] {
			continue
		}
		s, ok := v.steps[id]
		if !ok {
			continue
		}
		set[id] = true
		v.closure(set, deps(s))
	}
}

func (v *verifier) step(s *Step, local, visible map[string]bool, sc scope) {
	for _, d := range s.DependsOn {
		if d == s.ID {
			v.fail(s.ID, "cycle", "depends on itself")
		} else if !visible[d] {
			v.fail(s.ID, "reference", "depends_on %q names no step it can see", d)
		}
	}
	switch s.Kind {
	case KindJoin:
		if len(s.In) == 0 {
			v.fail(s.ID, "join", "a join needs steps to wait for")
		}
		for _, m := range s.In {
			if !local[m] {
				v.fail(s.ID, "join", "member %q is not a step of the same phase", m)
			}
		}
		if s.MinSuccess < 1 || s.MinSuccess > len(s.In) {
			v.fail(s.ID, "join", "min_success %d is impossible with %d members", s.MinSuccess, len(s.In))
		}
		if s.SideEffect {
			v.fail(s.ID, "shape", "a join has no side effect")
		}
		return
	case KindTool:
		if s.Server == "" || s.Tool == "" {
			v.fail(s.ID, "shape", "a tool step needs server and tool")
		}
	case KindProse:
		if s.Prompt == "" {
			v.fail(s.ID, "shape", "a prose step needs a prompt")
		}
		if s.SideEffect {
			v.fail(s.ID, "shape", "prose steps are read-only and cannot have side effects")
		}
	default:
		v.fail(s.ID, "shape", "unknown kind %q", s.Kind)
		return
	}
	if s.OnFail != "" && s.OnFail != OnFailSkip && s.OnFail != OnFailStop {
		v.fail(s.ID, "shape", "on_fail %q is neither skip nor stop", s.OnFail)
	}

	var refs []Ref
	if s.Kind == KindTool {
		var err error
		refs, err = ObjectRefs(s.Args)
		if err != nil {
			v.fail(s.ID, "shape", "args: %v", err)
			return
		}
	} else {
		refs = Refs(s.Prompt)
	}
	for _, r := range refs {
		switch {
		case sc.asks[r.ID], v.inputs[r.ID]:
		case !visible[r.ID] && !local[r.ID]:
			v.fail(s.ID, "reference", "{%s} names no step or enclosing ask it can see", r)
		case !sc.avail[r.ID] && !v.reaches(s.DependsOn, r.ID, map[string]bool{}):
			v.fail(s.ID, "reference", "{%s} is not finished before %q runs (add it to depends_on)", r, s.ID)
		}
	}

	if !s.SideEffect || s.WithoutAsking {
		return
	}
	// I1: the innermost enclosing approval gate must know every value the
	// step reads when it is asked, so the approver sees exactly what runs.
	if sc.gate == nil {
		v.fail(s.ID, "I1", "side-effecting step is inside no approval gate and is not marked without_asking")
		return
	}
	for _, r := range refs {
		if !sc.atGate[r.ID] && !sc.gateAsk[r.ID] && !v.inputs[r.ID] {
			v.fail(s.ID, "I1", "gate %q cannot show {%s}: it is not known when the gate is asked", sc.gate.ID, r)
		}
	}
}

func (v *verifier) stop(sp *StoppingPoint, visible map[string]bool, sc scope) {
	for _, a := range sp.After {
		if !visible[a] {
			v.fail(sp.ID, "reference", "after %q names no step it can see", a)
		}
	}
	for _, sh := range sp.Show {
		r := ParseRef(sh)
		if !visible[r.ID] && !sc.asks[r.ID] && !v.inputs[r.ID] {
			v.fail(sp.ID, "reference", "show %q names no step it can see", sh)
		}
	}
	if sp.Check != nil {
		if sp.Check.Server == "" || sp.Check.Tool == "" || len(sp.Check.Fields) == 0 {
			v.fail(sp.ID, "shape", "a check needs a server, a tool and material fields")
		}
		if _, err := DecodeObject(sp.Check.Args); err != nil {
			v.fail(sp.ID, "shape", "check args: %v", err)
		}
	}
	for _, a := range sp.Amend {
		if a.Min > a.Max {
			v.fail(sp.ID, "shape", "amend %q: min %d is above max %d", a.Field, a.Min, a.Max)
		}
	}
	if sp.Quorum < 0 {
		v.fail(sp.ID, "shape", "quorum %d is negative", sp.Quorum)
	}

	// What is finished when this stopping point opens.
	at := copySet(sc.avail)
	v.closure(at, sp.After)
	asks := copySet(sc.asks)
	inner := scope{visible: visible, avail: at, asks: asks, gate: sc.gate, atGate: sc.atGate, gateAsk: sc.gateAsk}
	asks[sp.ID] = true

	labels := map[string]bool{}
	ids := map[string]bool{}
	for _, o := range sp.Options {
		if o.ID == "" || ids[o.ID] {
			v.fail(sp.ID, "shape", "option ids must be present and unique (got %q)", o.ID)
		}
		ids[o.ID] = true
		l := strings.ToLower(o.Label)
		if o.Label == "" || labels[l] {
			v.fail(sp.ID, "shape", "option labels must be present and unique (got %q)", o.Label)
		}
		labels[l] = true
	}

	switch sp.Type {
	case StopMenu:
		if len(sp.Options) == 0 {
			v.fail(sp.ID, "shape", "an approval gate needs options")
		}
		if sp.Then != nil {
			v.fail(sp.ID, "shape", "an approval gate's continuation lives in its options, not in then")
		}
		gateScope := inner
		gateScope.gate = sp
		gateScope.atGate = at
		gateScope.gateAsk = copySet(sc.asks)
		for _, o := range sp.Options {
			v.phase(o.Steps, o.StoppingPoints, gateScope)
		}
	case StopChoice, StopText:
		if sp.Type == StopChoice && len(sp.Options) < 2 {
			v.fail(sp.ID, "shape", "a question with options needs at least two")
		}
		if sp.Type == StopText && len(sp.Options) > 0 {
			v.fail(sp.ID, "shape", "a free-text question has no options")
		}
		for _, o := range sp.Options {
			if len(o.Steps) > 0 || len(o.StoppingPoints) > 0 {
				v.fail(sp.ID, "shape", "a question's options are labels; its continuation is then")
			}
		}
		if sp.Check != nil || len(sp.Amend) > 0 {
			v.fail(sp.ID, "shape", "a question governs nothing, so it has no check or amend")
		}
		if sp.Then != nil {
			v.phase(sp.Then.Steps, sp.Then.StoppingPoints, inner)
		}
	default:
		v.fail(sp.ID, "shape", "unknown stopping point type %q", sp.Type)
	}
}
